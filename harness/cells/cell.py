"""Run one matrix cell and record what happened in ``cell.json``.

A cell is its plan (:mod:`harness.cells.plan`) carried out: install the pins into a venv
(:mod:`harness.cells.install`), probe what loaded, run the test suite with JUnit and reportlog
output (first with TorchAO blocked when the cell makes its set's carried verdicts), read the
evidence into the record (:mod:`harness.cells.evidence`) and write it. Every
way a cell can go wrong ends in a status (:mod:`harness.cells.status`), never in an exception that
would stop the matrix: the caller turns an exception of the harness itself into the cell's
``harness-error`` record (:func:`harness_error`). Standard library only: this module runs in the
nox process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.cells import evidence
from harness.cells.evidence import CellFiles, Reading
from harness.cells.install import RunCommand, install_cell
from harness.cells.plan import CellPlan
from harness.cells.record import CellResult
from harness.cells.status import FAILING, OK_STATUSES
from harness.matrix import backends, paths
from harness.matrix.procs import Echo, Ran, Stop, run_logged
from harness.matrix.spec import Cell

LOG_TAIL_LINES = 60
PEERS_ENV = "COMPAT_MATRIX_PEERS"  # tests/common/peers/check.py
BLOCKED_DIR = "independent"  # the source cell's sub-folder for the TorchAO-blocked run
DESELECT_FILE = "carried.txt"  # the node ids a cell leaves out because it carries them


def new_result(cell: Cell) -> CellResult:
    return CellResult(
        id=cell.id,
        tier=cell.tier,
        python=cell.python,
        torch=cell.torch.label,
        torchao=cell.torchao.label,
        backend=cell.backend.name,
        pins=cell.requirements(),
        group=cell.group,
    )


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def record(cell: Cell, status: str, reason: str, reports: Path, **extra: Any) -> CellResult:
    """A cell that ends without running (skipped, interrupted before it started, a harness
    error): its record, with any earlier result of the cell removed first."""
    outdir = paths.cell_dir(reports, cell.id)
    if outdir.is_dir():
        shutil.rmtree(outdir)
    result = new_result(cell)
    result.status, result.reason = status, reason
    for key, value in extra.items():
        setattr(result, key, value)
    result.write(outdir)
    return result


def harness_error(cell: Cell, exc: BaseException, reports: Path) -> CellResult:
    """The record of a cell for which the harness itself raised. Written where the cell's record
    goes (clearing what stands there); if even that fails, the result is still returned and the
    run's verdict shows the cell as having no record."""
    result = new_result(cell)
    result.status = "harness-error"
    result.reason = f"the harness failed for this cell: {type(exc).__name__}: {exc}"
    result.log_tail = tail("".join(traceback.format_exception(exc)))
    try:
        outdir = paths.cell_dir(reports, cell.id)
        if outdir.is_dir():
            shutil.rmtree(outdir, ignore_errors=True)
        result.write(outdir)
    except OSError as again:
        result.reason += f" (and its record could not be written: {again})"
    return result


# --- one cell ---------------------------------------------------------------------------


def _fresh(outdir: Path) -> None:
    if outdir.is_dir():
        shutil.rmtree(outdir)
    elif outdir.exists():
        outdir.unlink()
    outdir.mkdir(parents=True)


def _cell_files(plan: CellPlan, env: dict[str, str]) -> CellFiles:
    """Write cell-spec.json and point the test run's conftests at the cell's files."""
    cell, outdir = plan.cell, plan.outdir
    files = CellFiles.at(outdir)
    spec = {
        "id": cell.id,
        "torch": cell.torch.label,
        "torchao": cell.torchao.label,
        "backend": cell.backend.name,
        "python": cell.python,
        "downstream": cell.group,
        "xfails": plan.xfails,
    }
    files.spec.write_text(json.dumps(spec, indent=2))
    env["COMPAT_MATRIX_CELL"] = str(files.spec)
    env["COMPAT_MATRIX_DRIFT"] = str(outdir / "drift.json")  # tests/compat/conftest.py writes it
    env["COMPAT_MATRIX_SCENARIOS"] = str(files.scenarios)
    env[PEERS_ENV] = str(files.peers)
    return files


def run_cell(
    plan: CellPlan, *, echo: Echo | None = sys.stdout, stop: Stop | None = None
) -> CellResult:
    """Install, probe, test; write cell.json, junit.xml, log.jsonl and output.log in outdir."""
    cell, outdir = plan.cell, plan.outdir
    _fresh(outdir)
    log = outdir / "output.log"
    result = new_result(cell)
    result.candidates = list(plan.candidates)
    result.deselected = dict(plan.deselected)
    env = {**os.environ, **plan.env}
    # torch and TorchAO are thousands of modules: without cached bytecode every import of a
    # cell recompiles them (~2x slower). Let the venv keep its __pycache__.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    files = _cell_files(plan, env)
    start = time.monotonic()
    deadline = start + cell.timeout_s

    def finish(status: str, reason: str = "", output: str = "") -> CellResult:
        result.status, result.reason = status, reason
        result.duration_s = round(time.monotonic() - start, 2)
        if output and status not in OK_STATUSES:
            result.log_tail = tail(output)
        result.write(outdir)
        return result

    def run(cmd: list[str], env: dict[str, str], quiet: bool = False) -> Ran:
        return run_logged(
            cmd,
            log,
            timeout_s=deadline - time.monotonic(),
            env=env,
            echo=None if quiet else echo,
            cwd=plan.cwd,
            stop=stop,
        )

    reason = backends.host_lacks(cell.backend)
    if reason:
        return finish("skipped", reason)
    failed = install_cell(plan, run, env, result, stop)
    if failed is not None:
        return finish(*failed)
    result.hypothesis_profile = env.get("HYPOTHESIS_PROFILE") or "ci"  # tests/common/profiles.py
    role = plan.carry
    if role is not None and role.made is None and not role.refused:
        # the blocked run and the cell's own run share the cell's deadline: each test session's
        # time budget (tests/common/budget.py) counts both
        env[paths.SESSIONS_ENV] = "2"
        blocked = _blocked_run(plan, env, run, result)
        if blocked is not None:
            why = "the run was stopped" if blocked.interrupted else f"ran past {cell.timeout_s} s"
            status = "interrupted" if blocked.interrupted else "timeout"
            return finish(status, f"the TorchAO-blocked run {why}", blocked.output)
        if echo is not None:
            echo.write(_blocked_summary(plan, log) + "\n")
    status, why, output = _test_run(plan, files, run, env, result, stop=stop)
    return finish(status, why, output)


