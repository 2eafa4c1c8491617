"""The move engine: how one registered tensor is resolved, checked, converted, re-wrapped and
installed, shared by :mod:`compat.params`, :mod:`compat.meta` and :mod:`compat.integrations`.

Internal: the public API is :func:`compat.set_module_tensor`, :func:`compat.materialize` and the
integrations' drop-ins. What holds here, on every supported torch (2.3-2.15) and TorchAO
(0.6-0.18), is what :mod:`compat.params` documents: a tensor moves through its own public
``.to()``; a parameter is re-wrapped with ``nn.Parameter`` or rebuilt through its own
``nn.Parameter`` subclass; the parameter object keeps its identity through
``torch.utils.swap_tensors`` when the swap is possible, else every owner is updated; a move is
built completely (:func:`plan_move`) before any module is touched (:meth:`Move.install`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Final, Literal

import torch
from torch import nn

from compat import _features, _messages
from compat._messages import check_module, show, type_name

__all__ = [
    "NAMES_ACCEPTED",
    "Kind",
    "Move",
    "TensorMoveError",
    "allocatable",
    "can_require_grad",
    "check_dtype",
    "check_value",
    "examples",
    "is_parameter_subclass",
    "is_plain",
    "plain_parameter_to_meta",
    "plan_move",
    "resolve",
    "swap_in_place",
]

Kind = Literal["parameter", "buffer"]

_META: Final = torch.device("meta")
# The flag nn.Parameter(subclass) sets on a wrapper subclass; it is not a user attribute.
_PARAM_FLAG: Final = "_is_param"
# what a refused tensor name is told, before the module's first names as examples
NAMES_ACCEPTED: Final = "accepted: a dotted parameter or buffer name such as"


class TensorMoveError(RuntimeError):
    """A parameter or buffer could not be moved, cast or rebuilt. The module was left unchanged."""


TensorMoveError.__module__ = "compat"  # public as compat.TensorMoveError (compat.params too)


# --- small helpers -----------------------------------------------------------------------------


def is_plain(t: torch.Tensor) -> bool:
    """A plain tensor or a plain ``nn.Parameter`` (no subclass of either)."""
    return type(t) in (torch.Tensor, nn.Parameter)


def is_parameter_subclass(cls: type) -> bool:
    """A true ``nn.Parameter`` subclass (bitsandbytes-style), not a wrapper flagged as one."""
    return cls is not nn.Parameter and issubclass(cls, nn.Parameter)


def allocatable(t: torch.Tensor) -> bool:
    """Whether ``t`` can be given fresh storage of its class: plain tensors and ``nn.Parameter``
    subclasses can; wrapper subclasses cannot (TorchAO's have no ``empty_like``; their layout is
    not ours to invent)."""
    return is_plain(t) or is_parameter_subclass(type(t))


def can_require_grad(dtype: torch.dtype) -> bool:
    return bool(dtype.is_floating_point or dtype.is_complex)


def examples(module: nn.Module, limit: int = 4) -> str:
    """Up to ``limit`` of the module's tensor names, parameters first (for a refusal's "such
    as ...")."""
    found = [n for n, _ in module.named_parameters()][:limit]
    found += [n for n, _ in module.named_buffers()][: max(0, limit - len(found))]
    return _messages.names(found, limit) if found else "(this module has none)"


