# /// script
# dependencies = ["nox>=2025.2.9", "uv>=0.5"]
# ///
"""Sessions generated from matrix.toml; the logic lives in harness/ (tested on its own).

nox -l                        every session: the matrix cells and the tools
nox -s tests                  the README's test command: the default cell + harness tests
nox -s matrix                 the main job: every runnable core cell, then the report
nox -s matrix -- --tier extended --backend cpu
nox -s matrix -- --tier extended --prune   a disk that cannot hold every venv: new ones go after use
nox -s tests-torch2.5-cpu     torch 2.5 with every TorchAO version, in one venv
nox -s tests-torch2.5-ao0.7-cpu   one cell
nox -s tests-torch2.5-py3.12-cpu   the same on Python 3.12 (the default Python's names have none)
nox -t torch2.5 / -t cpu / -t ao0.7 / -t py3.12   pick by axis (tags)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.cells import group_run, options, run, verdict
from harness.cells.plan import plan_for
from harness.cells.record import CellResult, summary_line
from harness.matrix import interpreters, paths, selection, spec
from harness.matrix.procs import Held, Ran, Stop, run_logged
from harness.matrix.spec import Cell
from harness.report import new_releases

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]

# the matrix and where cells write: COMPAT_MATRIX_TOML / COMPAT_MATRIX_REPORTS point them at a
# throwaway project in the harness's own tests (its tests/ and requirements/ beside its toml)
MATRIX = spec.load(paths.matrix_path())
REPORTS = paths.reports_path()
# every session that makes a venv or runs cells needs the axis's Pythons on PATH first (the
# `pythons` session, run by nox before it): nothing is probed or linked when nox only lists
PYTHONS = ["pythons"]
HARNESS_REQS = ("-r", str(paths.ROOT / "requirements" / "harness.txt"))
# CI's cell jobs (`nox -s matrix -- --cell …`) get the gate's upstream candidates here, a JSON
# list (workflow inputs reach scripts only through env:), as do the group and cell sessions; the
# gate session takes them as --candidate
CANDIDATES_ENV = "COMPAT_MATRIX_CANDIDATES"
FAULT_ENVS = "COMPAT_MATRIX_FAULT_ENVS"  # where the harness tests keep their fault cells' venvs
HARNESS_TESTS_S = 1200  # the harness tests' own limit (.ci/stages' is the stage's): 260-280 s here


@nox.session(venv_backend="none", default=False)
def pythons(session: nox.Session) -> None:
    """The axis's Pythons, found where they are (pyenv's versions, $COMPAT_MATRIX_PYTHONS, uv)
    and linked as pythonX.Y first on PATH, for this nox run: nox and uv stop at a pyenv shim
    that fails. Every session that makes a venv or runs cells requires it."""
    found = interpreters.find(MATRIX.python, uv=shutil.which("uv"))
    folder = interpreters.expose(found, paths.ROOT / ".nox" / ".pythons")
    absent = [python for python, interpreter in found.items() if interpreter is None]
    session.log(f"Pythons linked in {folder}" + (f"; not found: {absent}" if absent else ""))


def _judge(session: nox.Session, results: Sequence[CellResult], stop: Stop) -> None:
    """Fail if the run was stopped or any cell went wrong; skip if no cell could run."""
    for result in results:
        session.log(summary_line(result))
    if stop.requested:
        session.error(f"stopped by {stop.signal}: the cells it cut short are marked interrupted")
    if results and all(r.status == "skipped" for r in results):
        session.skip(results[0].reason)
    bad = [r.id for r in results if not r.ok]
    if bad:
        session.error(f"{len(bad)} cell(s) did not pass: {', '.join(bad)}")


def _run_group(session: nox.Session, cells: list[Cell]) -> None:
    """Run cells in this session's venv (the per-group and per-cell sessions)."""
    candidates = json.loads(os.environ.get(CANDIDATES_ENV) or "[]")
    stop = Stop()
    with stop.on_signals():
        results = group_run.run_cells(
            MATRIX,
            cells,
            python=Path(session.bin) / "python",
            reports=REPORTS,
            candidates=candidates,
            stop=stop,
        )
    _judge(session, results, stop)


