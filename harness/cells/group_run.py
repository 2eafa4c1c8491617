"""Run a group of cells that share one venv (one torch version, one backend).

Both entry points use :func:`run_cells`: a group session (``nox -s tests-torch2.5-cpu``) in the
venv nox made for it, and the matrix run (:mod:`harness.cells.run`) in the venv it made. Every cell
ends with a record, whatever happens: a cell whose backend the host lacks is recorded as
skipped without installing anything; an exception of the harness for one cell becomes that
cell's ``harness-error`` record and the group goes on; once the run is asked to stop, the
running cell is killed and recorded as interrupted, and the cells not started yet are recorded
as interrupted too. Standard library only.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.cells.cell import harness_error, record, run_cell
from harness.cells.plan import carry_roles, plan_for
from harness.cells.record import CellResult, summary_line
from harness.matrix import backends
from harness.matrix.interpreters import uv_bin
from harness.matrix.procs import Echo, Stop
from harness.matrix.spec import Cell, Matrix


def group_name(cell: Cell) -> str:
    """Session name of the venv-sharing group: tests-torch2.5-cpu, and on a Python other than
    the default one tests-torch2.5-py3.12-cpu.

    A core torch's cells of the extended tier (a newer TorchAO, or a Python that is not one of
    its corners) form their own group (tests-torch2.6-extended-cpu), so that the core group
    never runs extended cells; so do a downstream group's cells (tests-torch2.5-ds2024.12-cpu),
    which install its libraries, and the prerelease tier's (tests-torchlatest-pre-cpu)."""
    py = f"-py{cell.python}" if cell.named_python else ""
    ext = "-extended" if cell.tier != cell.torch.tier else ""
    if cell.group:
        ext = f"-ds{cell.group}"  # a downstream group's cells share a venv of their own
    if cell.prerelease:
        ext = "-pre"  # so does the prerelease tier's cell, which installs pre-releases
    return f"tests-torch{cell.torch.label}{py}{ext}-{cell.backend.name}"


def cell_name(cell: Cell) -> str:
    return f"tests-{cell.id}"


def group_cells(cells: Sequence[Cell]) -> dict[str, list[Cell]]:
    """Cells grouped by (python, torch, backend), in matrix order."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(group_name(cell), []).append(cell)
    return groups


def stopped_reason(stop: Stop) -> str:
    return f"the run was stopped ({stop.signal}) before this cell started"


def run_cells(
    matrix: Matrix,
    cells: Sequence[Cell],
    *,
    python: Path,
    reports: Path,
    uv: str | None = None,
    candidates: Sequence[str] = (),
    echo: Echo | None = sys.stdout,
    stop: Stop | None = None,
    full: bool = False,
    threads: int | None = None,
    env: Mapping[str, str] | None = None,
    deselect: Mapping[str, Mapping[str, str]] | None = None,
) -> list[CellResult]:
    """Run ``cells`` one after another in the venv of ``python``, swapping TorchAO in place.
    Returns one result per cell, in the order given; each is also written as its cell.json.

    Where matrix.toml asks for it, cells that differ only in TorchAO carry the verdicts of the
    tests independent of it from the first of them (:mod:`harness.cells.carry`); ``full`` runs
    every test in every cell, the first of each set also making the blocked run whose verdicts
    :func:`harness.cells.carry.check` compares with the real ones. ``threads``: the CPU threads
    each cell's torch may use (its share of the cores when groups run side by side, see
    :func:`harness.cells.plan.thread_env`). ``env``: added to
    the environment of every command of every cell (a pruned group's own uv cache, see
    :func:`harness.cells.run.run_matrix`). ``deselect``: cell id -> the test paths it leaves
    out, each with why (``--peer-suites first``, :func:`harness.cells.run.peer_deselection`).
    """
    stop = stop or Stop()
    python = python.absolute()  # cells run in their project's folder; never resolve(): a
    # venv's interpreter is a symlink to the base one, and following it leaves the venv
    results: dict[str, CellResult] = {}
    present = {cell.backend.name: cell.backend for cell in cells}
    absent = {name: backends.host_lacks(backend) for name, backend in present.items()}
    tool = uv or (uv_bin() if any(reason is None for reason in absent.values()) else "")
    roles = carry_roles(matrix, [c for c in cells if not absent[c.backend.name]], full)
    for cell in cells:
        reason = absent[cell.backend.name]
        try:
            if reason:
                result = record(cell, "skipped", reason, reports)
            elif stop.requested:
                result = record(cell, "interrupted", stopped_reason(stop), reports)
            else:
                plan = plan_for(
                    matrix,
                    cell,
                    python,
                    uv=tool,
                    reports=reports,
                    candidates=candidates,
                    deselect=(deselect or {}).get(cell.id),
                    roles=roles,
                    threads=threads,
                    env=env,
                )
                result = run_cell(plan, echo=echo, stop=stop)
        except Exception as exc:  # one cell's harness failure is that cell's status
            result = harness_error(cell, exc, reports)
        results[cell.id] = result
        if echo is not None:
            echo.write(f"[harness] {summary_line(result)}\n")
            echo.flush()
    return [results[cell.id] for cell in cells]
