"""Reading a TOML file that is trusted in nothing: typed access to each table, and every refusal
naming the file, the field's path and the bad value.

``matrix.toml`` (:mod:`harness.matrix.spec`) and ``mutation.toml`` (:mod:`harness.mutation.plan`)
are read through :func:`read` and :class:`Table`; each names its own error class (a
:class:`TomlError`), so a caller can tell which file was refused. Standard library only (tomli on
Python 3.10, where a cell's tests read matrix.toml too).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from harness.matrix.errors import Refused

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef, import-not-found]


class TomlError(Refused):
    """A TOML file is malformed; the message names the file, the field and the bad value."""

    def __init__(self, path: Path | str, field_name: str, problem: str, value: Any = ...) -> None:
        shown = "" if value is ... else f" (got {value!r})"
        super().__init__(f"{path}: {field_name}: {problem}{shown}")
        self.path = str(path)
        self.field = field_name
        self.value = value


def read(path: Path, error: type[TomlError] = TomlError) -> dict[str, Any]:
    """The document at ``path``; ``error`` if it cannot be read or is not TOML."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise error(path, "<file>", f"is not valid TOML: {exc}") from None
    except OSError as exc:
        raise error(path, "<file>", f"cannot be read: {exc.strerror}") from None


class Table:
    """Typed access to one TOML table that remembers its field path for error messages; refuses
    a value that is not a table and keys outside ``allowed``. Subclasses set :attr:`error`."""

    error: ClassVar[type[TomlError]] = TomlError

    def __init__(self, path: Path, where: str, table: Any, allowed: Iterable[str]) -> None:
        self.path, self.where = path, where
        if not isinstance(table, dict):
            raise self.error(path, where or "<root>", "must be a table", table)
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise self.error(
                path,
                self._name(unknown[0]),
                f"unknown key; accepted keys are {sorted(allowed)}",
                unknown[0],
            )
        self.table: dict[str, Any] = table

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, problem: str, value: Any = ...) -> TomlError:
        return self.error(self.path, self._name(key), problem, value)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if key not in self.table:
            if default is ...:
                raise self.fail(key, "is required")
            return default
        value = self.table[key]
        # bool is an int in Python; a bool where a number is wanted is a mistake
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self.fail(key, f"must be of type {names}", value)
        return value

    def strings(self, key: str, default: Any = ...) -> tuple[str, ...]:
        value = self.get(key, list, default)
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{key}[{i}]", "must be a string", item)
        return tuple(value)
