"""accelerate's ``set_module_tensor_to_device``, on compat's moves, and a patch that routes
accelerate's own calls through it.

Why: accelerate's function rebuilds some tensor subclasses from their private fields. accelerate
1.2.1 rebuilds TorchAO's ``AffineQuantizedTensor`` from its first private field, which TorchAO 0.7
renamed (pytorch/ao #1046), so ``cpu_offload`` and checkpoint loading of TorchAO weights raise
AttributeError (diffusers #10470; accelerate 1.3.0 reads the new name); accelerate >= 1.7
stores a moved TorchAO weight without re-wrapping it as a parameter. Here every move goes
through :func:`compat.set_module_tensor` (public ``.to()`` and ``nn.Parameter`` only), so the same
accelerate code works on every accelerate release whose call sites :func:`patch` knows, with any
TorchAO release.

::

    from compat.integrations import accelerate as compat_accelerate

    with compat_accelerate.patch():
        model = accelerate.cpu_offload(model, execution_device="cpu")
        out = model(x)

accelerate is imported only when this module is imported (never by ``import compat``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Final, NoReturn

import torch
from torch import nn

from compat import _move
from compat._messages import show
from compat.device import normalize_device
from compat.integrations._patching import Replacement, Replacements

__all__ = ["CALL_SITES", "AccelerateVersionError", "patch", "set_module_tensor_to_device"]

NAME: Final = "set_module_tensor_to_device"
#: Where accelerate binds the function by name, each a copy that must be replaced on its
#: own: the defining module, the ``accelerate.utils`` re-export (what transformers, diffusers
#: and peft import), and the two modules that import it by name (read in every release from
#: 1.2.1 to 1.16.0).
CALL_SITES: Final = (
    "accelerate.utils.modeling",
    "accelerate.utils",
    "accelerate.hooks",
    "accelerate.utils.bnb",
)
# The parameter lists accelerate's function has had: 1.2.1-1.8 and 1.9+ (non_blocking, clear_cache).
_KNOWN_SIGNATURES: Final = (
    ("module", "tensor_name", "device", "value", "dtype", "fp16_statistics", "tied_params_map"),
    (
        "module",
        "tensor_name",
        "device",
        "value",
        "dtype",
        "fp16_statistics",
        "tied_params_map",
        "non_blocking",
        "clear_cache",
    ),
)
# bitsandbytes parameters quantize when they reach an accelerator: accelerate's own code does that
# (the class's constructor and .to() are the quantizer), so it keeps handling them.
_QUANTIZING_PARAMETERS: Final = frozenset({"Int8Params", "FP4Params", "Params4bit"})
# the dtypes accelerate never casts a value from (integers and bool), as it tells them: by name
_NEVER_CAST: Final = frozenset(
    d
    for d in vars(torch).values()
    if isinstance(d, torch.dtype) and str(d).startswith(("torch.uint", "torch.int", "torch.bool"))
)


class AccelerateVersionError(RuntimeError):
    """The installed accelerate binds ``set_module_tensor_to_device`` somewhere :func:`patch`
    does not know, or with a parameter list it does not implement; nothing was patched."""


# --- the function --------------------------------------------------------------------------------


def _accelerate_original() -> Callable[..., Any]:
    """accelerate's own function (the one a patch replaced, or the one in place)."""
    if _ORIGINAL:
        return _ORIGINAL[-1]
    modeling = importlib.import_module("accelerate.utils.modeling")
    function: Callable[..., Any] = getattr(modeling, NAME)
    return function


def _storage_key(t: torch.Tensor) -> int | None:
    """``data_ptr()`` as accelerate keys its tied-parameter map, or None where it means nothing:
    a meta tensor and a wrapper subclass (0, or an error) would all share one key."""
    if t.device.type == "meta" or not _move.is_plain(t):
        return None
    try:
        ptr = int(t.data_ptr())
    except RuntimeError:
        return None
    return ptr or None


def _tied(
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None,
    tensor: torch.Tensor | None,
    device: Any,
) -> torch.Tensor | None:
    if tied_params_map is None or tensor is None:
        return None
    key = _storage_key(tensor)
    if key is None:
        return None
    return tied_params_map.get(key, {}).get(device)


