"""Meta-device modules: where a module lives, two-phase init, and the empty-weights context.

Two-phase init builds a module without storage (phase 1, :func:`init_on_device` ``("meta")``) and
gives it real storage later (phase 2, :func:`materialize`), loading a state dict by assignment and
initialising the rest through ``reset_parameters()``.

The open_clip case (a factory that moves or casts the model it builds, called inside a parent's
meta context): inside :func:`init_on_device` ``("meta")`` such a factory works unchanged. A move of
a meta tensor (``Tensor.to``, ``.cuda()``, ``.cpu()``, ``Module.to``, ``Module.cuda()``) keeps it on
meta and still applies a dtype cast, so ``open_clip.create_model(...)`` returns a meta model and
the parent calls :func:`materialize`. A factory that wants to skip work (weight loading, explicit
init) can still ask :func:`meta_init_active`. A factory that builds under its own
``init_on_device(real_device)`` inside a parent's ``init_on_device("meta")`` (or torch's
``with torch.device("meta")``) still gets meta parameters: the parent's choice wins.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final

import torch
from torch import nn
from torch.nn.modules import module as _module_impl

from compat import _features, _loaders, _move
from compat._messages import check_module, type_name
from compat._messages import names as listed
from compat.device import DeviceLike, default_device, normalize_device

__all__ = [
    "MaterializeWarning",
    "MetaLoadError",
    "init_on_device",
    "is_meta_module",
    "materialize",
    "meta_init_active",
    "module_devices",
]


def _tensors(module: nn.Module) -> Iterator[torch.Tensor]:
    yield from module.parameters()
    yield from module.buffers()


def module_devices(module: nn.Module) -> set[torch.device]:
    """The set of devices of every parameter and buffer of ``module`` (recursively).

    An empty set for a module without tensors; never raises StopIteration (unlike the common
    ``next(model.parameters()).device``). Buffers count, so a module with only buffers has their
    device, and a partly materialised module reports both ``meta`` and the real device. A wrapper
    subclass counts with its outer ``.device``. Devices are as tensors report them (``cpu``,
    ``meta``, ``cuda:0``). Identical on every supported torch version.
    """
    check_module(module)
    return {t.device for t in _tensors(module)}


def is_meta_module(module: nn.Module) -> bool:
    """True if any parameter or buffer of ``module`` (recursively) is on the meta device.

    False for a module without tensors. A partly materialised module is still a meta module: one
    meta tensor is enough, because it has no data. Identical on every supported torch version.
    """
    check_module(module)
    return any(t.device.type == "meta" for t in _tensors(module))


# --- init_on_device ----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Open:
    """An open init_on_device block: its device, and the checkpoint loader that was running when
    it was entered (its frame; None: none)."""

    device: torch.device
    loader: FrameType | None


# The init_on_device blocks now open, innermost last. Process-wide, like the registration hooks
# they install.
_ACTIVE: list[_Open] = []


def _loader_frame() -> FrameType | None:
    found = _loaders.innermost()
    return found[0] if found is not None else None


def _in_force(block: _Open, loader: FrameType | None) -> bool:
    """Whether ``block`` applies while ``loader`` (the innermost checkpoint loader now running)
    runs: a block steps aside for a loader started inside it, and applies to everything else (a
    block a loader opened itself, such as compat's transformers integration building the model,
    applies inside that loader)."""
    return block.loader is loader


def _meta_in_force() -> bool:
    """Whether an open ``init_on_device("meta")`` block applies here and now."""
    if not any(block.device.type == "meta" for block in _ACTIVE):
        return False
    loader = _loader_frame()
    return any(block.device.type == "meta" and _in_force(block, loader) for block in _ACTIVE)


def _to_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What ``Tensor.to(*args, **kwargs)`` asks for besides the device: ``dtype``, ``copy`` and
    ``memory_format`` as keywords for a meta-to-meta ``.to()``.

    The device is never interpreted (a meta tensor stays on meta whatever it names, so an int
    needs no accelerator); a device string is still parsed by ``torch.device`` so that a malformed
    one raises as it would outside the block. Accepts the three forms of ``Tensor.to``:
    ``(dtype, non_blocking, copy)``, ``(device, dtype, non_blocking, copy)`` and
    ``(other, non_blocking, copy)``.
    """
    rest = list(args)
    out: dict[str, Any] = {}
    if rest and isinstance(rest[0], torch.dtype):
        out["dtype"] = rest.pop(0)
    elif rest and isinstance(rest[0], torch.Tensor):
        out["dtype"] = rest.pop(0).dtype
    else:
        device = rest.pop(0) if rest else kwargs.get("device")
        if isinstance(device, str):
            torch.device(device)
        if rest and (rest[0] is None or isinstance(rest[0], torch.dtype)):
            dtype = rest.pop(0)
            if dtype is not None:
                out["dtype"] = dtype
    if kwargs.get("dtype") is not None:
        out["dtype"] = kwargs["dtype"]
    copy = rest[1] if len(rest) > 1 else kwargs.get("copy", False)
    if copy:
        out["copy"] = True
    if kwargs.get("memory_format") is not None:
        out["memory_format"] = kwargs["memory_format"]
    return out


