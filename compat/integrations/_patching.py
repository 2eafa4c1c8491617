"""Attribute replacements that an integration's ``patch()`` installs and restores.

One rule for every integration: everything is checked before anything is replaced (so a refused
patch leaves the library as it was), names are put back in reverse order on exit, also when the
block raises, and patches nest (an inner patch replaces what the outer one installed and restores
it). Class attributes are kept as their raw descriptors (a ``classmethod`` or ``staticmethod``
object), so restoring one gives back exactly what the class held, and an attribute the class only
inherited is deleted again rather than pinned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["Patch", "Replacement", "Replacements", "call_raw", "raw_attribute"]

_P = TypeVar("_P", bound="Patch")
_R = TypeVar("_R", bound="Replacements")

_ABSENT = object()


@dataclass(frozen=True)
class Replacement:
    """``owner.name`` becomes ``new`` while the patch is installed."""

    owner: object
    name: str
    new: object


def raw_attribute(owner: object, name: str) -> object:
    """``owner.name`` as stored: a class's own descriptor unwrapped by nothing, or a module's or
    instance's attribute; for a class attribute it only inherits, the inherited descriptor."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        raise AttributeError(f"{owner.__qualname__} has no attribute {name!r}")
    return getattr(owner, name)


class Patch:
    """What every integration's ``patch()`` shares: ``with patch():`` installs on entry and
    uninstalls on exit, also when the block raises; subclasses define the two steps."""

    def install(self: _P) -> _P:
        raise NotImplementedError

    def uninstall(self) -> None:
        raise NotImplementedError

    def __enter__(self: _P) -> _P:
        return self.install()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.uninstall()


class Replacements(Patch):
    """Installs the replacements a ``plan`` function returns.

    ``plan`` runs on each install and returns every replacement, or raises (nothing replaced).
    """

    def __init__(self, plan: Callable[[], Sequence[Replacement]]) -> None:
        self._plan = plan
        self._undo: list[tuple[object, str, object]] = []

    @property
    def installed(self) -> bool:
        return bool(self._undo)

    def install(self: _R) -> _R:
        if self._undo:
            raise RuntimeError("this patch is already installed; call uninstall() first")
        for item in list(self._plan()):
            owner = item.owner
            if isinstance(owner, type):
                before = vars(owner).get(item.name, _ABSENT)
            else:
                before = getattr(owner, item.name)
            self._undo.append((owner, item.name, before))
            setattr(owner, item.name, item.new)
        return self

    def uninstall(self) -> None:
        for owner, name, before in reversed(self._undo):
            if before is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, before)
        self._undo.clear()


def call_raw(descriptor: object, owner: type, *args: Any, **kwargs: Any) -> Any:
    """Call a class attribute kept raw (``classmethod``, ``staticmethod`` or a function) as
    ``owner`` would."""
    bound = descriptor.__get__(None, owner)  # type: ignore[attr-defined]
    return bound(*args, **kwargs)