def _group_session(name: str, cells: list[Cell]) -> None:
    first = cells[0]
    # a downstream group's sessions are picked by -t downstream / -t ds<group>, not by the
    # axis tags of compat's own suite (-t torch2.5 / -t ao0.7 stay compat's cells)
    axis = f"ds{first.group}" if first.group else f"torch{first.torch.label}"

    @nox.session(
        name=name,
        python=first.python,
        tags=["matrix", first.tier, axis, first.backend.name, f"py{first.python}"],
        default=False,
        allow_parallel=True,  # one venv per group: groups never share files
        requires=PYTHONS,
    )
    def group(session: nox.Session) -> None:
        _run_group(session, cells)

    aos = ", ".join(c.torchao.pin for c in cells)
    group.__doc__ = f"torch {first.torch.pin} × TorchAO {aos} on {first.backend.name}"


def _newest(cells: Sequence[Cell]) -> Cell | None:
    """compat's own cpu cell, on the default Python, of the newest pinned torch with the newest
    pinned TorchAO paired with it: today's stack, which CI runs beside the core tier (`-t newest`).
    From matrix.toml, so a new [[torch]] or [[torchao]] entry moves it."""
    own = [c for c in cells if c.group is None and not c.named_python and c.backend.name == "cpu"]
    return selection.newest(own)


NEWEST = _newest(MATRIX.cells(tiers=spec.TIERS))


def _cell_session(cell: Cell) -> None:
    pair = f"torch{cell.torch.label}-ao{cell.torchao.label}"
    tags = [f"ao{cell.torchao.label}", pair, *(["newest"] if cell == NEWEST else [])]
    if cell.group:
        tags = [f"ds{cell.group}", f"{pair}-ds{cell.group}"]

    @nox.session(
        name=group_run.cell_name(cell),
        python=cell.python,
        tags=["cell", *tags, f"py{cell.python}"],
        default=False,
        requires=PYTHONS,
    )
    def one(session: nox.Session) -> None:
        _run_group(session, [cell])

    one.__doc__ = f"one cell: {' '.join(cell.requirements())} on {cell.backend.name}"


for _name, _cells in group_run.group_cells(MATRIX.cells(tiers=spec.TIERS)).items():
    _group_session(_name, _cells)
    for _cell in _cells:
        _cell_session(_cell)


