"""Attribute replacements that an integration's ``patch()`` installs and restores: the one
mechanism of every integration (accelerate's, safetensors', transformers').

One rule for every integration: everything is checked before anything is replaced (so a refused
patch leaves the library as it was), names are put back in reverse order on exit, also when the
block raises, and patches nest (an inner patch replaces what the outer one installed and restores
it). A replacement may carry a pair of hooks, run right after it is installed and right after
it is restored: where an integration keeps a stack of what its patches replaced (the function
compat's drop-in calls through), pushed and popped with the replacement. Class attributes are
kept as their raw descriptors (a ``classmethod`` or ``staticmethod`` object), so restoring one
gives back exactly what the class held, and an attribute the class only inherited is deleted
again rather than pinned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["Replacement", "Replacements", "call_raw", "raw_attribute"]

_R = TypeVar("_R", bound="Replacements")

_ABSENT = object()


@dataclass(frozen=True)
class Replacement:
    """``owner.name`` becomes ``new`` while the patch is installed; ``installed`` runs right
    after it is set, ``restored`` right after the old value is back."""

    owner: object
    name: str
    new: object
    installed: Callable[[], None] | None = None
    restored: Callable[[], None] | None = None


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
    """Installs the replacements a ``plan`` function returns: every integration's ``patch()``
    (``with patch():`` installs on entry and uninstalls on exit, also when the block raises).

    ``plan`` runs on each install and returns every replacement, or raises (nothing replaced).
    """

    def __init__(self, plan: Callable[[], Sequence[Replacement]]) -> None:
        self._plan = plan
        self._undo: list[tuple[Replacement, object]] = []

    @property
    def installed(self) -> bool:
        return bool(self._undo)

    @property
    def replaced(self) -> tuple[Replacement, ...]:
        """What the installed patch replaced, in the order it did (empty when not installed)."""
        return tuple(item for item, _ in self._undo)

    def install(self: _R) -> _R:
        if self._undo:
            raise RuntimeError("this patch is already installed; call uninstall() first")
        for item in list(self._plan()):
            owner = item.owner
            if isinstance(owner, type):
                before = vars(owner).get(item.name, _ABSENT)
            else:
                before = getattr(owner, item.name)
            self._undo.append((item, before))
            setattr(owner, item.name, item.new)
            if item.installed is not None:
                item.installed()
        return self

    def uninstall(self) -> None:
        """Put every replaced name back, in reverse order; nothing when not installed."""
        for item, before in reversed(self._undo):
            if before is _ABSENT:
                delattr(item.owner, item.name)
            else:
                setattr(item.owner, item.name, before)
            if item.restored is not None:
                item.restored()
        self._undo.clear()

    def __enter__(self: _R) -> _R:
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
