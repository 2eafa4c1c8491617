"""safetensors.torch's own functions, whatever compat put in their place.

compat writes and reads through safetensors, and :mod:`compat.integrations.safetensors` puts
compat's ``save_file`` / ``load_file`` / ``save`` / ``load`` into ``safetensors.torch``. So compat's
own code never calls those names there; it calls :func:`call`, which runs :func:`original`:

1. the function a compat patch replaced (the integration registers it with :func:`register`
   while its patch is installed, and takes it back with :func:`unregister`), else
2. the function ``safetensors.torch`` holds, unless it is one of compat's own (assigned there by
   hand: :func:`mark_ours` names them), else
3. the function of a private copy of ``safetensors.torch``, run once from its installed source
   (:func:`pristine`; ``sys.modules`` is left as it is).

Should that function lead back into compat all the same (a wrapper assigned by hand that calls
compat's function), :func:`reentered` is true in compat's function, which then does what
safetensors' own function does (``pristine(name)``) instead of recursing. The flag is per
thread.

safetensors is imported on first use: ``import compat`` never imports it.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

__all__ = ["NAMES", "call", "mark_ours", "original", "pristine", "reentered", "register"]

#: The functions of ``safetensors.torch`` that compat has drop-ins for.
NAMES: Final = ("save_file", "load_file", "save", "load")

# name -> the functions compat patches replaced, innermost last (patches nest)
_REPLACED: dict[str, list[Callable[..., Any]]] = {name: [] for name in NAMES}
# compat's drop-ins (compat.saving's functions and the integration's), by name
_OURS: dict[str, list[Callable[..., Any]]] = {name: [] for name in NAMES}
_PRISTINE: list[ModuleType] = []
_LOCAL = threading.local()


def _check(name: str) -> None:
    if name not in _REPLACED:
        raise ValueError(f"{name!r} is not one of {NAMES}")


def mark_ours(name: str, function: Callable[..., Any]) -> None:
    """Record ``function`` as compat's drop-in for ``safetensors.torch.<name>``."""
    _check(name)
    if not any(function is f for f in _OURS[name]):
        _OURS[name].append(function)


def is_ours(name: str, function: object) -> bool:
    """Whether ``function`` is one of compat's drop-ins for ``name``."""
    _check(name)
    return any(function is f for f in _OURS[name])


def register(name: str, function: Callable[..., Any]) -> None:
    """A patch replaced ``safetensors.torch.<name>``, which was ``function``."""
    _check(name)
    _REPLACED[name].append(function)


def unregister(name: str) -> None:
    """The innermost patch of ``name`` was undone."""
    _check(name)
    _REPLACED[name].pop()


def pristine(name: str) -> Callable[..., Any]:
    """``name`` of a private copy of ``safetensors.torch``, run from its installed source once:
    safetensors' own function, whatever was assigned into the imported module."""
    _check(name)
    if not _PRISTINE:
        spec = importlib.util.find_spec("safetensors.torch")
        if spec is None or spec.loader is None:
            raise ImportError("safetensors.torch cannot be found; install safetensors")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _PRISTINE.append(module)
    function: Callable[..., Any] = getattr(_PRISTINE[0], name)
    return function


def original(name: str) -> Callable[..., Any]:
    """safetensors.torch's own function ``name``, or the one a compat patch replaced."""
    _check(name)
    replaced = _REPLACED[name]
    if replaced:
        return replaced[-1]
    module = importlib.import_module("safetensors.torch")
    function: Callable[..., Any] = getattr(module, name)
    if is_ours(name, function):
        return pristine(name)
    return function


def reentered() -> bool:
    """Whether this thread is inside a call that :func:`call` made into safetensors."""
    return bool(getattr(_LOCAL, "depth", 0))


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """``original(name)(*args, **kwargs)``, marked (per thread) as a call compat made, so that
    a compat function it leads back to knows (:func:`reentered`)."""
    function = original(name)
    depth = getattr(_LOCAL, "depth", 0)
    _LOCAL.depth = depth + 1
    try:
        return function(*args, **kwargs)
    finally:
        _LOCAL.depth = depth