def _run_matrix(
    session: nox.Session, args: argparse.Namespace, candidates: Sequence[str] = ()
) -> Stop:
    """Run the selection in this process (groups side by side, each in its venv), then render
    the report from the cells that should have run. SIGINT / SIGTERM stop the running cells,
    which are recorded as interrupted; the report is rendered all the same."""
    chosen = selection.select(
        MATRIX,
        args.tier or ["core"],
        args.backend or [],
        patterns=args.cell,
        downstream_extended=args.downstream_extended,
    )
    if not chosen.cells:
        session.error(f"no cell of tiers {args.tier or ['core']} matches --cell {args.cell}")
    stop = Stop()
    with stop.on_signals():
        run.run_matrix(
            MATRIX,
            chosen,
            envdir=session.env_dir.parent,  # nox's --envdir: the group venvs live beside it
            reports=REPORTS,
            uv=interpreters.uv_bin(),
            candidates=candidates,
            jobs=args.jobs,
            stop=stop,
            full=args.full,
            prune=args.prune,
            peer_suites=args.peer_suites,
        )
    if args.full:  # each verdict a blocked run would have carried, against the real runs
        session.run("python", "-m", "harness.cells.carry", "--reports", str(REPORTS))
    session.run("python", "-m", "harness.report.pages", "--reports", str(REPORTS))
    return stop


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def matrix(session: nox.Session) -> None:
    """The main job: every cell this runner can run (others skip), then the matrix report.
    Fails if any cell that should have run did not pass, or the run was stopped."""
    args = options.parse("matrix", session.posargs, MATRIX)
    session.install(*HARNESS_REQS)
    stop = _run_matrix(session, args, json.loads(os.environ.get(CANDIDATES_ENV) or "[]"))
    cells = verdict.judge(REPORTS, verdict.expected(REPORTS))
    if stop.requested:
        session.error(f"stopped by {stop.signal}: the cells it cut short are marked interrupted")
    for found in new_releases.seen(MATRIX, cells):
        session.log(new_releases.line(found))
    failed = verdict.bad(cells)
    early = [c for c in failed if c.get("tier") == "prerelease"]  # reported, never fatal
    bad = [c for c in failed if c.get("tier") != "prerelease"]
    if early:
        shown = ", ".join(f"{c['id']} ({c['status']})" for c in early)
        session.warn(f"prerelease cell(s) not green (reported, not fatal): {shown}")
    if bad:
        shown = ", ".join(f"{c['id']} ({c['status']})" for c in bad)
        session.error(f"{len(bad)} of {len(cells)} cell(s) failed or errored: {shown}")
    judged = len(cells) - len(early)
    aside = f" (the {len(early)} prerelease cell(s) above aside)" if early else ""
    session.log(f"all {judged} cells{aside} passed or were skipped for an absent backend")


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def baseline(session: nox.Session) -> None:
    """Run the matrix (or take --from results) and record reports/baseline.json."""
    args = options.parse("baseline", session.posargs, MATRIX, gate=True)
    session.install(*HARNESS_REQS)
    if args.source is None and _run_matrix(session, args).requested:
        session.error("stopped: no baseline recorded from an interrupted run")
    session.run(
        "python",
        "-m",
        "harness.ci.gate",
        "baseline",
        "--from",
        str(args.source or REPORTS),
        "--out",
        str(REPORTS / "baseline.json"),
        *options.expectation(args),
    )


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def gate(session: nox.Session) -> None:
    """Run the matrix with --candidate installed (or take --from results); compare with the
    baseline; fail on any regression, anything missing, fewer tests, or a skip that is not an
    absent backend."""
    args = options.parse("gate", session.posargs, MATRIX, gate=True)
    session.install(*HARNESS_REQS)
    if args.source is None:
        if _run_matrix(session, args, args.candidate).requested:
            session.error("stopped: the gate does not judge an interrupted run")
    elif args.candidate:
        session.error("--candidate needs a matrix run; it cannot apply to --from results")
    session.run(
        "python",
        "-m",
        "harness.ci.gate",
        "check",
        "--from",
        str(args.source or REPORTS),
        "--baseline",
        str(REPORTS / "baseline.json"),
        "--out",
        str(REPORTS),
        *options.expectation(args),
        *(["--history", *args.history] if args.history else []),
    )


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def report(session: nox.Session) -> None:
    """Merge reports/cells/* into reports/matrix.{json,md,html}."""
    session.install(*HARNESS_REQS)
    # `-- --history DIR [DIR...]`: earlier runs' report folders (harness/report/history.py)
    session.run("python", "-m", "harness.report.pages", "--reports", str(REPORTS), *session.posargs)


@nox.session(python=MATRIX.python[0], requires=PYTHONS)
def tests(session: nox.Session) -> None:
    """The README's test command: the suite on the default cell and, beside it, the harness's own
    tests (their output follows the cell's). The cell's venv is installed first: both read it."""
    cell = MATRIX.default()
    python = Path(session.bin) / "python"
    for cmd in plan_for(MATRIX, cell, python, uv=interpreters.uv_bin(), reports=REPORTS).install:
        session.run(*cmd, external=True, silent=True)
    session.install(*HARNESS_REQS)
    held, stop, harness = Held(sys.stdout), Stop(), list[Ran]()
    with stop.on_signals():
        beside = threading.Thread(
            target=lambda: harness.append(_harness_tests(session, held, stop)), daemon=True
        )
        beside.start()
        results = group_run.run_cells(MATRIX, [cell], python=python, reports=REPORTS, stop=stop)
        session.log(summary_line(results[0]))
        held.release()
        while beside.is_alive():  # polled: a signal's handler runs between the polls
            beside.join(0.5)
    if stop.requested:
        session.error(f"stopped by {stop.signal}")
    if not harness:  # the thread raised before the run: its traceback is above
        session.error("the harness tests did not start (the error is above)")
    if harness[0].returncode != 0:
        session.error(f"the harness tests failed ({_ended(harness[0])}; the output is above)")
    if not results[0].ok:
        session.error(f"default cell {cell.id}: {results[0].status} — {results[0].reason}")


