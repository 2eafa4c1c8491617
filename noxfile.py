# /// script
# dependencies = ["nox>=2025.2.9", "uv>=0.5"]
# ///
"""Sessions generated from matrix.toml; the logic lives in harness/ (tested on its own).

nox -l                        every session: the matrix cells and the tools
nox -s tests                  the README's test command: the default cell + harness tests
nox -s matrix                 the main job: every runnable core cell, then the report
nox -s matrix -- --tier extended --backend cpu
nox -s tests-torch2.5-cpu     torch 2.5 with every TorchAO version, in one venv
nox -s tests-torch2.5-ao0.7-cpu   one cell
nox -t torch2.5 / -t cpu / -t ao0.7   pick by axis (tags)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from harness import runner, spec  # noqa: E402
from harness.cell import summary_line  # noqa: E402
from harness.spec import Cell  # noqa: E402

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]

# the matrix (a test points this at a throwaway project: its tests/ and requirements/ sit beside it)
MATRIX = spec.load(os.environ.get("COMPAT_MATRIX_TOML") or ROOT / "matrix.toml")
# where cells write and the report is rendered (a test points this at a temporary folder)
REPORTS = Path(os.environ.get("COMPAT_MATRIX_REPORTS") or ROOT / "reports")
HARNESS_REQS = ("-r", "requirements/harness.txt")
# Upstream candidates for the gate reach the cell sessions (run by a nested nox) through here.
CANDIDATES_ENV = "COMPAT_MATRIX_CANDIDATES"


def _run_and_judge(session: nox.Session, cells: Sequence[Cell]) -> None:
    """Run cells in this session's venv; skip if none could run, fail if any went wrong."""
    candidates = json.loads(os.environ.get(CANDIDATES_ENV) or "[]")
    results = runner.run_cells(
        MATRIX, cells, python=Path(session.bin) / "python", reports=REPORTS, candidates=candidates
    )
    for result in results:
        session.log(summary_line(result))
    if all(r.status == "skipped" for r in results):
        session.skip(results[0].reason)
    bad = [r.id for r in results if not r.ok]
    if bad:
        session.error(f"{len(bad)} cell(s) did not pass: {', '.join(bad)}")


def _group_session(name: str, cells: list[Cell]) -> None:
    first = cells[0]

    @nox.session(
        name=name,
        python=first.python,
        tags=["matrix", first.tier, f"torch{first.torch.label}", first.backend.name],
        default=False,
        allow_parallel=True,  # one venv per group: groups never share files
    )
    def group(session: nox.Session) -> None:
        _run_and_judge(session, cells)

    aos = ", ".join(c.torchao.pin for c in cells)
    group.__doc__ = f"torch {first.torch.pin} × TorchAO {aos} on {first.backend.name}"


def _cell_session(cell: Cell) -> None:
    @nox.session(
        name=runner.cell_name(cell),
        python=cell.python,
        tags=["cell", f"ao{cell.torchao.label}", f"torch{cell.torch.label}-ao{cell.torchao.label}"],
        default=False,
    )
    def one(session: nox.Session) -> None:
        _run_and_judge(session, [cell])

    one.__doc__ = f"one cell: {' '.join(cell.requirements())} on {cell.backend.name}"


for _name, _cells in runner.group_cells(MATRIX, spec.TIERS).items():
    _group_session(_name, _cells)
    for _cell in _cells:
        _cell_session(_cell)


def _matrix_args(prog: str, posargs: Sequence[str], *, gate: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"nox -s {prog} --")
    parser.add_argument("--tier", action="append", choices=spec.TIERS, help="default: core")
    parser.add_argument("--backend", action="append", choices=sorted(MATRIX.backends))
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="torch groups run side by side (default: cores, at most 4)",
    )
    if gate:
        parser.add_argument(
            "--from",
            dest="source",
            type=Path,
            help="use the per-cell results already in this folder instead of running the matrix",
        )
        parser.add_argument(
            "--candidate",
            action="append",
            default=[],
            help="an upstream candidate installed into every cell after the pins: a requirement"
            " (safetensors==0.8.0), a wheel path, or a VCS/URL requirement, verbatim",
        )
    return parser.parse_args(list(posargs))


