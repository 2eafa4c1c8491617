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
from typing import Any

__all__ = ["Replacement", "Replacements", "call_raw", "raw_attribute"]

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


class Replacements:
    """Installs the replacements a ``plan`` function returns; a context manager.

    ``plan`` runs on each install and returns every replacement, or raises (nothing replaced).
    """

    def __init__(self, plan: Callable[[], Sequence[Replacement]]) -> None:
        self._plan = plan
        self._undo: list[tuple[object, str, object]] = []

    @property
    def installed(self) -> bool:
        return bool(self._undo)

    def install(self) -> Replacements:
        if self._undo:
            raise RuntimeError("this patch is already installed; call uninstall() first")
        planned = list(self._plan())
        for item in planned:
            owner = item.owner
            before = vars(owner).get(item.name, _ABSENT) if isinstance(owner, type) else None
            if not isinstance(owner, type):
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

    def __enter__(self) -> Replacements:
        return self.install()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.uninstall()


def call_raw(descriptor: object, owner: type, *args: Any, **kwargs: Any) -> Any:
    """Call a class attribute kept raw (``classmethod``, ``staticmethod`` or a function) as
    ``owner`` would."""
    bound = descriptor.__get__(None, owner)  # type: ignore[attr-defined]
    return bound(*args, **kwargs)