def _meta_keeping(name: str, method: Any) -> Any:
    """``method`` (a ``torch.Tensor`` move), except that a meta tensor stays on meta."""
    if name == "to":

        def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if not self.is_meta or not _meta_in_force():
                return method(self, *args, **kwargs)
            wanted = _to_arguments(args, kwargs)
            return method(self, **wanted) if wanted else self

        return to

    def move(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not self.is_meta or not _meta_in_force():
            return method(self, *args, **kwargs)
        return self  # .cuda(device) / .cpu(): only the device would change

    return move


class MetaLoadError(RuntimeError):
    """A state dict was loaded into meta tensors inside :func:`init_on_device` ``("meta")``: its
    values would be dropped (a copy into a meta tensor keeps nothing); the message names them and
    the route that loads them."""


def _dropped(module: nn.Module, state_dict: Mapping[str, Any]) -> list[str]:
    """The names of ``state_dict`` holding a real tensor whose place in ``module`` is meta."""
    own: dict[str, torch.Tensor] = dict(module.named_parameters(remove_duplicate=False))
    own.update(module.named_buffers(remove_duplicate=False))
    return [
        name
        for name, value in state_dict.items()
        if isinstance(value, torch.Tensor)
        and not value.is_meta
        and name in own
        and own[name].is_meta
    ]


def _refusing_meta_loads(original: Any) -> Any:
    """``Module.load_state_dict``, except that real values for meta tensors raise
    :class:`MetaLoadError` while a meta block applies (copied, they are dropped; assigned, the
    block's registration hook puts them on meta)."""

    @functools.wraps(original)
    def load_state_dict(
        self: nn.Module, state_dict: Mapping[str, Any], *args: Any, **kw: Any
    ) -> Any:
        if _meta_in_force():
            dropped = _dropped(self, state_dict)
            if dropped:
                raise MetaLoadError(
                    f"{type(self).__name__}.load_state_dict() inside compat.init_on_device"
                    f"('meta'): {len(dropped)} real values would be dropped into meta tensors "
                    f"({listed(dropped)}); accepted: load them after the block, with "
                    "compat.materialize(module, device, state_dict=...) or load_state_dict(..., "
                    "assign=True)"
                )
        return original(self, state_dict, *args, **kw)

    return load_state_dict


class _KeepMeta:
    """While any ``init_on_device("meta")`` block is open: a move of a meta tensor returns a meta
    tensor, with any dtype cast applied; everything else, moves of real tensors included, runs
    unchanged. Process-wide, like the registration hooks (and accelerate's empty-weights context):
    the ``torch.Tensor`` move methods are wrapped on entry of the outermost block and restored on
    exit of it. Wrapping the methods costs a Python call on each move only; a torch function mode
    would cost one on every torch call (a third more time to build open_clip's ViT-B-32 on meta).
    """

    _depth = 0
    _saved: dict[str, Any] = {}  # noqa: RUF012 -- class state, guarded by _lock
    _saved_load: Any = None  # Module.load_state_dict while wrapped
    _lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            if _KeepMeta._depth == 0:
                for name in _features.TENSOR_MOVE_METHODS:
                    own = torch.Tensor.__dict__.get(name)
                    _KeepMeta._saved[name] = own
                    setattr(torch.Tensor, name, _meta_keeping(name, getattr(torch.Tensor, name)))
                loader = nn.Module.__dict__["load_state_dict"]
                _KeepMeta._saved_load = loader
                nn.Module.load_state_dict = _refusing_meta_loads(loader)  # type: ignore[method-assign]
            _KeepMeta._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            _KeepMeta._depth -= 1
            if _KeepMeta._depth == 0:
                for name, own in _KeepMeta._saved.items():
                    if own is None:
                        delattr(torch.Tensor, name)  # inherited from torch._C.TensorBase again
                    else:
                        setattr(torch.Tensor, name, own)
                _KeepMeta._saved.clear()
                nn.Module.load_state_dict = _KeepMeta._saved_load  # type: ignore[method-assign]


def meta_init_active() -> bool:
    """True while modules built now would get meta parameters instead of storage.

    That is: inside an :func:`init_on_device` ``("meta")`` block (at any depth), or while torch's
    own default device is meta (``with torch.device("meta")`` or ``torch.set_default_device``),
    which :func:`compat.default_device` detects on every version (``torch.get_default_device()``
    ignores the ``with`` form before 2.8). A factory seeing True must return its model untouched.
    """
    if _meta_in_force():
        return True
    return default_device().type == "meta"


_Hook = Callable[[nn.Module, str, "torch.Tensor | None"], Any]


def _registration_hooks(opened: _Open, dev: torch.device) -> tuple[_Hook, _Hook]:
    """The parameter and buffer registration hooks of the block ``opened``: each moves what is
    registered to ``dev`` while the block is in force (:func:`_in_force`)."""

    def move(module: nn.Module, name: str, tensor: torch.Tensor | None, kind: _move.Kind) -> Any:
        if tensor is None or (tensor.is_meta and dev.type != "meta"):
            return None
        if not _in_force(opened, _loader_frame()):
            return None  # a checkpoint loader started inside the block: it loads for real
        held = None
        if dev.type == "meta" and kind == "parameter":
            held = _move.plain_parameter_to_meta(tensor)  # most parameters: the short way
        if held is None:
            move = _move.plan_move(f"{type(module).__name__}.{name}", kind, tensor, tensor, dev)
            if move is None:
                return None
            held = move.apply()
        return None if held is tensor else held  # None: the registered object itself moved

    def on_parameter(module: nn.Module, name: str, param: torch.Tensor | None) -> Any:
        return move(module, name, param, "parameter")

    def on_buffer(module: nn.Module, name: str, buffer: torch.Tensor | None) -> Any:
        return move(module, name, buffer, "buffer")

    return on_parameter, on_buffer


@contextlib.contextmanager
def init_on_device(device: DeviceLike, *, include_buffers: bool = False) -> Iterator[torch.device]:
    """Put every parameter (and, with ``include_buffers``, every buffer) registered inside the
    block on ``device``: the empty-weights pattern when ``device`` is ``"meta"``.

    It works through torch's public module registration hooks
    (``register_module_parameter_registration_hook`` / ``..._buffer_...``, present and identical
    on every supported torch, 2.3-2.15), not through ``with torch.device(...)``: factory calls
    elsewhere are unaffected, so module code and imports that compute with real tensors inside
    the block still work on every version (importing TorchAO 0.8 under
    ``with torch.device("meta")`` fails on torch 2.6), buffers computed in ``__init__`` keep
    real values unless ``include_buffers``, and the result does not depend on which torch
    functions honour the device context.

    Guarantees:

    * A registered parameter is moved right after registration with the same rules as
      :func:`compat.set_module_tensor`: its class, parameter-ness, ``requires_grad`` and foreign
      attributes are kept, and the object itself is kept (swapped) when possible, so a module that
      keeps a reference to the parameter it registered sees the move. Parameters are created on
      the default device first and freed one at a time; ``reset_parameters()`` then runs on the
      target (on meta: no allocation, no compute).
    * A meta tensor is never given storage by this context (it has no data): inside a parent's
      meta context, a nested ``init_on_device("cpu")`` keeps meta tensors meta. The innermost real
      device wins among real devices.
    * Inside a ``"meta"`` block, code that moves or casts what it built works unchanged: a move of
      a meta tensor (``Tensor.to(device)``, ``.to(other)``, ``.cuda()``, ``.cpu()``,
      ``.xpu()``, and so ``Module.to``, ``Module.cuda()``, ``Module.cpu()``) returns a meta
      tensor, with a dtype cast (``.to(dtype)``, ``.to(device, dtype)``, ``Module.half()``)
      still applied; a tensor's device argument is not interpreted, so ``Tensor.to(0)`` and
      ``.cuda()`` need no accelerator (``Module.to`` parses its argument itself first).
      Real tensors (buffers without ``include_buffers``, tensors computed in ``__init__``) move as
      usual. Outside the block nothing changes. Like the registration hooks, this holds
      process-wide while the block is open (``torch.Tensor``'s move methods are wrapped, and
      restored on exit). ``Module.to_empty()`` and ``torch.empty(..., device=...)`` are not moves
      and still give storage.
    * A checkpoint loader started inside the block (transformers' and diffusers'
      ``from_pretrained``, peft's ``PeftModel.from_pretrained``, accelerate's
      ``load_checkpoint_and_dispatch`` / ``load_checkpoint_in_model``) runs as it runs outside
      it: while it runs the block neither moves what it registers nor keeps its moves of meta
      tensors on meta, so it returns the model it loaded, never one on meta. A block the loader
      opens itself applies inside it.
    * Inside a ``"meta"`` block, ``Module.load_state_dict`` with real values for meta tensors
      raises :class:`MetaLoadError` naming them (copied into meta they would be dropped);
      :func:`materialize` after the block loads them.
    * Hooks are removed on exit, also when the block raises. The hooks are process-wide (as
      torch's are): modules built by other threads meanwhile are affected too.

    Yields the normalised device. Raises TypeError/ValueError as :func:`compat.normalize_device`,
    and TypeError for ``device=None``.
    """
    dev = normalize_device(device)
    if dev is None:
        raise TypeError(
            "init_on_device needs a device, got None; accepted: a torch.device, a device string "
            "such as 'meta', 'cpu' or 'cuda:0', or an accelerator index"
        )

    opened = _Open(torch.device(dev), _loader_frame())
    on_parameter, on_buffer = _registration_hooks(opened, dev)
    handles = [_module_impl.register_module_parameter_registration_hook(on_parameter)]
    _ACTIVE.append(opened)
    try:
        if include_buffers:
            handles.append(_module_impl.register_module_buffer_registration_hook(on_buffer))
        with _KeepMeta() if dev.type == "meta" else contextlib.nullcontext():
            yield dev
    finally:
        for handle in handles:
            handle.remove()
        for index, active in enumerate(_ACTIVE):
            if active is opened:
                del _ACTIVE[index]
                break


# --- materialize --------------------------------------------------------------------------------


@dataclass
class _Group:
    """One tensor object and every place it is registered (ties share a group)."""

    tensor: torch.Tensor
    kind: _move.Kind
    names: list[str] = field(default_factory=list)
    # (module, name, registry): one object may be a parameter of one module and a buffer of another
    owners: list[tuple[nn.Module, str, dict[str, Any]]] = field(default_factory=list)


def _groups(module: nn.Module) -> list[_Group]:
    by_id: dict[int, _Group] = {}
    for prefix, mod in module.named_modules(remove_duplicate=False):
        for kind, registry in (("parameter", mod._parameters), ("buffer", mod._buffers)):
            for leaf, tensor in registry.items():
                if tensor is None:
                    continue
                group = by_id.setdefault(id(tensor), _Group(tensor, kind))  # type: ignore[arg-type]
                group.names.append(f"{prefix}.{leaf}" if prefix else leaf)
                if not any(m is mod and k == leaf for m, k, _ in group.owners):
                    group.owners.append((mod, leaf, registry))
    return list(by_id.values())


class MaterializeWarning(UserWarning):
    """:func:`materialize` was given a state dict that lacks some of the module's meta tensors: they
    were initialised (``reset_parameters()``) or left uninitialised (``strict=False``) instead of
    loaded, as transformers' ``from_pretrained`` reports missing keys. ``loaded``,
    ``initialised`` and ``uninitialised`` name them (every name of each tensor, module order)."""

    def __init__(
        self,
        loaded: tuple[str, ...],
        initialised: tuple[str, ...],
        uninitialised: tuple[str, ...],
    ) -> None:
        self.loaded, self.initialised, self.uninitialised = loaded, initialised, uninitialised
        said = [f"{len(loaded)} loaded from state_dict"]
        if initialised:
            said.append(f"initialised by reset_parameters(): {listed(list(initialised))}")
        if uninitialised:
            said.append(f"left uninitialised (strict=False): {listed(list(uninitialised))}")
        super().__init__(
            "materialize: tensors absent from state_dict were not loaded; " + "; ".join(said)
        )


def _report(steps: list[_Step]) -> MaterializeWarning | None:
    """The warning for a state dict that lacks some meta tensors, or None when it lacks none."""
    loaded = tuple(n for s in steps if isinstance(s, _Install) for n in s.group.names)
    made = [s for s in steps if isinstance(s, _Init)]
    initialised = tuple(n for s in made if s.initialiser is not None for n in s.group.names)
    uninitialised = tuple(n for s in made if s.initialiser is None for n in s.group.names)
    if not (initialised or uninitialised):
        return None
    return MaterializeWarning(loaded, initialised, uninitialised)


# what materialize tells of tensors nothing can initialise
_UNINITIALISED_ACCEPTED: Final = (
    "accepted: supply them in state_dict, give their module a reset_parameters(), or pass "
    "strict=False to leave them uninitialised"
)


def _scratch(tensor: torch.Tensor, kind: _move.Kind) -> torch.Tensor:
    """A meta stand-in with the same shape and dtype, so an initialiser cannot overwrite it."""
    empty = torch.empty(tensor.shape, dtype=tensor.dtype, device="meta")
    if kind == "buffer":
        return empty
    rg = tensor.requires_grad and _move.can_require_grad(tensor.dtype)
    return nn.Parameter(empty, requires_grad=rg)


def _run_initialiser(owner: nn.Module, assigned: list[_Group]) -> None:
    """Call ``owner.reset_parameters()`` so that it writes only the tensors of ``assigned``.

    Every other tensor in the owner's subtree (loaded, kept, or another module's to initialise)
    is replaced by a meta stand-in for the duration of the call and put back afterwards.
    """
    keep = {id(g.tensor) for g in assigned}
    protected: list[tuple[dict[str, Any], str, torch.Tensor]] = []
    for mod in owner.modules():
        for kind, registry in (("parameter", mod._parameters), ("buffer", mod._buffers)):
            entries: dict[str, Any] = registry  # Parameter and buffer registries alike
            for key, tensor in list(entries.items()):
                if tensor is not None and id(tensor) not in keep:
                    protected.append((entries, key, tensor))
                    entries[key] = _scratch(tensor, kind)  # type: ignore[arg-type]
    try:
        with torch.no_grad():
            owner.reset_parameters()  # type: ignore[operator]
    except Exception as exc:
        raise RuntimeError(
            f"{type(owner).__name__}.reset_parameters() failed while materializing "
            f"{listed([n for g in assigned for n in g.names])}: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        for registry, key, tensor in reversed(protected):
            registry[key] = tensor
    # An initialiser that registered new objects instead of writing in place: keep ties.
    for g in assigned:
        for _mod, leaf, registry in g.owners:
            current = registry.get(leaf)
            if current is not None and current is not g.tensor:
                for _other, other_leaf, other_registry in g.owners:
                    other_registry[other_leaf] = current
                g.tensor = current
                break


def materialize(
    module: nn.Module,
    device: DeviceLike,
    state_dict: Mapping[str, torch.Tensor] | None = None,
    *,
    strict: bool = True,
) -> nn.Module:
    """Give every tensor of ``module`` real storage on ``device`` (phase 2 of two-phase init).

    For each tensor object (tied names are one object):

    1. if any of its names is in ``state_dict``, that value is installed by assignment: its class
       is kept (a TorchAO or DTensor value stays one), it is moved to ``device`` only if it is
       elsewhere (otherwise the module shares its storage), its dtype is kept, and the parameter
       keeps ``requires_grad`` (ValueError for a non-floating value into a ``requires_grad``
       parameter). With several tied names in ``state_dict``, the first in module order is used;
    2. else a real tensor is moved to ``device``, keeping its values;
    3. else (a meta tensor) it gets fresh storage on ``device`` (``torch.empty``; plain tensors and
       ``nn.Parameter`` subclasses only) and is initialised by the ``reset_parameters()`` of the
       first module that registers it directly and has one. Each such module's
       ``reset_parameters()`` is called once, and writes only the tensors it initialises: every
       other tensor of its subtree is swapped for a meta stand-in during the call.

    Tensors are moved with the rules of :func:`compat.set_module_tensor` (class, parameter-ness,
    ``requires_grad``, foreign attributes, identity kept when the swap is possible, else every
    owner updated), so tied parameters stay tied. Identical on every supported torch version.

    With ``strict`` (the default), keys of ``state_dict`` that name no parameter or buffer, and
    meta tensors that neither ``state_dict`` nor any ``reset_parameters()`` provides, raise
    ValueError listing them. With ``strict=False`` unknown keys are ignored and such tensors are
    left uninitialised (``torch.empty``), as ``Module.to_empty()`` leaves them.

    When a ``state_dict`` is given and some meta tensors are not in it, a
    :class:`MaterializeWarning` names what was loaded and what was initialised (or left
    uninitialised) instead, as transformers reports missing keys: nothing initialised is passed
    off as loaded. Without a ``state_dict`` every meta tensor is initialised, as asked: no warning.

    Everything is validated and built before the module is touched; a failing move raises
    :class:`compat.TensorMoveError` and leaves the module unchanged. Only an initialiser that raises
    (RuntimeError naming it) leaves the module materialised but partly uninitialised. The module's
    own ``_load_from_state_dict`` hooks are not run: names are the plain dotted names of
    ``named_parameters()``/``named_buffers()``. Memory: new tensors are built before old real ones
    are released, so moving real tensors across devices briefly holds both.

    Returns ``module``.
    """
    check_module(module)
    dev = normalize_device(device)
    if dev is None or dev.type == "meta":
        raise ValueError(
            f"materialize needs a real device; got {device!r}; accepted: a device with storage "
            "such as 'cpu', 'cuda:0' or an accelerator index"
        )
    values = _state_values(state_dict)
    steps = _plan(module, values, strict)
    # Build every replacement before touching the module.
    built: list[tuple[_Group, _move.Move]] = []
    for step in steps:
        move = step.build(dev)
        if move is not None:
            built.append((step.group, move))
    for g, move in built:
        registries = [(registry, leaf) for _m, leaf, registry in g.owners]
        g.tensor = move.install(module, registries)
    # Initialise, one call per initialising module, in module order.
    order: dict[int, tuple[nn.Module, list[_Group]]] = {}
    for step in steps:
        if isinstance(step, _Init) and step.initialiser is not None:
            order.setdefault(id(step.initialiser), (step.initialiser, []))[1].append(step.group)
    for owner, assigned in order.values():
        _run_initialiser(owner, assigned)
    found = _report(steps) if state_dict is not None else None
    if found is not None:
        warnings.warn(found, stacklevel=2)
    return module


def _state_values(state_dict: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """``state_dict`` as a dict, each entry checked to map a str to a tensor (TypeError if not)."""
    values: dict[str, torch.Tensor] = {}
    if state_dict is None:
        return values
    if not isinstance(state_dict, Mapping):
        raise TypeError(
            "state_dict must be a mapping of names to tensors (or None); got "
            f"{type_name(state_dict)}"
        )
    for key, tensor in state_dict.items():
        if not isinstance(key, str) or not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"state_dict entries must map str names to tensors; got {key!r} -> "
                f"{type_name(tensor)}"
            )
        values[key] = tensor
    return values


@dataclass(frozen=True)
class _Install:
    """Step: the group takes a value of ``state_dict``."""

    group: _Group
    value: torch.Tensor

    def build(self, dev: torch.device) -> _move.Move | None:
        g = self.group
        return _move.plan_move(g.names[0], g.kind, g.tensor, self.value, dev)


@dataclass(frozen=True)
class _Keep:
    """Step: a real tensor keeps its values and moves to the device."""

    group: _Group

    def build(self, dev: torch.device) -> _move.Move | None:
        g = self.group
        return _move.plan_move(g.names[0], g.kind, g.tensor, g.tensor, dev)


@dataclass(frozen=True)
class _Init:
    """Step: a meta tensor gets fresh storage, then ``initialiser.reset_parameters()`` (None: no
    module registering it has one, left as ``torch.empty`` made it)."""

    group: _Group
    initialiser: nn.Module | None

    def build(self, dev: torch.device) -> _move.Move | None:
        g = self.group
        empty = torch.empty(g.tensor.shape, dtype=g.tensor.dtype, device=dev)
        return _move.plan_move(g.names[0], g.kind, g.tensor, empty, None)


_Step = _Install | _Keep | _Init


def _plan(module: nn.Module, values: dict[str, torch.Tensor], strict: bool) -> list[_Step]:
    """What each tensor of ``module`` becomes, in module order, validated before anything is
    built: ValueError for an unknown key (``strict``), a value of the wrong shape, a meta wrapper
    subclass without a value, or a meta tensor nothing initialises (``strict``)."""
    groups = _groups(module)
    known = {name for g in groups for name in g.names}
    unexpected = [k for k in values if k not in known]
    if strict and unexpected:
        raise ValueError(
            f"state_dict has keys that name no parameter or buffer of {type(module).__name__}: "
            f"{listed(unexpected)}; accepted: names such as {listed(sorted(known), 4)} (or "
            "pass strict=False to ignore them)"
        )
    steps: list[_Step] = []
    uninitialisable: list[str] = []
    for g in groups:
        given = [n for n in g.names if n in values]
        if given:
            value = values[given[0]]
            if value.shape != g.tensor.shape:
                raise ValueError(
                    f"state_dict[{given[0]!r}] has shape {tuple(value.shape)}, but the {g.kind} "
                    f"has shape {tuple(g.tensor.shape)}; accepted: a tensor of shape "
                    f"{tuple(g.tensor.shape)}"
                )
            steps.append(_Install(g, value))
        elif g.tensor.device.type != "meta":
            steps.append(_Keep(g))
        else:
            if not _move.allocatable(g.tensor):
                raise ValueError(
                    f"{g.kind} {g.names[0]!r} is a meta {type_name(g.tensor)}, which cannot be "
                    "given fresh storage (a wrapper subclass has its own layout); accepted: its "
                    "real value in state_dict"
                )
            owner = next(
                (m for m, _, _ in g.owners if callable(getattr(m, "reset_parameters", None))), None
            )
            if owner is None:
                uninitialisable.extend(g.names)
            steps.append(_Init(g, owner))
    if strict and uninitialisable:
        raise ValueError(
            f"materialize cannot initialise {listed(uninitialisable)}: they are on meta, absent "
            "from state_dict, and the modules registering them have no reset_parameters(); "
            f"{_UNINITIALISED_ACCEPTED}"
        )
    return steps