def _run_matrix(
    session: nox.Session, args: argparse.Namespace, candidates: Sequence[str] = ()
) -> None:
    """Run the selected groups through a nested nox (a failing group never stops the others)."""
    names = [
        name
        for name, cells in runner.group_cells(MATRIX, args.tier or ["core"]).items()
        if not args.backend or cells[0].backend.name in args.backend
    ]
    env = {CANDIDATES_ENV: json.dumps(list(candidates))} if candidates else {}
    # the report is of this run: results of earlier selections must not linger in it
    shutil.rmtree(REPORTS / "cells", ignore_errors=True)
    session.run(
        sys.executable,
        "-m",
        "nox",
        "--reuse-venv=yes",
        f"--envdir={session.env_dir.parent}",  # the outer nox's --envdir, if one was given
        f"--parallel={args.jobs}",
        "-s",
        *names,
        external=True,
        success_codes=[0, 1],  # judged from the report below
        env=env,
    )
    session.run("python", "-m", "harness.report", "--reports", str(REPORTS))


@nox.session(python=MATRIX.python[0], default=False)
def matrix(session: nox.Session) -> None:
    """The main job: every cell this runner can run (others skip), then the matrix report."""
    args = _matrix_args("matrix", session.posargs)
    session.install(*HARNESS_REQS)
    _run_matrix(session, args)
    summary = json.loads((REPORTS / "matrix.json").read_text())
    if summary["totals"]["bad_cells"]:
        session.error(f"{summary['totals']['bad_cells']} cell(s) failed or errored")


@nox.session(python=MATRIX.python[0], default=False)
def baseline(session: nox.Session) -> None:
    """Run the matrix (or take --from results) and record reports/baseline.json."""
    args = _matrix_args("baseline", session.posargs, gate=True)
    session.install(*HARNESS_REQS)
    if args.source is None:
        _run_matrix(session, args)
    source = args.source or REPORTS
    session.run(
        "python",
        "-m",
        "harness.gate",
        "baseline",
        "--from",
        str(source),
        "--out",
        str(REPORTS / "baseline.json"),
    )


@nox.session(python=MATRIX.python[0], default=False)
def gate(session: nox.Session) -> None:
    """Run the matrix with --candidate installed (or take --from results); compare with the
    baseline; fail on any regression or anything missing."""
    args = _matrix_args("gate", session.posargs, gate=True)
    session.install(*HARNESS_REQS)
    if args.source is None:
        _run_matrix(session, args, args.candidate)
    elif args.candidate:
        session.error("--candidate needs a matrix run; it cannot apply to --from results")
    session.run(
        "python",
        "-m",
        "harness.gate",
        "check",
        "--from",
        str(args.source or REPORTS),
        "--baseline",
        str(REPORTS / "baseline.json"),
        "--out",
        str(REPORTS),
        *[f"--tier={tier}" for tier in args.tier or ["core"]],
    )


@nox.session(python=MATRIX.python[0], default=False)
def report(session: nox.Session) -> None:
    """Merge reports/cells/* into reports/matrix.{json,md,html}."""
    session.install(*HARNESS_REQS)
    session.run("python", "-m", "harness.report", "--reports", str(REPORTS))


@nox.session(python=MATRIX.python[0])
def tests(session: nox.Session) -> None:
    """The README's test command: the suite on the default cell, then the harness's own tests."""
    cell = MATRIX.default()
    results = runner.run_cells(MATRIX, [cell], python=Path(session.bin) / "python", reports=REPORTS)
    session.log(summary_line(results[0]))
    session.install(*HARNESS_REQS)
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/harness",
        "--confcutdir=tests/harness",
        "-p",
        "no:cacheprovider",
        f"--junitxml={REPORTS / 'harness-junit.xml'}",
        *session.posargs,
    )
    if not results[0].ok:
        session.error(f"default cell {cell.id}: {results[0].status} — {results[0].reason}")


@nox.session(name="clean-envs", venv_backend="none", default=False)
def clean_envs(session: nox.Session) -> None:
    """Drop the matrix venvs under .nox (they are rebuilt from uv's cache in seconds).
    `-- --cache` also prunes uv's cache of entries no venv uses."""
    envdir = session.env_dir.parent
    for venv in sorted(envdir.glob("tests-*")):
        session.log(f"removing {venv}")
        shutil.rmtree(venv)
    if "--cache" in session.posargs:
        session.run(runner.uv_bin(), "cache", "prune", external=True)


@nox.session(python=MATRIX.python[0])
def lint(session: nox.Session) -> None:
    """ruff and mypy over the library, the harness, the noxfile and the benchmarks."""
    cell = MATRIX.default()
    session.install(
        *cell.requirements(),
        *HARNESS_REQS,
        "-r",
        "requirements/lint.txt",
        *[a for r in MATRIX.test_requirements for a in ("-r", r)],
    )
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "compat", "harness", "bench", "noxfile.py")
    session.run("mypy")