def _harness_tests(session: nox.Session, echo: Held, stop: Stop) -> Ran:
    """pytest over tests/harness in the session's venv, whole files per worker: one worker more
    than the cores, since most of their time is fault cells that wait (hangs, signals, installs)
    or use one core; a file's fault runs keep their own venvs (tests/harness/conftest.py), kept
    in .nox/faults like nox's own venvs, warm for the next run."""
    workers = len(os.sched_getaffinity(0)) + 1
    env = {
        **os.environ,
        "PATH": os.pathsep.join([session.bin, os.environ.get("PATH", "")]),
        "VIRTUAL_ENV": str(session.virtualenv.location),
        FAULT_ENVS: str((session.env_dir.parent / "faults").absolute()),
    }
    cmd = [
        str(Path(session.bin) / "python"),
        *("-m", "pytest", "tests/harness", "-p", "no:cacheprovider"),
        f"--numprocesses={workers}",
        "--dist=loadfile",
        f"--junitxml={REPORTS / 'harness-junit.xml'}",
        *session.posargs,
    ]
    echo.write(f"nox > {' '.join(cmd[1:])}   (beside the default cell; its output follows)\n")
    log = REPORTS / "harness-tests.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    return run_logged(
        cmd, log, timeout_s=HARNESS_TESTS_S, cwd=paths.ROOT, env=env, echo=echo, stop=stop
    )


def _ended(ran: Ran) -> str:
    if ran.timed_out:
        return f"killed after {HARNESS_TESTS_S} s"
    if ran.interrupted or ran.returncode is None:
        return "stopped"
    return f"exit status {ran.returncode}"


@nox.session(name="bisect_nightly", venv_backend="none", default=False, requires=PYTHONS)
def bisect_nightly(session: nox.Session) -> None:
    """The nightly's bisect step: -- --matrix-json REPORT [--matrix-json REPORT ...]

    harness/ci/nightly_bisect.py: each red cell of a `latest` or prerelease resolution, bisected
    over each new release it installed from the highest pin; reports/nightly-bisect.{json,md}.
    Each cell's venv is made by uv under reports/nightly-bisect/venvs."""
    from harness.ci import nightly_bisect as nightly

    if nightly.main(["--reports", str(REPORTS), *session.posargs]) != 0:
        session.error("the nightly bisect refused (the reason is above)")


@nox.session(name="tests-installed", venv_backend="none", default=False, requires=PYTHONS)
def tests_installed(session: nox.Session) -> None:
    """A cell in an existing interpreter, installing nothing: -- --python PY [--backend cuda]

    harness/cells/installed.py (also --gpu-visible, --strict, --any-version, --timeout-s). The cell
    is named from what PY holds (installed-torch2.11-ao0.17-cuda) and joins reports/run.json."""
    from harness.cells import installed

    if installed.main(["--reports", str(REPORTS), *session.posargs]) != 0:
        session.error("the installed cell did not pass (the reason is above)")


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def dist(session: nox.Session) -> None:
    """Build compat's sdist and wheel once into dist/ and check them (files, metadata, twine
    check --strict): harness/dist/build.py, reports/dist.json."""
    session.install("-r", "requirements/dist.txt")
    session.run(
        "python", "-m", "harness.dist.build", "--uv", interpreters.uv_bin(),
        "--reports", str(REPORTS), *session.posargs,
    )  # fmt: skip


