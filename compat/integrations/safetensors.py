"""safetensors.torch's ``save_file`` / ``load_file`` / ``save`` / ``load`` on compat's saving, and a
patch that puts them in ``safetensors.torch``.

Why: ``safetensors.torch.save_file`` refuses tensors that share memory (a tied ``lm_head``, the
``q``/``k``/``v`` slices of a fused ``qkv``) and non-contiguous tensors, and its files cannot say
that two names were one tensor. compat's functions take the same arguments, save those too and
bring the sharing back on load (``compat.saving``); everything else is safetensors' own
behaviour: a state dict compat records nothing for is written byte for byte as safetensors writes
it, and input both refuse raises what the installed safetensors raises, with its message.

::

    import safetensors.torch
    from compat.integrations import safetensors as compat_safetensors

    with compat_safetensors.patch():                  # or: p = compat_safetensors.patch().install()
        safetensors.torch.save_file(model.state_dict(), "model.safetensors")  # ties kept
        model.load_state_dict(safetensors.torch.load_file("model.safetensors"))

safetensors is imported when this module is imported (never by ``import compat``).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn

import torch

from compat import _safetensors, saving
from compat.device import DeviceLike
from compat.integrations._patching import Replacement, Replacements

if TYPE_CHECKING:
    import os

__all__ = ["NAMES", "SafetensorsVersionError", "load", "load_file", "patch", "save", "save_file"]

#: The names :func:`patch` replaces in ``safetensors.torch``.
NAMES: Final = _safetensors.NAMES
# compat's refusals of input that safetensors refuses too (its own function then raises its own)
_BOTH_REFUSE: Final = (saving.SaveInputError, saving.UnsavableTensorError, saving.NoDataError)


class SafetensorsVersionError(RuntimeError):
    """The installed ``safetensors.torch`` lacks a function :func:`patch` replaces; nothing was
    patched."""


def _raise_as_safetensors(refused: Exception, tensors: object, metadata: object) -> NoReturn:
    """Raise what safetensors' own ``save`` raises for this input (``save_file`` checks the same
    and raises the same, but would write a file should it accept), with its message and compat's
    refusal as its cause; compat's refusal itself should safetensors accept the input."""
    try:
        _safetensors.call("save", tensors, metadata=metadata)
    except Exception as theirs:
        raise theirs from refused
    raise refused


def save_file(
    tensors: Mapping[str, torch.Tensor],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
    *,
    preferred: Sequence[str] = (),
) -> None:
    """``safetensors.torch.save_file`` on :func:`compat.save_file`: the same file where compat
    records nothing, tensors that share memory and non-contiguous tensors saved too; input that
    both refuse raises safetensors' own exception (compat's, naming the key, is its cause)."""
    try:
        saving.save_file(tensors, filename, metadata, preferred=preferred)
    except _BOTH_REFUSE as refused:
        _raise_as_safetensors(refused, tensors, metadata)


def save(
    tensors: Mapping[str, torch.Tensor],
    metadata: Mapping[str, str] | None = None,
    *,
    preferred: Sequence[str] = (),
) -> bytes:
    """``safetensors.torch.save`` on :func:`compat.save`, as :func:`save_file`."""
    try:
        return saving.save(tensors, metadata, preferred=preferred)
    except _BOTH_REFUSE as refused:
        _raise_as_safetensors(refused, tensors, metadata)


def load_file(
    filename: str | os.PathLike[str], device: DeviceLike = "cpu", *, backend: str | None = None
) -> dict[str, torch.Tensor]:
    """``safetensors.torch.load_file`` on :func:`compat.load_file` (aliases and views rebuilt;
    ``device`` checked by compat; ``backend`` handed to ``safe_open`` when given)."""
    return saving.load_file(filename, device, backend=backend)


def load(data: bytes) -> dict[str, torch.Tensor]:
    """``safetensors.torch.load`` on :func:`compat.load` (aliases and views rebuilt)."""
    return saving.load(data)


_DROP_INS: Final[dict[str, Callable[..., Any]]] = {
    "save_file": save_file,
    "load_file": load_file,
    "save": save,
    "load": load,
}
for _name, _function in _DROP_INS.items():
    _safetensors.mark_ours(_name, _function)
del _name, _function


def _plan() -> list[Replacement]:
    """The four names' replacements, after the check; each keeps the function it replaced on
    the stack compat reaches safetensors' own through (``compat._safetensors``) while it is
    installed."""
    module = importlib.import_module("safetensors.torch")
    current = {name: getattr(module, name, None) for name in NAMES}
    missing = [name for name, function in current.items() if not callable(function)]
    if missing:
        version = getattr(importlib.import_module("safetensors"), "__version__", "unknown")
        raise SafetensorsVersionError(
            f"safetensors {version} has no {', '.join(missing)} in safetensors.torch; compat "
            f"replaces {', '.join(NAMES)} (safetensors >= 0.4.4); nothing was patched"
        )
    plan = []
    for name, function in current.items():
        assert function is not None
        # a patch already in place (nested), or compat's assigned by hand: what it replaced
        own = _safetensors.original(name) if _safetensors.is_ours(name, function) else function
        plan.append(
            Replacement(
                module,
                name,
                _DROP_INS[name],
                installed=functools.partial(_safetensors.register, name, own),
                restored=functools.partial(_safetensors.unregister, name),
            )
        )
    return plan


class patch(Replacements):  # lower case: used like a function, `with patch():`
    """Put :func:`save_file`, :func:`load_file`, :func:`save` and :func:`load` in
    ``safetensors.torch`` in place of its own, so that code calling them by their module (and
    safetensors' ``save_model`` / ``load_model``, which call them) saves shared and non-contiguous
    tensors and loads them back with their sharing.

    ``with patch():`` installs on entry and restores every replaced name on exit, also when the
    block raises; ``p = patch(); p.install(); ...; p.uninstall()`` does the same by hand.
    Patches nest (undo them in reverse order, as blocks do). compat itself always reaches
    safetensors' own functions (``compat._safetensors``), so nothing recurses. Names other
    modules imported before the patch (``from safetensors.torch import save_file``) are theirs
    and are not replaced.

    Refuses, with :class:`SafetensorsVersionError` and nothing patched, a ``safetensors.torch``
    without one of :data:`NAMES`.
    """

    def __init__(self) -> None:
        super().__init__(_plan)