def _blocked_run(
    plan: CellPlan, env: dict[str, str], run: RunCommand, result: CellResult
) -> Ran | None:
    """The source cell's first run: the whole suite with TorchAO blocked, in the cell's
    ``independent/`` folder, read into the plan's role (what it established, or why carrying
    is refused: :func:`harness.cells.evidence.read_blocked`). Returns the run itself when it was
    stopped or ran out of time, else None. Its output goes to the cell's log only: the tests
    that reach TorchAO fail there by design, and a terminal that printed them would read red;
    :func:`_blocked_summary` says it in one line."""
    role, cell = plan.carry, plan.cell
    assert role is not None
    sub = plan.outdir / BLOCKED_DIR
    sub.mkdir()
    args = [a.replace(str(plan.outdir), str(sub)) for a in plan.pytest_args]
    probe = [str(plan.python), str(plan.probe_script), "--probe", cell.backend.torch_probe]
    probe += ["--block", role.axis, "--leaks", str(sub / "leaks.json")]
    blocked_env = {**env, "COMPAT_MATRIX_DRIFT": str(sub / "drift.json")}
    ran = run([*probe, "--out", str(sub / "probe.json"), "--", *args], blocked_env, True)
    result.timings["tests_blocked"] = round(ran.seconds, 2)
    if ran.interrupted or ran.timed_out:
        return ran
    evidence.read_blocked(role, cell.id, ran, sub, timeout_s=cell.timeout_s)
    return None


def _blocked_summary(plan: CellPlan, log: Path) -> str:
    """One line on what the TorchAO-blocked run found (its output is in ``log``)."""
    role = plan.carry
    assert role is not None
    where = f"its output is in {log}"
    if role.made is None:
        return f"[carry] {role.axis} blocked: carrying refused ({role.refused}); {where}"
    outcomes = role.made.log.outcomes
    failing = sorted(n for n, o in outcomes.items() if o in FAILING)
    line = (
        f"[carry] the suite with {role.axis} blocked: {len(outcomes)} tests never reach it and"
        f" are carried to this group's cells; {len(role.made.dependent)} reach it (their"
        f" failures under the block are expected) and run in each cell; {where}"
    )
    if failing:  # a real failure, carried to every cell: it reads as one
        shown = ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")
        line += f"\n[carry] FAILED, carried to every cell: {len(failing)} ({shown})"
    return line


def narrowed(
    pytest_args: Sequence[str], tests: Sequence[str], dependent: Sequence[str]
) -> list[str]:
    """A dependent run's arguments: the files that hold dependent tests in place of the
    cell's test paths, so that pytest imports and collects only those (the carried tests are
    deselected as well). Safe because a blocked run that reached TorchAO while collecting
    refuses carrying: the tests collected with TorchAO installed are the blocked run's, so
    no test outside these files is left uncollected. No dependent test: the arguments as
    they are (every test deselected)."""
    files = sorted({nodeid.split("::")[0] for nodeid in dependent})
    if not files:
        return list(pytest_args)
    return [*files, *(a for a in pytest_args if a not in tests)]


def _test_run(
    plan: CellPlan,
    files: CellFiles,
    run: RunCommand,
    env: dict[str, str],
    result: CellResult,
    *,
    stop: Stop | None,
) -> tuple[str, str, str]:
    """The probe and pytest in one interpreter, read and judged: (status, reason, output)."""
    cell, role = plan.cell, plan.carry
    # one interpreter per cell: the probe imports torch, records what loaded, then runs pytest
    probe = [str(plan.python), str(plan.probe_script), "--probe", cell.backend.torch_probe]
    pytest_args = plan.pytest_args
    carried = role.carried if role is not None else None
    if carried is not None:
        deselect = plan.outdir / DESELECT_FILE
        deselect.write_text("".join(f"{n}\n" for n in sorted(carried.log.outcomes)))
        probe += ["--deselect", str(deselect)]
        pytest_args = narrowed(pytest_args, plan.tests, carried.dependent)
    ran = run([*probe, "--out", str(files.facts), "--", *pytest_args], env)
    how = Reading(
        cell.backend, plan.xfails, cell.timeout_s, stop.signal if stop else None, role=role
    )
    verdict = evidence.read_test_run(ran, files, result, how)
    return verdict.status, verdict.reason, ran.output