def check_value(name: str, kind: Kind, old: torch.Tensor, value: object) -> None:
    """TypeError unless ``value`` is a tensor, ValueError unless it has ``old``'s shape; both
    name the tensor (``set_module_tensor`` and accelerate's drop-in share the wording)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"value for {name!r} must be a torch.Tensor (or None); got {type_name(value)}"
        )
    if value.shape != old.shape:
        raise ValueError(
            f"value for {kind} {name!r} has shape {tuple(value.shape)}, but the {kind} has "
            f"shape {tuple(old.shape)}; accepted: a tensor of shape {tuple(old.shape)}"
        )


def check_dtype(dtype: torch.dtype | None) -> None:
    if dtype is None:
        return
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype or None; got {show(dtype)}; accepted: a "
            "floating or complex dtype such as torch.bfloat16, torch.float16 or torch.float32"
        )
    if not can_require_grad(dtype):
        raise TypeError(
            f"dtype {dtype} is not a floating or complex dtype; only floating and complex casts "
            "are accepted (integer tensors are never cast), e.g. torch.bfloat16 or torch.float32"
        )


def resolve(module: nn.Module, name: str) -> tuple[nn.Module, str, Kind, torch.Tensor | None]:
    """``(owner, leaf, kind, tensor)`` for a dotted parameter or buffer name."""
    check_module(module)
    if not isinstance(name, str) or not name:
        raise TypeError(
            f"name must be a non-empty dotted string such as 'layers.0.weight'; got {show(name)}"
        )
    *path, leaf = name.split(".")
    owner = module
    for depth, part in enumerate(path):
        child = owner._modules.get(part)
        if child is None:
            prefix = ".".join(path[: depth + 1])
            raise ValueError(
                f"cannot resolve {name!r}: {prefix!r} is not a submodule of "
                f"{type(module).__name__}; {NAMES_ACCEPTED} {examples(module)}"
            )
        owner = child
    if leaf in owner._parameters:
        return owner, leaf, "parameter", owner._parameters[leaf]
    if leaf in owner._buffers:
        return owner, leaf, "buffer", owner._buffers[leaf]
    raise ValueError(
        f"{type(module).__name__} has no parameter or buffer named {name!r}; {NAMES_ACCEPTED} "
        f"{examples(module)}"
    )


# --- phase 1: build the new tensor (touches no module) ------------------------------------------


def _target(device: torch.device | None, dtype: torch.dtype | None) -> str:
    parts = [f"device {str(device)!r}"] if device is not None else []
    if dtype is not None:
        parts.append(f"dtype {dtype}")
    return " and ".join(parts) or "its current device"


def _convert(
    name: str,
    kind: Kind,
    src: torch.Tensor,
    device: torch.device | None,
    dtype: torch.dtype | None,
    non_blocking: bool,
) -> torch.Tensor:
    """``src`` moved/cast through its own public ``.to()``; ``src`` itself when nothing changes."""
    kwargs: dict[str, Any] = {}
    if device is not None:
        kwargs["device"] = device
    if dtype is not None and can_require_grad(src.dtype) and src.dtype != dtype:
        kwargs["dtype"] = dtype
    if not kwargs:
        return src
    if non_blocking:
        kwargs["non_blocking"] = True
    try:
        moved = src.to(**kwargs)
    except Exception as exc:
        hint = ""
        if src.device.type == "meta" and device is not None and device.type != "meta":
            hint = (
                "; a meta tensor has no data to copy: pass value= with the real tensor, or use "
                "compat.materialize()"
            )
        raise TensorMoveError(
            f"cannot move {kind} {name!r} of class {type_name(src)} ({src.dtype} on "
            f"{src.device}) to {_target(device, dtype)}: {type(exc).__name__}: {exc}{hint}; "
            "the module was left unchanged"
        ) from exc
    if "dtype" in kwargs and moved.dtype != dtype:
        # A wrapper subclass's own .to() may answer a cast with its old outer dtype (TorchAO's
        # flat quantized tensors do); installing that would report a cast that never happened.
        raise TensorMoveError(
            f"cannot cast {kind} {name!r} of class {type_name(src)} ({src.dtype} on "
            f"{src.device}) to {_target(device, dtype)}: its .to(dtype={dtype}) returned "
            f"{type_name(moved)} with dtype {moved.dtype}, so the class does not support this "
            "cast; move it without dtype=, or cast before quantizing; the module was left unchanged"
        )
    return moved


def _constructor_keywords(cls: type) -> frozenset[str]:
    """Keyword parameters of ``cls(...)`` beyond ``data`` and ``requires_grad``."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return frozenset()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(
        p.name
        for p in signature.parameters.values()
        if p.kind in kinds and p.name not in ("data", "requires_grad")
    )


def _rebuild_through_class(
    name: str, cls: type, old: torch.Tensor, data: torch.Tensor, requires_grad: bool
) -> torch.Tensor:
    """A new ``cls`` parameter around ``data``, built the way ``nn.Parameter`` subclasses expect.

    The old object's ``__dict__`` entries whose names are keyword parameters of the class are
    passed to it (bitsandbytes' ``Int8Params(data, requires_grad, CB=..., SCB=...)``); the others
    are copied afterwards as foreign attributes.
    """
    state = {k: v for k, v in vars(old).items() if k != _PARAM_FLAG}
    kwargs = {k: v for k, v in state.items() if k in _constructor_keywords(cls)}
    try:
        new = cls(data, requires_grad=requires_grad, **kwargs)
    except Exception as exc:
        shown = "".join(f", {k}=..." for k in kwargs)
        raise TensorMoveError(
            f"cannot rebuild parameter {name!r} through its class {cls.__module__}."
            f"{cls.__qualname__}: {cls.__qualname__}(data, requires_grad=...{shown}) raised "
            f"{type(exc).__name__}: {exc}; an nn.Parameter subclass must accept (data, "
            "requires_grad) like nn.Parameter, or return its own class from .to(); the module "
            "was left unchanged"
        ) from exc
    if type(new) is not cls:
        raise TensorMoveError(
            f"cannot rebuild parameter {name!r}: {cls.__qualname__}(...) returned {type_name(new)} "
            "instead of its own class; the module was left unchanged"
        )
    assert isinstance(new, torch.Tensor)
    return new