@nox.session(venv_backend="none", default=False, requires=PYTHONS)
def wheel(session: nox.Session) -> None:
    """compat's suite against the wheel in dist/, the tree unimportable: the oldest and newest
    pairs and the newest downstream cell, each in a fresh venv (harness/dist/wheel_cells.py;
    -- --cell ID, --backend NAME, --dist DIR, --list); reports/wheel.json."""
    from harness.dist import wheel_cells

    args = ["--reports", str(REPORTS), "--envdir", str(session.env_dir.parent)]
    if wheel_cells.main([*args, *session.posargs]) != 0:
        session.error("the wheel's cells did not all pass, or the input was refused (above)")


@nox.session(venv_backend="none", default=False, requires=PYTHONS)
def mutation(session: nox.Session) -> None:
    """Mutation testing of compat (mutation.toml): every module in the default cell but the
    TorchAO format's (the newest cell's), the version-branching ones also in the oldest core
    cell; reports/mutation.json and a table.
    -- --cell ID, --since REF [--sample N] (incremental), --jobs N (harness/mutation/runner.py)."""
    from harness.mutation import runner as mutation_run

    args = ["run", "--envdir", str(session.env_dir.parent), "--reports", str(REPORTS)]
    if mutation_run.main([*args, *session.posargs]) != 0:
        session.error("the mutation run failed or refused (the reason is above)")


@nox.session(name="gpu-wheels", venv_backend="none", default=False)
def gpu_wheels(session: nox.Session) -> None:
    """The wheels bench/gpu_check.sh carries to the GPU machine, into .wheels (needs an index)."""
    session.run(sys.executable, "bench/gpu_wheels.py", *session.posargs, external=True)


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def screenshot(session: nox.Session) -> None:
    """Check the last run's report in headless Chromium at 1400 px (no sideways scrolling) and
    take the README's screenshot from it: reports/screenshots/matrix.{png,json}."""
    session.install(*HARNESS_REQS)
    out = paths.DEFAULT_REPORTS / "screenshots"
    session.run(
        "python", "-m", "harness.report.screenshot", "--reports", str(REPORTS), "--out", str(out)
    )


@nox.session(name="clean-envs", venv_backend="none", default=False)
def clean_envs(session: nox.Session) -> None:
    """Drop the matrix venvs under .nox (they are rebuilt from uv's cache in seconds).
    `-- --cache` also prunes uv's cache of entries no venv uses."""
    envdir = session.env_dir.parent
    for venv in sorted(
        [*envdir.glob("tests-*"), *envdir.glob("matrix-tests-*"), envdir / "faults"]
    ):
        if not venv.exists():
            continue
        session.log(f"removing {venv}")
        shutil.rmtree(venv)
    if "--cache" in session.posargs:
        session.run(interpreters.uv_bin(), "cache", "prune", external=True)


@nox.session(python=MATRIX.python[0], requires=PYTHONS)
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
    # compat's floor is Python 3.10 (pyproject's requires-python): no standard-library name
    # newer than 3.10 there (ruff's per-file target checks the syntax)
    session.run("mypy", "--python-version", "3.10", "compat")


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def bisect(session: nox.Session) -> None:
    """Which release changed a cell's tests: -- --package P --from A --to B --test ID [--cell ID]

    harness/bisect/bisection.py (also -k EXPR, --pre, index options). This session's venv is the
    cell's: it gets the cell's pins, each probe on top, and the pins back at the end."""
    from harness.bisect import bisection

    python = Path(session.bin) / "python"
    args = ["--python", str(python), "--reports", str(REPORTS), *session.posargs]
    if bisection.main(args) != 0:
        session.error("bisect refused (the reason is above)")


@nox.session(python=MATRIX.python[0], default=False, requires=PYTHONS)
def docs(session: nox.Session) -> None:
    """The API reference from the docstrings (docs/api) into build/api: Sphinx with warnings as
    errors and every cross-reference resolved (nitpicky), every page read afresh (-E)."""
    session.install(*MATRIX.default().requirements(), "-r", "requirements/docs.txt")
    out = paths.ROOT / "build" / "api"
    args = ["-E", "-W", "--keep-going", "-n", "-b", "html", "docs/api", str(out)]
    session.run("sphinx-build", *args)