def _tied_copy(
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None,
    sources: tuple[torch.Tensor | None, torch.Tensor],
    device: Any,
) -> torch.Tensor | None:
    """The copy ``tied_params_map`` already holds on ``device`` of the first source's storage."""
    if tied_params_map is None:
        return None
    found = (_tied(tied_params_map, source, device) for source in sources)
    return next((t for t in found if t is not None), None)


def _as_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """accelerate documents ``dtype`` as a ``torch.dtype`` or its name (``"float16"``)."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        found = getattr(torch, dtype.removeprefix("torch."), None)
        if isinstance(found, torch.dtype):
            return found
    raise TypeError(
        f"dtype must be a torch.dtype, its name or None; got {show(dtype)}; accepted: e.g. "
        "torch.float16 or 'float16'"
    )


def set_module_tensor_to_device(
    module: nn.Module,
    tensor_name: str,
    device: int | str | torch.device,
    value: torch.Tensor | None = None,
    dtype: str | torch.dtype | None = None,
    fp16_statistics: torch.Tensor | None = None,
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None = None,
    non_blocking: bool = False,
    clear_cache: bool = True,
) -> None:
    """accelerate's ``set_module_tensor_to_device`` (same signature, same meaning, same object
    semantics, same exceptions), with every move made by compat's moves.

    As in accelerate (1.2.1 to 1.16.0):

    * ``tensor_name`` is dotted; ``value`` (if given) replaces the tensor and must have its shape;
      without ``value`` the tensor itself moves (a meta tensor needs a ``value`` to leave meta).
      Moving to ``"meta"`` drops the data (the offload hooks' ``post_forward``).
    * The module gets a **new** object under ``tensor_name`` in the submodule that owns it (and
      nowhere else); the old object is left as it was, so a reference taken before the move keeps
      its data (accelerate's offload hooks without a weights map keep ``param.to("cpu")``, the
      very parameter on a CPU model, and move the module to meta). A tensor already where it is
      asked to be, without ``value``, is left in place.
    * ``dtype=None`` casts ``value`` to the old tensor's dtype (as ``load_state_dict`` does); a
      given ``dtype`` (a ``torch.dtype`` or its name) casts ``value``, except integer and bool
      values; without ``value`` a ``dtype`` applies only to a move to meta.
    * Bad input raises what the installed accelerate raises, with its message (its own function
      is called to raise it): an unknown submodule, parameter or buffer name, a meta tensor
      without ``value``, a ``value`` of another shape, a ``value`` that is not a tensor.
    * ``tied_params_map`` (``{data_ptr: {device: tensor}}``, built by ``dispatch_model``): a
      tensor whose storage already has a copy on ``device`` gets that copy (no new memory), and a
      new copy is recorded for the next owner. Keys are read for tensors with storage only: a meta
      tensor or a wrapper subclass (TorchAO) has no meaningful ``data_ptr()``, so it never matches
      another's entry (accelerate would match them all on key 0).
    * ``fp16_statistics`` becomes the new parameter's ``SCB`` (bitsandbytes int8 statistics).
    * ``clear_cache`` empties the accelerator's cache after a move to an accelerator.
    * Returns None. bitsandbytes parameters (``Int8Params``, ``FP4Params``, ``Params4bit``), which
      quantize when they reach an accelerator, are handed to accelerate's own function.

    Unlike accelerate (the fix): the new parameter keeps the old one's class (a TorchAO tensor
    stays one, on every TorchAO release, where accelerate 1.2.1 rebuilds it from a field TorchAO
    0.7 renamed), is an ``nn.Parameter`` with the old ``requires_grad`` (accelerate >= 1.7 stores
    a TorchAO weight's ``.to()`` result as it is) and the old object's Python attributes (accelerate
    keeps ``_is_hf_initialized`` only); ``device`` goes through :func:`compat.normalize_device`, so
    an int means the same accelerator on every torch; a move the tensor's class refuses raises
    :class:`compat.TensorMoveError` with the module unchanged.
    """
    found = _locate(module, tensor_name)
    if found is None or _refused_input(found[3], value, device):
        _raise_as_accelerate(
            module, tensor_name, device, value, dtype, fp16_statistics, tied_params_map
        )
    owner, leaf, kind, old = found
    registry: dict[str, Any] = owner._buffers if kind == "buffer" else owner._parameters
    if type(old).__name__ in _QUANTIZING_PARAMETERS:
        extra = (non_blocking, clear_cache) if (non_blocking, clear_cache) != (False, True) else ()
        _accelerate_original()(
            module, tensor_name, device, value, dtype, fp16_statistics, tied_params_map, *extra
        )
        return
    wanted = _as_dtype(dtype)
    shared = _tied_copy(tied_params_map, (value, old), device)
    if shared is not None:
        registry[leaf] = shared
        return
    target = _target(device)
    installed = _install_new(
        module, (registry, leaf), tensor_name, kind, old, value, target, wanted, non_blocking
    )
    if fp16_statistics is not None and kind == "parameter":
        installed.SCB = fp16_statistics.to(target, non_blocking=non_blocking)  # type: ignore[attr-defined]
    if clear_cache and target.type not in ("cpu", "meta"):
        memory = importlib.import_module("accelerate.utils.memory")
        memory.clear_device_cache()
    if tied_params_map is not None:
        _remember_tie(tied_params_map, device, installed, (old, value))


def _install_new(
    module: nn.Module,
    entry: tuple[dict[str, Any], str],
    tensor_name: str,
    kind: _move.Kind,
    old: torch.Tensor,
    value: torch.Tensor | None,
    target: torch.device,
    wanted: torch.dtype | None,
    non_blocking: bool,
) -> torch.Tensor:
    """The moved (and cast) tensor, installed as a new object in ``entry`` only, the old one
    left intact (accelerate's object semantics); the old one itself when nothing changes."""
    cast = _cast_for(kind, old, value, wanted, target)
    source = old if value is None else value
    subclass_cast = None
    if cast is not None and source.dtype != cast:
        source, subclass_cast = _cast_source(source, cast, target, non_blocking)
    if kind == "parameter" and old.requires_grad and not _move.can_require_grad(source.dtype):
        nn.Parameter(source.detach(), requires_grad=True)  # torch's own refusal, as accelerate's
    with torch.no_grad():  # the rules of compat.set_module_tensor, the name already resolved
        move = _move.plan_move(tensor_name, kind, old, source, target, subclass_cast, non_blocking)
        return old if move is None else _replacing(move).install(module, [entry])


def _locate(
    module: nn.Module, tensor_name: str
) -> tuple[nn.Module, str, _move.Kind, torch.Tensor] | None:
    """``(owner, leaf, kind, tensor)`` found as accelerate finds it (attributes along the dotted
    path, then the owner's parameters, then its buffers), or None where accelerate refuses."""
    if not isinstance(module, nn.Module) or not isinstance(tensor_name, str):
        return None
    *path, leaf = tensor_name.split(".")
    owner: object = module
    for part in path:
        owner = getattr(owner, part, None)
        if not isinstance(owner, nn.Module):
            return None
    assert isinstance(owner, nn.Module)
    for kind, registry in (("parameter", owner._parameters), ("buffer", owner._buffers)):
        tensor = registry.get(leaf)
        if isinstance(tensor, torch.Tensor):
            return owner, leaf, kind, tensor  # type: ignore[return-value]
    return None


def _refused_input(old: torch.Tensor, value: object, device: object) -> bool:
    """Input accelerate refuses before it moves anything: a ``value`` that is not a tensor (its
    shape check reads ``value.shape``), of another shape, or none to take a meta tensor off meta."""
    if value is None:
        return old.device.type == "meta" and not _names_meta(device)
    return not isinstance(value, torch.Tensor) or value.shape != old.shape


def _names_meta(device: object) -> bool:
    return device == "meta" or (isinstance(device, torch.device) and device.type == "meta")


def _raise_as_accelerate(
    module: nn.Module,
    tensor_name: str,
    device: Any,
    value: Any,
    dtype: Any,
    fp16_statistics: Any,
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None,
) -> NoReturn:
    """Raise what the installed accelerate raises for this call, with its own message: its own
    function is called, and it refuses before it changes anything. Where accelerate would first
    take a tied copy from ``tied_params_map`` instead (it matches meta tensors on pointer 0), or
    should it not refuse, a ValueError says what compat refused."""
    if not _accelerate_would_tie(tied_params_map, value, module, tensor_name, device):
        _accelerate_original()(
            module, tensor_name, device, value, dtype, fp16_statistics, tied_params_map
        )
    raise ValueError(
        f"cannot set {tensor_name!r}: no parameter or buffer of that name holds a tensor of the "
        "value's shape, or it is on the meta device with no value; accepted: a dotted name of a "
        "registered tensor and, for a meta tensor, value= of its shape"
    )


def _accelerate_would_tie(
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None,
    value: Any,
    module: nn.Module,
    tensor_name: str,
    device: Any,
) -> bool:
    """Whether accelerate's first step (a copy already in ``tied_params_map``, keyed by raw
    ``data_ptr()``) would install something for this call before checking it."""
    if not tied_params_map:
        return False
    found = _locate(module, tensor_name)
    for source in (value, None if found is None else found[3]):
        try:
            key = source.data_ptr()  # type: ignore[union-attr]
        except Exception:  # None, or no storage: accelerate's check would raise too
            continue
        if key in tied_params_map and device in tied_params_map[key]:
            return True
    return False


def _replacing(move: _move.Move) -> _move.Move:
    """The same move, installed as a new object instead of swapped into the old one."""
    return dataclasses.replace(move, swappable=False)


def _target(device: int | str | torch.device) -> torch.device:
    """``device`` normalized; TypeError if it names none."""
    target = normalize_device(device)
    if target is None:
        raise TypeError(
            f"device must name a device; got {show(device)}; accepted: an int, a device string "
            "such as 'cpu', 'cuda:0' or 'meta', or a torch.device"
        )
    return target


def _cast_source(
    source: torch.Tensor, cast: torch.dtype, target: torch.device, non_blocking: bool
) -> tuple[torch.Tensor, torch.dtype | None]:
    """The tensor to install and the cast left to compat: a plain tensor is cast here to any
    dtype, as accelerate casts it (a parameter that requires grad then refuses a non-floating
    one: ValueError); a subclass is cast by compat, which checks that its ``.to()`` honoured
    it, and only to a dtype that can require grad."""
    if _move.is_plain(source):
        return source.to(device=target, dtype=cast, non_blocking=non_blocking), None
    return source, cast if _move.can_require_grad(cast) else None


def _cast_for(
    kind: _move.Kind,
    old: torch.Tensor,
    value: torch.Tensor | None,
    wanted: torch.dtype | None,
    target: torch.device,
) -> torch.dtype | None:
    """The dtype accelerate casts to: ``value`` to the old dtype (``dtype=None``) or to ``wanted``
    (not an integer or bool value); without ``value``, ``wanted`` for a move to meta only."""
    if value is None:
        if wanted is not None and target.type == "meta":
            return None if old.dtype in _NEVER_CAST else wanted
        return None
    if wanted is None:
        return old.dtype
    return None if value.dtype in _NEVER_CAST else wanted


def _remember_tie(
    tied_params_map: dict[int, dict[Any, torch.Tensor]],
    device: int | str | torch.device,
    installed: torch.Tensor,
    sources: tuple[torch.Tensor, torch.Tensor | None],
) -> None:
    """Record ``installed`` as the copy on ``device`` of the first source with a storage key in
    the map (the old tensor, else the value), for the next owner of that storage."""
    for source_tensor in sources:
        key = None if source_tensor is None else _storage_key(source_tensor)
        if key is not None and key in tied_params_map:
            tied_params_map[key].setdefault(device, installed)
            break


# --- the patch -----------------------------------------------------------------------------------

# accelerate's function while a patch is installed (a stack: patches nest)
_ORIGINAL: list[Callable[..., Any]] = []
# (id of accelerate's function, number of loaded modules) when the call sites were last checked
_CHECKED: set[tuple[int, int]] = set()


def _module(name: str) -> ModuleType:
    """The module, from ``sys.modules`` when it is loaded (a patch per block stays cheap)."""
    loaded = sys.modules.get(name)
    return loaded if isinstance(loaded, ModuleType) else importlib.import_module(name)


def _is_ours(obj: object) -> bool:
    return obj is set_module_tensor_to_device


def _check_signature(function: Callable[..., Any], version: str) -> None:
    names = tuple(inspect.signature(function).parameters)
    if names not in _KNOWN_SIGNATURES:
        raise AccelerateVersionError(
            f"accelerate {version}'s {NAME} takes {names}, a parameter list compat does not "
            f"implement; accepted: {' or '.join(map(str, _KNOWN_SIGNATURES))} (accelerate 1.2.1 "
            "to 1.16.0); nothing was patched"
        )


def _bindings(original: Callable[..., Any]) -> Iterator[tuple[str, str]]:
    """``(module, attribute)`` of every loaded accelerate module bound to ``original``."""
    for name, loaded in list(sys.modules.items()):
        if not isinstance(loaded, ModuleType) or not (
            name == "accelerate" or name.startswith("accelerate.")
        ):
            continue
        for attr, value in list(vars(loaded).items()):
            if value is original:
                yield name, attr


def _forget_original() -> None:
    """The innermost patch was undone: its accelerate function leaves the stack."""
    _ORIGINAL.pop()


def _plan() -> list[Replacement]:
    """Every call site's replacement, after every check; the first one keeps accelerate's own
    function on the stack compat's drop-in calls through while it is installed."""
    accelerate = _module("accelerate")
    version = str(getattr(accelerate, "__version__", "unknown"))
    sites = [_module(name) for name in CALL_SITES]
    missing = [
        n for n, site in zip(CALL_SITES, sites, strict=True) if getattr(site, NAME, None) is None
    ]
    if missing:
        raise AccelerateVersionError(
            f"accelerate {version} has no {NAME} in {', '.join(missing)}; compat knows the "
            f"call sites {', '.join(CALL_SITES)} (accelerate 1.2.1 to 1.16.0); nothing was "
            "patched"
        )
    original = getattr(sites[0], NAME)
    if _is_ours(original):
        original = _accelerate_original()
    # the checks read every loaded accelerate module: done again whenever a module was
    # imported since (or the function is another), else remembered
    key = (id(original), len(sys.modules))
    if key not in _CHECKED:
        _check_signature(original, version)
        unknown = sorted(
            f"{name}.{attr}"
            for name, attr in _bindings(original)
            if name not in CALL_SITES or attr != NAME
        )
        if unknown:
            raise AccelerateVersionError(
                f"accelerate {version} binds {NAME} at {', '.join(unknown)}, a call site "
                f"compat does not know; accepted: {', '.join(CALL_SITES)} (accelerate "
                "1.2.1 to 1.16.0); nothing was patched"
            )
        _CHECKED.clear()
        _CHECKED.add(key)
    first, *rest = sites
    return [
        Replacement(
            first,
            NAME,
            set_module_tensor_to_device,
            installed=lambda: _ORIGINAL.append(original),
            restored=_forget_original,
        ),
        *(Replacement(site, NAME, set_module_tensor_to_device) for site in rest),
    ]


class patch(Replacements):  # lower case: used like a function, `with patch():`
    """Route accelerate's own calls of ``set_module_tensor_to_device`` through
    :func:`set_module_tensor_to_device` (its hooks: ``cpu_offload``, ``disk_offload``,
    ``dispatch_model``; its loaders: ``load_checkpoint_in_model``,
    ``load_checkpoint_and_dispatch``; ``accelerate.utils.set_module_tensor_to_device`` itself).

    ``with patch():`` installs on entry and restores every replaced name on exit, also when the
    block raises; ``p = patch(); p.install(); ...; p.uninstall()`` does the same by hand.
    Patches nest. Hooks attached before the patch run through it as well: they look the
    function up when they run.

    Refuses, with :class:`AccelerateVersionError` and nothing patched, an accelerate whose
    function has a parameter list compat does not implement, or that binds it in a module
    outside :data:`CALL_SITES` (a call site compat does not know, so could not reach). Other
    libraries' own copies (``from accelerate.utils import set_module_tensor_to_device`` in
    transformers 4.x or diffusers) are theirs and are not replaced.
    """

    def __init__(self) -> None:
        super().__init__(_plan)