def _as_parameter(
    name: str, old: torch.Tensor, moved: torch.Tensor, requires_grad: bool, fresh: bool = False
) -> torch.Tensor:
    """``moved`` as a parameter of the right class with ``requires_grad`` applied.

    ``fresh``: ``moved`` is a new object its source's ``.to()`` just made, held by nobody else."""
    if requires_grad and not can_require_grad(moved.dtype):
        raise ValueError(
            f"parameter {name!r} requires grad, but its new dtype {moved.dtype} cannot: only "
            "floating and complex tensors can require gradients; call requires_grad_(False) on "
            "the parameter first, or pass a floating or complex value"
        )
    moved_cls = type(moved)
    if is_parameter_subclass(moved_cls):
        # The class's own .to() kept it (bitsandbytes does), or the value is such a parameter.
        if moved.requires_grad != requires_grad:
            moved.requires_grad_(requires_grad)
        return moved
    if is_plain(moved) and is_parameter_subclass(type(old)):
        # Parameter subclasses return plain tensors from .to(): rebuild through their own class.
        return _rebuild_through_class(name, type(old), old, moved, requires_grad)
    if fresh and not is_plain(moved) and moved.grad_fn is None:
        # What nn.Parameter does to a wrapper subclass, less its detach(), which would rebuild the
        # wrapper a second time (TorchAO detaches every inner tensor): the object is new and has
        # no autograd history, so flagging it in place is the same parameter, at half the cost.
        moved.requires_grad_(requires_grad)
        setattr(moved, _PARAM_FLAG, True)
        return moved
    try:
        # Plain data: nn.Parameter aliases it. A wrapper subclass: nn.Parameter returns the same
        # subclass (detached, flagged as a parameter); TorchAO's .to() dropped requires_grad.
        return nn.Parameter(moved, requires_grad=requires_grad)
    except Exception as exc:
        raise TensorMoveError(
            f"cannot wrap {type_name(moved)} as the parameter {name!r}: nn.Parameter(...) raised "
            f"{type(exc).__name__}: {exc}; the module was left unchanged"
        ) from exc


def _foreign_attributes(old: torch.Tensor, new: torch.Tensor) -> dict[str, Any]:
    """Python attributes set on ``old`` by users (``_is_hf_initialized``, tags) that ``new`` lacks.

    A wrapper subclass keeps its own state in ``__dict__`` too; keys the new object already has are
    never copied (they would hold inner tensors on the old device). When the class changes, the old
    class's own keys are learnt from a detached copy (which carries the class's state and none of
    the user's); if even that fails, nothing is copied rather than something wrong.
    """
    old_dict = vars(old)
    if not old_dict:
        return {}
    skip = set(vars(new)) | {_PARAM_FLAG}
    own_state_unknown = not is_plain(old) and not is_parameter_subclass(type(old))
    if type(new) is not type(old) and own_state_unknown:
        try:
            skip |= set(vars(old.detach()))
        except Exception:
            return {}
    return {k: v for k, v in old_dict.items() if k not in skip}


# --- phase 2: install (cannot fail half-way) ----------------------------------------------------


def _python_state(t: torch.Tensor) -> tuple[type, dict[str, Any], dict[str, Any]]:
    slots = _features.slot_names(type(t))
    return type(t), vars(t), {s: getattr(t, s) for s in slots if hasattr(t, s)}


def _restore(t: torch.Tensor, state: tuple[type, dict[str, Any], dict[str, Any]]) -> None:
    cls, attrs, slot_values = state
    setattr(t, "__class__", cls)  # noqa: B010 -- the same assignment swap_tensors makes
    setattr(t, "__dict__", attrs)  # noqa: B010
    for slot in _features.slot_names(cls):
        if slot in slot_values:
            setattr(t, slot, slot_values[slot])
        elif hasattr(t, slot):
            delattr(t, slot)


def swap_in_place(old: torch.Tensor, new: torch.Tensor) -> bool:
    """Make ``old`` hold ``new``'s content with ``torch.utils.swap_tensors``; False if impossible.

    Never leaves either tensor half-swapped: the pre-checks of :func:`compat._features.swap_blocker`
    run first, and should torch still refuse (torch 2.3 checks the reference count only after it
    swapped ``__class__`` and ``__dict__``), the Python-level state of both is restored. Two
    objects of one class without attributes or slots (a fresh ``nn.Parameter`` and its moved twin)
    have no Python-level state to exchange: only their TensorImpls are swapped, as swap_tensors
    ends by doing (:data:`compat._features.HAS_SWAP_TENSOR_IMPL`).
    """
    if _features.swap_blocker(old, new) is not None:
        return False
    # Two objects of one class without attributes or slots: a failed swap leaves nothing to undo.
    cls = type(old)
    bare = cls is type(new) and not (vars(old) or vars(new) or _features.slot_names(cls))
    saved = None if bare else (_python_state(old), _python_state(new))
    try:
        if bare and _features.HAS_SWAP_TENSOR_IMPL:
            torch._C._swap_tensor_impl(old, new)  # all that swap_tensors would do here
        else:
            torch.utils.swap_tensors(old, new)  # type: ignore[no-untyped-call]
    except RuntimeError:
        if saved is not None:
            _restore(old, saved[0])
            _restore(new, saved[1])
        return False
    return True


