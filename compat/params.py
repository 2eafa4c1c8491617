"""Subclass-safe parameter and buffer moves, and parameter ties by identity.

Why this exists: code that moves one tensor of a module (sequential CPU offload, loading real
weights into a meta model) used to rebuild tensor subclasses through their private constructors and
fields, and broke when TorchAO 0.7 renamed the first field of ``AffineQuantizedTensor`` (diffusers
#10470); accelerate >= 1.7 stores the moved subclass without re-wrapping it, so
``isinstance(p, nn.Parameter)`` is False afterwards and ``module.weight = module.weight`` raises.

Everything here uses only public protocol, identically on every supported torch (2.3-2.15) and
TorchAO (0.6-0.18):

* a tensor moves through its own public ``.to()`` (never ``copy=``, never a subclass constructor,
  never a subclass's fields, never an assignment to a parameter's ``.data``);
* a parameter is re-wrapped with ``nn.Parameter(new, requires_grad=...)`` (for a traceable wrapper
  subclass that returns the subclass itself, flagged as a parameter), or rebuilt through its own
  class when it is an ``nn.Parameter`` subclass (bitsandbytes-style parameters carry state);
* the parameter object keeps its identity through ``torch.utils.swap_tensors`` when the swap is
  possible, so optimizers, hooks and tied owners see the move; otherwise every owner of the object
  inside the module is updated;
* ties are found by object identity, never by ``data_ptr()`` (0 for every wrapper subclass and every
  meta tensor);
* classes are compared with ``type()`` / ``issubclass``, never ``isinstance(x, SomeParamSubclass)``:
  before torch 2.6, ``_ParameterMeta.__instancecheck__`` answers True for *any* tensor flagged
  ``_is_param`` against every ``nn.Parameter`` subclass (a TorchAO weight "is" a bitsandbytes
  ``Params4bit``); 2.6 restricts that to ``nn.Parameter`` itself.
"""

from __future__ import annotations

import torch
from torch import nn

from compat._messages import check_module
from compat._move import (
    TensorMoveError,
    check_dtype,
    check_value,
    examples,
    plan_move,
    resolve,
)
from compat.device import DeviceLike, normalize_device

__all__ = ["TensorMoveError", "set_module_tensor", "tied_parameters"]


def set_module_tensor(
    module: nn.Module,
    name: str,
    device: DeviceLike = None,
    *,
    value: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    non_blocking: bool = False,
) -> torch.Tensor:
    """Move the parameter or buffer ``name`` of ``module`` and/or replace its data with ``value``.

    ``name`` is dotted (``"layers.0.attn.weight"``). ``device`` goes through
    :func:`compat.normalize_device`; ``None`` means "do not move" (with a ``value``, the value is
    installed where it is). ``dtype`` casts floating and complex tensors (including a wrapper
    subclass's outer dtype); integer tensors are never cast. Values are kept bit for bit otherwise:
    no implicit cast of ``value`` to the old dtype, and no copy when the tensor is already on the
    device (the installed tensor then shares storage with ``value``, as
    ``load_state_dict(assign=True)`` does).

    Guarantees, identical on every supported torch (2.3-2.15) and TorchAO (0.6-0.18), since only
    public ``.to()`` and ``nn.Parameter`` are used:

    * Type: the result has the class of the source (the old tensor, or ``value``): a plain tensor
      stays ``nn.Parameter``; a wrapper subclass (TorchAO ``AffineQuantizedTensor``,
      ``LinearActivationQuantizedTensor``, float8 tensors, ``DTensor``) stays that subclass; an
      ``nn.Parameter`` subclass is rebuilt through its own class (or kept if its own ``.to()``
      returned it) with its ``__dict__`` state passed to matching constructor keywords.
    * Parameters stay parameters: ``isinstance(result, nn.Parameter)`` is True, so
      ``module.weight = module.weight`` and ``module.to()`` keep working.
    * ``requires_grad`` of the old parameter is kept (TorchAO's ``.to()`` drops it). If it is True
      and the new dtype is not floating or complex, ValueError (call ``requires_grad_(False)``
      first).
    * Identity: the old parameter object receives the new content via ``torch.utils.swap_tensors``
      whenever the swap is possible (no weak reference to it, equal ``__slots__``, no other
      reference to its TensorImpl such as a view or a live autograd graph: the same rule on every
      version), so optimizers, hooks and tied owners see the move. Otherwise every owner of the old
      object inside ``module`` gets the new object, so ties stay ties. Buffers are replaced, as
      ``Module.to()`` replaces them, in every owner.
    * Python attributes set on the old tensor that the new object lacks are copied to it.
    * Atomic: everything is built before the module is touched. A refused move (a meta tensor to a
      real device without ``value``; a subclass whose ``.to()`` refuses the target, as TorchAO int4
      layouts do; a ``dtype`` cast that the subclass's ``.to()`` answers with another dtype, as
      TorchAO's flat quantized tensors such as ``Int8Tensor`` do) raises :class:`TensorMoveError`
      naming the tensor and its class, and the module is exactly as it was.

    Returns the installed tensor (the old parameter object itself when it was swapped, or when
    nothing needed to change).

    Raises:
        TypeError: ``module`` is not a Module, ``name`` is not a string, ``value`` is not a tensor,
            ``dtype`` is not a floating/complex ``torch.dtype``; bad devices as
            :func:`compat.normalize_device`.
        ValueError: unknown name (the message lists accepted names), an entry registered as None,
            a ``value`` of another shape, ``requires_grad`` on a non-floating result.
        TensorMoveError: the tensor's ``.to()`` or its class refused (or ignored ``dtype``); the
            module is unchanged.
    """
    _owner, _leaf, kind, old = resolve(module, name)
    if old is None:
        raise ValueError(
            f"{kind} {name!r} is registered as None, so there is nothing to move or replace; "
            f"accepted: a name whose entry holds a tensor, such as {examples(module)}"
        )
    target = normalize_device(device)
    check_dtype(dtype)
    if value is not None:
        check_value(name, kind, old, value)
    src = old if value is None else value
    move = plan_move(name, kind, old, src, target, dtype, non_blocking)
    return old if move is None else move.install(module)


def tied_parameters(module: nn.Module) -> list[list[str]]:
    """Groups of dotted names that refer to one parameter object, e.g. ``[["embed.weight",
    "head.weight"]]``.

    Ties are found by object identity over ``named_parameters(remove_duplicate=False)``, never by
    ``data_ptr()`` (which is 0 for every wrapper subclass and every meta tensor, so it would tie all
    of them). A submodule registered under two names ties its parameters under both names. Only
    groups of two or more names are returned; groups are ordered by first appearance and names in
    module order. Identical on every supported torch version; an empty list when nothing is tied.
    """
    check_module(module)
    groups: dict[int, list[str]] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    return [names for names in groups.values() if len(names) > 1]
