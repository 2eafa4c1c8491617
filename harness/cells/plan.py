"""The plan of a cell: what to install, how to run its tests, in which environment, and its part in
carrying verdicts, all decided before anything runs.

:func:`plan_for` is the one place a cell's plan is made from the matrix; :func:`carry_roles` is
the planning half of carrying (:mod:`harness.cells.carry` says what carrying is): which cells one
TorchAO-blocked run stands for. Standard library only: this module runs in the nox process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cells.evidence import Role
from harness.matrix import paths
from harness.matrix.spec import Cell, Matrix

PROBE = Path(__file__).resolve().parent / "probe.py"
UV_ENV = "COMPAT_MATRIX_UV"  # tests/common/peers/fetch.py
PRERELEASE_MODULE = "harness.matrix.prerelease"
CARRY_AXIS = "torchao"  # the one axis whose cells carry verdicts


# --- carrying, as planned -----------------------------------------------------------------


Roles = Mapping[Any, Role]


def key(matrix: Matrix, cell: Cell) -> tuple[Any, ...] | None:
    """Cells with the same key differ only in TorchAO (same Python, torch pin, backend and
    requirements): the cells one blocked run stands for. None: the cell never carries (the
    matrix does not ask for it, or a downstream cell, whose libraries may reach TorchAO)."""
    if CARRY_AXIS not in matrix.carry or cell.group:
        return None
    reqs = tuple(matrix.requirements_for(cell))
    return (cell.python, cell.torch.pin, cell.backend.name, reqs)


def varying_patterns(matrix: Matrix, cells: Sequence[Cell]) -> tuple[str, ...]:
    """The expected-failure patterns that apply to some of ``cells`` and not to all: the tests
    they match depend on the axis that varies, whatever the blocked run saw."""
    sets: list[set[str]] = [
        {
            p
            for x in matrix.xfails_for(
                c.torch.label, c.torchao.label, c.backend.name, None, c.python
            )
            for p in x.tests
        }
        for c in cells
    ]
    if not sets:
        return ()
    everywhere = set(sets[0]).intersection(*sets[1:])
    return tuple(sorted(set().union(*sets) - everywhere))


def carry_roles(matrix: Matrix, cells: Sequence[Cell], full: bool) -> dict[Any, Role]:
    """One shared role per set of cells a blocked run can stand for: two cells or more of the
    run (a GitHub job runs a torch group, so a set is whole in one job unless its group was too
    long for one: harness/ci/fanout.py)."""
    found: dict[Any, list[Cell]] = {}
    for cell in cells:
        found_key = key(matrix, cell)
        if found_key is not None:
            found.setdefault(found_key, []).append(cell)
    return {
        k: Role(CARRY_AXIS, varying_patterns(matrix, group), full=full)
        for k, group in found.items()
        if len(group) > 1
    }


def carry_role(roles: Roles, matrix: Matrix, cell: Cell) -> Role | None:
    """The cell's part: its set's role as it stands, or None when the cell does not carry (a
    full run's cells after the first of their set, whose blocked run was made or refused)."""
    role = roles.get(key(matrix, cell))
    if role is None or (role.full and (role.made is not None or role.refused)):
        return None
    return role


# --- the environment ----------------------------------------------------------------------

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


# --- the plan -----------------------------------------------------------------------------


@dataclass
class CellPlan:
    """Everything needed to run a cell, resolved by the caller (the runner or a test)."""

    cell: Cell
    python: Path  # the venv's interpreter
    outdir: Path
    install: list[list[str]]  # commands; empty when the venv is prepared by the caller
    pytest_args: list[str]
    xfails: list[dict[str, Any]]
    probe_script: Path = PROBE  # imports torch, writes probe.json, then runs pytest
    env: dict[str, str] = field(default_factory=dict)
    candidates: list[str] = field(default_factory=list)
    cwd: Path = paths.ROOT  # the project the tests belong to: the folder of matrix.toml
    carry: Role | None = None  # its part in carrying verdicts (harness/cells/carry.py)
    tests: list[str] = field(default_factory=lambda: ["tests"])  # the paths pytest_args collect
    deselected: dict[str, str] = field(default_factory=dict)  # path -> why (CellResult's)


def install_commands(
    cell: Cell,
    python: Path,
    *,
    uv: str,
    requirements: Sequence[str],
    candidates: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> list[list[str]]:
    """``uv pip install`` of the cell's pins plus the test requirements, in one resolution;
    then, in the prerelease tier's cell, its distributions at their newest releases, pre-releases
    included (:mod:`harness.matrix.prerelease`, which asks the index when the cell installs); then,
    if any, the upstream candidates (taken verbatim: a requirement, a wheel path, a URL),
    installed after the pins so that they replace what the pins brought."""
    cmd = [uv, "pip", "install", "--python", str(python)]
    index = cell.backend.index_url(environ)
    if index:
        cmd += ["--index", index]  # uv prefers it over the default index for what it holds
    cmd += cell.requirements()
    for req in requirements:
        cmd += ["-r", str(req)]
    out = [cmd]
    if cell.prerelease:
        out.append(
            [sys.executable, "-m", PRERELEASE_MODULE, "--python", str(python), "--uv", uv,
             *cell.prerelease]
        )  # fmt: skip
    return [*out, candidate_command(uv, python, candidates)] if candidates else out


def candidate_command(uv: str, python: Path, candidates: Sequence[str]) -> list[str]:
    """Install upstream candidates verbatim into the venv, over whatever the pins brought."""
    return [uv, "pip", "install", "--python", str(python), *candidates]


def cell_pytest_args(
    cell: Cell,
    outdir: Path,
    tests: Sequence[str] = ("tests",),
    reruns: int = 0,
) -> list[str]:
    rerun_args = [f"--reruns={reruns}"] if reruns else []
    return [
        *tests,
        "-p",
        "no:cacheprovider",
        f"--junitxml={outdir / 'junit.xml'}",
        "-o",
        "junit_family=xunit2",
        "-o",
        f"junit_suite_name={cell.id}",
        f"--report-log={outdir / 'log.jsonl'}",
        *rerun_args,
    ]


def plan_for(
    matrix: Matrix,
    cell: Cell,
    python: Path,
    *,
    uv: str,
    reports: Path,
    candidates: Sequence[str] = (),
    deselect: Mapping[str, str] | None = None,
    roles: Roles | None = None,
    threads: int | None = None,
    env: Mapping[str, str] | None = None,
) -> CellPlan:
    """The cell's plan. ``deselect``: test paths (node id prefixes) this run leaves out of the
    cell, each with why (pytest's ``--deselect``; the record says so). ``roles``: the run's
    carrying (:func:`carry_roles`). The environment: torch's threads capped at ``threads``
    (:func:`thread_env`), the cell's Hypothesis profile (:func:`profile_env`), its backend's
    variables and the uv it installs with (for tests that ask the index,
    tests/common/peers/fetch.py), then ``env`` over all of them."""
    outdir = paths.cell_dir(reports, cell.id)
    requirements = [str(matrix.root / r) for r in matrix.requirements_for(cell)]
    found = matrix.xfails_for(
        cell.torch.label, cell.torchao.label, cell.backend.name, cell.group, cell.python
    )
    tests = matrix.test_paths(cell)
    deselected = dict(deselect or {})
    args = cell_pytest_args(cell, outdir, tests, matrix.reruns)
    return CellPlan(
        cell,
        python,
        outdir,
        install_commands(cell, python, uv=uv, requirements=requirements, candidates=candidates),
        [*args, *(f"--deselect={path}" for path in deselected)],
        [x.as_record() for x in found],
        env={
            **thread_env(threads),
            **profile_env(matrix, cell),
            **dict(cell.backend.env),
            **({UV_ENV: uv} if uv else {}),
            **(env or {}),
        },
        candidates=list(candidates),
        cwd=matrix.root,
        carry=carry_role(roles or {}, matrix, cell),
        tests=list(tests),
        deselected=deselected,
    )
