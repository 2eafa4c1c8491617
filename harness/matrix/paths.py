"""Where things live, defined once: the repository, the matrix file, the reports tree.

``COMPAT_MATRIX_TOML`` points the noxfile at another matrix (its project is the folder it sits
in: ``tests/`` and ``requirements/`` beside it); ``COMPAT_MATRIX_REPORTS`` at another reports
folder. Tests use both to run the real harness on a throwaway project. ``COMPAT_MATRIX_SESSIONS``
is what the harness tells a cell's test session: how many sessions share the cell's deadline.
Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX_ENV = "COMPAT_MATRIX_TOML"
# the test sessions that share one cell's deadline: 2 in a carry source, which runs the suite
# with TorchAO blocked before its own run (harness/cells/cell.py); tests/common/budget.py splits the
# properties' share of the deadline between them
SESSIONS_ENV = "COMPAT_MATRIX_SESSIONS"
REPORTS_ENV = "COMPAT_MATRIX_REPORTS"
DEFAULT_MATRIX = ROOT / "matrix.toml"
DEFAULT_REPORTS = ROOT / "reports"
RUN_FILE = "run.json"  # the manifest of a matrix run: which cells should have run
CELL_FILE = "cell.json"  # a cell's record
# wheels brought to an interpreter without an index (bench/gpu_wheels.py fills it; ignored)
WHEELS = ROOT / ".wheels"


def matrix_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get(MATRIX_ENV) or DEFAULT_MATRIX)


def reports_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get(REPORTS_ENV) or DEFAULT_REPORTS)


def cells_dir(reports: Path) -> Path:
    return reports / "cells"


def cell_dir(reports: Path, cell_id: str) -> Path:
    """The folder one cell writes: cell.json, junit.xml, log.jsonl, output.log, probe.json."""
    return cells_dir(reports) / cell_id


def cell_records(reports: Path) -> list[Path]:
    """Every cell.json under ``reports``, in name order (none if the folder is not a folder)."""
    cells = cells_dir(reports)
    return sorted(cells.glob(f"*/{CELL_FILE}")) if cells.is_dir() else []
