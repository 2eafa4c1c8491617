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

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.cells import carry
from harness.cells.cell import harness_error, plan_for, record, run_cell, summary_line
from harness.cells.record import CellResult
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


def _roles(matrix: Matrix, cells: Sequence[Cell], full: bool) -> dict[Any, carry.Role]:
    """One shared role per set of cells a blocked run can stand for: two cells or more of the
    run (a GitHub job runs a torch group, so a set is whole in one job unless its group was too
    long for one: harness/ci/fanout.py)."""
    found: dict[Any, list[Cell]] = {}
    for cell in cells:
        key = carry.key(matrix, cell)
        if key is not None:
            found.setdefault(key, []).append(cell)
    return {
        key: carry.Role("torchao", carry.varying_patterns(matrix, group), full=full)
        for key, group in found.items()
        if len(group) > 1
    }


def _role_for(roles: dict[Any, carry.Role], matrix: Matrix, cell: Cell) -> carry.Role | None:
    """The cell's part: the role as it stands (the first cell of a set to run makes the source;
    the others get it), or None when the cell does not carry."""
    role = roles.get(carry.key(matrix, cell))
    if role is None or (role.full and (role.made is not None or role.refused)):
        return None  # a full run: only the first cell of the set has a part (the blocked run)
    return carry.Role(role.axis, role.varying, role.made, role.full, refused=role.refused)


def _took_part(
    roles: dict[Any, carry.Role], matrix: Matrix, cell: Cell, played: carry.Role | None
) -> None:
    """After a cell ran: what its blocked run established (or refused) holds for its set. A
    cell that never got to its blocked run (an install error) leaves the next cell to try."""
    role = roles.get(carry.key(matrix, cell))
    if played is not None and role is not None and role.made is None and not role.refused:
        role.made, role.refused = played.made, played.refused


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(threads: int | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables that cap torch's CPU threads at ``threads`` (None: no cap), leaving out
    those the user set: the suite's tensors are small, and two cells side by side each using
    every core spend their time contending (measured: 14 % slower on 2 cores)."""
    if threads is None:
        return {}
    return {name: str(threads) for name in THREAD_VARS if name not in environ}


PROFILE_VAR = "HYPOTHESIS_PROFILE"  # tests/common/profiles.py
CORNER_PROFILE = "corner"  # tests/common/profiles.py: a quarter of each property's examples


def profile_env(
    matrix: Matrix, cell: Cell, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The Hypothesis profile of a cell on a Python other than the matrix's default: ``corner``
    (every test, each property with a quarter of its examples; the same torch and TorchAO get
    the full budget in the default Python's cell), unless the user named one. Nothing for a
    default-Python cell: ``ci``, the default of every run."""
    if cell.python == matrix.default_python or environ.get(PROFILE_VAR):
        return {}
    return {PROFILE_VAR: CORNER_PROFILE}


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
    :func:`thread_env`). ``env``: added to
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
    roles = _roles(matrix, [c for c in cells if not absent[c.backend.name]], full)
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
                )
                plan.carry = _role_for(roles, matrix, cell)
                plan.env = {
                    **thread_env(threads),
                    **profile_env(matrix, cell),
                    **plan.env,
                    **(env or {}),
                }
                result = run_cell(plan, echo=echo, stop=stop)
                _took_part(roles, matrix, cell, plan.carry)
        except Exception as exc:  # one cell's harness failure is that cell's status
            result = harness_error(cell, exc, reports)
        results[cell.id] = result
        if echo is not None:
            echo.write(f"[harness] {summary_line(result)}\n")
            echo.flush()
    return [results[cell.id] for cell in cells]
