"""What a run should run, read from the matrix: the selection of cells (by tier, backend, cell
pattern and the downstream cells of today's stack), with the backends and Pythons this runner
lacks, and the manifest (``reports/run.json``) that records it, so that whoever reads the records
(the verdict, the gate, the report) judges them against what should have run without importing
anything that runs cells. Standard library only.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.matrix import backends, interpreters, paths
from harness.matrix.errors import Refused
from harness.matrix.spec import LATEST, Cell, Matrix, label_key

MANIFEST_SCHEMA = 1
# --downstream-extended: the downstream cells of an extended torch or TorchAO (today's stack) all,
# or only the newest pinned torch x TorchAO of each downstream group and backend (CI's budget)
DOWNSTREAM_EXTENDED = ("every", "newest")


@dataclass(frozen=True)
class Selection:
    """The cells a run should run: matrix.toml filtered by tier and backend."""

    tiers: tuple[str, ...]
    backends: tuple[str, ...]  # the --backend filter; empty: every backend
    cells: tuple[Cell, ...]
    absent: dict[str, str] = field(default_factory=dict)  # backend -> why the runner lacks it
    interpreters: dict[str, str] = field(default_factory=dict)  # Python -> its interpreter
    missing: dict[str, str] = field(default_factory=dict)  # Python -> why it was not found
    not_published: tuple[dict[str, str], ...] = ()  # combinations without a wheel (shown)

    def skip_reason(self, cell: Cell) -> str | None:
        """Why ``cell`` is recorded as skipped without running: its backend or Python is absent."""
        return self.absent.get(cell.backend.name) or self.missing.get(cell.python)


def newest(cells: Iterable[Cell]) -> Cell | None:
    """The cell of the newest pinned torch, with the newest pinned TorchAO of that torch, among
    ``cells`` (a ``latest`` pin is no release yet: left out); None if none is pinned. One pin per
    axis label, so the labels' order is the releases'."""
    pinned = [c for c in cells if LATEST not in (c.torch.pin, c.torchao.pin)]
    return max(
        pinned, key=lambda c: (label_key(c.torch.label), label_key(c.torchao.label)), default=None
    )


def _beyond_core(cell: Cell) -> bool:
    """A downstream cell of an extended torch or TorchAO."""
    return cell.group is not None and "extended" in (cell.torch.tier, cell.torchao.tier)


def _downstream_extended(cells: list[Cell], mode: str) -> list[Cell]:
    """``cells`` with ``--downstream-extended`` applied (see DOWNSTREAM_EXTENDED)."""
    if mode not in DOWNSTREAM_EXTENDED:
        raise Refused(f"--downstream-extended must be one of {DOWNSTREAM_EXTENDED}, not {mode!r}")
    if mode == "every":
        return cells
    keep = {
        newest(c for c in cells if _beyond_core(c) and (c.group, c.backend.name) == where)
        for where in {(c.group, c.backend.name) for c in cells if _beyond_core(c)}
    }
    return [c for c in cells if not _beyond_core(c) or c in keep]


def select(
    matrix: Matrix,
    tiers: Sequence[str],
    only: Sequence[str] = (),
    *,
    probe_host: bool = True,
    patterns: Sequence[str] = (),
    downstream_extended: str = "every",
) -> Selection:
    """The cells of ``tiers`` on the backends ``only`` (empty: all), narrowed to the cell ids
    matching any of ``patterns`` (fnmatch; empty: all), and by ``downstream_extended``."""
    cells = [
        c
        for c in matrix.cells(tiers=tiers)
        if (not only or c.backend.name in only)
        and (not patterns or any(fnmatch.fnmatchcase(c.id, p) for p in patterns))
    ]
    cells = _downstream_extended(cells, downstream_extended)
    absent: dict[str, str] = {}
    found: dict[str, str] = {}
    missing: dict[str, str] = {}
    if probe_host:
        for backend in {c.backend.name: c.backend for c in cells}.values():
            reason = backends.host_lacks(backend)
            if reason:
                absent[backend.name] = reason
        wanted = list(dict.fromkeys(c.python for c in cells))
        for python, path in interpreters.find(wanted, uv=_uv_or_none()).items():
            if path is None:
                missing[python] = interpreters.missing_reason(python)
            else:
                found[python] = str(path)
    shown = tuple(matrix.not_published(tiers))  # alike on every backend
    return Selection(
        tiers=tuple(tiers),
        backends=tuple(only),
        cells=tuple(cells),
        absent=absent,
        interpreters=found,
        missing=missing,
        not_published=shown,
    )


def _uv_or_none() -> str | None:
    try:
        return interpreters.uv_bin()
    except RuntimeError:
        return None


def cell_entry(cell: Cell) -> dict[str, Any]:
    """What a manifest (and a "no record" row) says about a cell."""
    return {
        "id": cell.id,
        "tier": cell.tier,
        "python": cell.python,
        "torch": cell.torch.label,
        "torchao": cell.torchao.label,
        "backend": cell.backend.name,
        "group": cell.group,
        "pins": cell.requirements(),
    }


def manifest(
    selection: Selection, state: str, *, candidates: Sequence[str] = (), signal: str | None = None
) -> dict[str, Any]:
    return {
        "schema": MANIFEST_SCHEMA,
        "state": state,  # running, finished, interrupted
        "signal": signal,
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "tiers": list(selection.tiers),
        "backends": list(selection.backends),
        "absent": dict(selection.absent),
        "missing_pythons": dict(selection.missing),
        "not_published": list(selection.not_published),
        "candidates": list(candidates),
        "cells": [cell_entry(c) for c in selection.cells],
    }


def write_manifest(reports: Path, data: dict[str, Any]) -> Path:
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / paths.RUN_FILE
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path