def _owners(root: nn.Module, tensor: torch.Tensor) -> list[tuple[dict[str, Any], str]]:
    """Every ``(registry, key)`` inside ``root`` that holds ``tensor`` itself, parameter and buffer
    registries alike (one object may be a parameter of one module and a buffer of another)."""
    found: list[tuple[dict[str, Any], str]] = []
    for mod in root.modules():
        for registry in (mod._parameters, mod._buffers):
            found.extend((registry, key) for key, t in registry.items() if t is tensor)
    return found


# --- the move step: plan (phase 1), then install (phase 2) ------------------------------------


@dataclass
class Move:
    """A fully built replacement for one registered tensor, ready to install.

    Built by :func:`plan_move` without touching any module; :meth:`install` (or :meth:`apply`,
    for a caller that registers the result itself, as :func:`compat.init_on_device`'s hooks do)
    cannot fail half-way.
    """

    old: torch.Tensor
    new: torch.Tensor
    foreign: dict[str, Any]
    # False when ``new`` is the caller's own object, which must not receive the old content.
    swappable: bool

    def apply(self) -> torch.Tensor:
        """Give ``new`` the old object's foreign attributes and, when possible, swap it into
        ``old``. Returns the object that now holds the content: ``old`` itself after a swap
        (every owner and outside reference sees it), else ``new``, which the caller registers."""
        if self.foreign:
            vars(self.new).update(self.foreign)
        if self.swappable and swap_in_place(self.old, self.new):
            return self.old
        return self.new

    def install(
        self, root: nn.Module, owners: list[tuple[dict[str, Any], str]] | None = None
    ) -> torch.Tensor:
        """:meth:`apply`, then put the result in place of ``old`` everywhere inside ``root``.

        ``owners`` may list the registries holding ``old`` when the caller already knows them.
        Returns the installed object.
        """
        held = self.apply()
        if held is not self.old:
            for registry, key in _owners(root, self.old) if owners is None else owners:
                registry[key] = held
        return held


def plain_parameter_to_meta(param: torch.Tensor) -> torch.Tensor | None:
    """What ``plan_move(name, "parameter", param, param, meta).apply()`` returns, for the common
    case only: ``param`` of class exactly ``nn.Parameter``, contiguous, on a real device, with no
    Python attributes; None (and ``param`` untouched) for any other tensor, which takes that
    general path.

    The same result, less the general path's bookkeeping (a registration hook runs this once per
    parameter a model builds; in transformers' ``from_pretrained`` of GPT-2 medium the general
    path cost 8 % of the load): the meta tensor ``.to("meta")`` makes (same shape, dtype and
    strides), wrapped with ``nn.Parameter`` and ``param``'s ``requires_grad``, swapped into
    ``param`` when :func:`swap_in_place` can (the result is ``param`` itself), else the new
    parameter, for the caller to register.
    """
    if type(param) is not nn.Parameter or param.is_meta or vars(param) or not param.is_contiguous():
        return None
    # what .to("meta") makes of a contiguous tensor, without the copy machinery (meta has no data)
    new = nn.Parameter(torch.empty_like(param, device=_META), requires_grad=param.requires_grad)
    return param if swap_in_place(param, new) else new


def plan_move(
    name: str,
    kind: Kind,
    old: torch.Tensor,
    src: torch.Tensor,
    device: torch.device | None,
    dtype: torch.dtype | None = None,
    non_blocking: bool = False,
) -> Move | None:
    """Build the tensor that replaces ``old`` (with the rules of :func:`set_module_tensor`);
    None if ``old`` can stay exactly as it is.

    ``src`` is ``old`` itself for a move, or the tensor to install. Touches no module; raises
    :class:`TensorMoveError` (or ValueError when a parameter that requires grad would become
    non-floating).
    """
    moved = _convert(name, kind, src, device, dtype, non_blocking)
    if kind == "buffer":
        if moved is old:
            return None
        new = moved
    else:
        rg = old.requires_grad
        if moved is old and isinstance(old, nn.Parameter) and old.requires_grad == rg:
            return None
        new = _as_parameter(name, old, moved, rg, fresh=moved is not src)
    foreign = _foreign_attributes(old, new) if new is not old else {}
    swappable = kind == "parameter" and new is not src and new is not old
    return Move(old, new, foreign, swappable)
