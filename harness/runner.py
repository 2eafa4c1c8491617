"""Run a group of cells that share one venv (one torch version, one backend).

The noxfile calls :func:`run_cells` from a session; this module knows nothing about nox beyond
the venv interpreter and the uv binary it is handed. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from harness.cell import (
    CellResult,
    host_lacks,
    plan_for,
    run_cell,
    skipped_results,
    summary_line,
)
from harness.spec import Cell, Matrix

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"


def uv_bin() -> str:
    """The uv executable nox would use: $UV, the `uv` package next to nox, or PATH."""
    if os.environ.get("UV"):
        return os.environ["UV"]
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise RuntimeError(
                "uv is not installed: pip install -r requirements/tools.txt"
            ) from None
        return found


def group_name(cell: Cell) -> str:
    """Session name of the venv-sharing group: tests-torch2.5-cpu (py prefix if several).

    A core torch's cells with an extended-tier TorchAO form their own group
    (tests-torch2.6-extended-cpu), so that the core group never runs extended cells."""
    py = f"py{cell.python}-" if cell.multi_python else ""
    ext = "-extended" if cell.tier != cell.torch.tier else ""
    return f"tests-{py}torch{cell.torch.label}{ext}-{cell.backend.name}"


def cell_name(cell: Cell) -> str:
    return f"tests-{cell.id}"


def group_cells(matrix: Matrix, tiers: Sequence[str]) -> dict[str, list[Cell]]:
    """Cells grouped by (python, torch, backend), in matrix order."""
    groups: dict[str, list[Cell]] = {}
    for cell in matrix.cells(tiers=tiers):
        groups.setdefault(group_name(cell), []).append(cell)
    return groups


def run_cells(
    matrix: Matrix,
    cells: Sequence[Cell],
    *,
    python: Path,
    reports: Path = REPORTS,
    uv: str | None = None,
    candidates: Sequence[str] = (),
    echo: TextIO | None = sys.stdout,
) -> list[CellResult]:
    """Run ``cells`` one after another in the venv of ``python``, swapping TorchAO in place.

    Cells whose backend the host lacks are recorded as skipped without installing anything.
    """
    backends = {cell.backend.name: cell.backend for cell in cells}
    results: list[CellResult] = []
    runnable: list[Cell] = []
    for name, backend in backends.items():
        mine = [c for c in cells if c.backend.name == name]
        reason = host_lacks(backend)
        if reason:
            results += skipped_results(mine, reason, reports)
        else:
            runnable += mine
    tool = (uv or uv_bin()) if runnable else ""
    for cell in runnable:
        plan = plan_for(matrix, cell, python, uv=tool, reports=reports, candidates=candidates)
        result = run_cell(plan, echo=echo)
        if echo is not None:
            echo.write(f"[harness] {summary_line(result)}\n")
            echo.flush()
        results.append(result)
    order = {cell.id: i for i, cell in enumerate(cells)}
    return sorted(results, key=lambda r: order[r.id])
