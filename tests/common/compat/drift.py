"""Drift probes' record: what torch, TorchAO and the peers do in a cell, one observation per
probe (tests/compat/drift/), written where the harness asks (``$COMPAT_MATRIX_DRIFT``) and merged
into reports/drift.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_SEEN: dict[str, dict[str, Any]] = {}


class Drift:
    """Records one observation per probe; the harness merges them into reports/drift.json."""

    def __call__(self, probe: str, value: Any, *, axis: str = "torch", about: str = "") -> Any:
        """Record ``value`` (made JSON-safe) for ``probe``. ``axis`` says which version the
        value depends on (torch, torchao or peer: a column of the "what changed" table)."""
        if axis not in ("torch", "torchao", "peer"):
            raise ValueError(f"axis must be torch, torchao or peer, not {axis!r}")
        safe = value if isinstance(value, str | int | float | bool | type(None)) else repr(value)
        _SEEN[probe] = {"value": safe, "axis": axis, "about": about}
        return value


def write(path: Path) -> None:
    """The session's observations as JSON at ``path``; nothing when no probe ran."""
    if _SEEN:
        path.write_text(json.dumps(_SEEN, indent=1, sort_keys=True) + "\n")


def observe(fn: Any) -> str:
    """What calling ``fn`` does, as text: its result's repr, or the exception type it raises."""
    try:
        return repr(fn())
    except Exception as exc:
        return f"raises {type(exc).__name__}"
