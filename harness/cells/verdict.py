"""The verdict of a run: every cell that should have run, each with its record or "no record".

What should have run comes from, in this order: the ``--tier`` / ``--backend`` / ``--cell``
filters given to the report or the gate (cells of matrix.toml, the same selection ``python -m
harness.ci.gha`` makes); else the run's manifest ``reports/run.json`` (written by ``nox -s
matrix``); else the core tier of matrix.toml on every backend. A cell in that list without a
readable record of its own is shown as ``no-record``, which is bad: a lost result never passes.
Records of cells outside the list are left out. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.cells.record import CellResult
from harness.cells.status import BAD_STATUSES, STATUSES
from harness.matrix import paths, spec
from harness.matrix.errors import Refused
from harness.matrix.selection import cell_entry, select


@dataclass
class Expected:
    cells: list[dict[str, Any]]  # what the manifest says of each cell: id, axes, pins
    source: str  # where the list came from, said in the report
    run: dict[str, Any] = field(default_factory=dict)  # the manifest, if there is one


def expected(
    reports: Path,
    *,
    matrix_path: Path | None = None,
    tiers: Sequence[str] = (),
    backends: Sequence[str] = (),
    patterns: Sequence[str] = (),
) -> Expected:
    manifest_path = reports / paths.RUN_FILE
    if not tiers and not backends and not patterns and manifest_path.is_file():
        run = json.loads(manifest_path.read_text())
        return Expected(list(run["cells"]), f"the run's manifest ({paths.RUN_FILE})", run)
    matrix = spec.load(matrix_path or paths.matrix_path())
    unknown = sorted(set(backends) - set(matrix.backends))
    if unknown:
        raise Refused(f"unknown backend {unknown[0]!r}; accepted: {sorted(matrix.backends)}")
    chosen = list(tiers) or ["core"]
    selection = select(matrix, chosen, list(backends), probe_host=False, patterns=patterns)
    where = f"matrix.toml, tier {'+'.join(chosen)}, backend {'+'.join(backends) or 'all'}"
    if patterns:
        where += f", cells {' '.join(patterns)}"
    return Expected([cell_entry(c) for c in selection.cells], where)


def _no_record(entry: dict[str, Any], why: str) -> dict[str, Any]:
    result = CellResult(
        id=entry["id"],
        tier=entry["tier"],
        python=entry["python"],
        torch=entry["torch"],
        torchao=entry["torchao"],
        backend=entry["backend"],
        pins=list(entry.get("pins", [])),
        group=entry.get("group"),
        status="no-record",
        reason=f"no record: {why}",
    )
    return asdict(result)


def _read(path: Path, entry: dict[str, Any]) -> dict[str, Any]:
    if not path.is_file():
        return _no_record(entry, "the cell should have run and left no cell.json")
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return _no_record(entry, f"its cell.json is unreadable ({exc})")
    if not isinstance(found, dict) or found.get("id") != entry["id"]:
        return _no_record(entry, "its cell.json is not a record of this cell")
    if found.get("status") not in STATUSES:
        return _no_record(entry, f"its cell.json has an unknown status {found.get('status')!r}")
    base = _no_record(entry, "")
    base.update({k: v for k, v in found.items() if k in base})
    return base


def judge(reports: Path, want: Expected) -> list[dict[str, Any]]:
    """Every expected cell, in order: its record, or a no-record row in its place."""
    return [_read(paths.cell_dir(reports, e["id"]) / paths.CELL_FILE, e) for e in want.cells]


def bad(cells: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cells if c["status"] in BAD_STATUSES]
