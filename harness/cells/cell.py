"""Run one matrix cell and record what happened in ``cell.json``.

A cell is: install the pins into a venv, probe what loaded, run the test suite with JUnit and
reportlog output, classify the evidence (:mod:`harness.cells.evidence`) and write the record. Every
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cells import carry, evidence
from harness.cells.install_errors import install_error_reason
from harness.cells.record import CellResult
from harness.cells.status import FAILING, OK_STATUSES, RAN_STATUSES, format_counts
from harness.matrix import backends, paths
from harness.matrix.procs import Echo, Ran, Stop, run_logged
from harness.matrix.spec import Cell, Matrix

PROBE = Path(__file__).resolve().parent / "probe.py"
LOG_TAIL_LINES = 60
PEERS_ENV, PEERS_FILE = "COMPAT_MATRIX_PEERS", "peers.json"  # tests/common/peers/check.py
UV_ENV = "COMPAT_MATRIX_UV"  # tests/common/peers/fetch.py


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


def install_step(plan: CellPlan, cmd: Sequence[str]) -> str:
    """Which install of the cell ``cmd`` is: ``"the candidates"`` when it installs the plan's
    upstream candidates (:func:`candidate_command`: they end it, verbatim), else
    ``"the pins"`` (the cell's pins and the test requirements)."""
    wanted = list(plan.candidates)
    if wanted and list(cmd[-len(wanted) :]) == wanted:
        return "the candidates"
    return "the pre-releases" if PRERELEASE_MODULE in cmd else "the pins"


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


# --- the plan of a cell ------------------------------------------------------------------


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
    carry: carry.Role | None = None  # its part in carrying verdicts (harness/cells/carry.py)
    tests: list[str] = field(default_factory=lambda: ["tests"])  # the paths pytest_args collect
    deselected: dict[str, str] = field(default_factory=dict)  # path -> why (CellResult's)


PRERELEASE_MODULE = "harness.matrix.prerelease"


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
) -> CellPlan:
    """The cell's plan; ``deselect``: test paths (node id prefixes) this run leaves out of the
    cell, each with why (pytest's ``--deselect``; the record says so)."""
    outdir = paths.cell_dir(reports, cell.id)
    requirements = [str(matrix.root / r) for r in matrix.requirements_for(cell)]
    found = matrix.xfails_for(
        cell.torch.label, cell.torchao.label, cell.backend.name, cell.group, cell.python
    )
    xfails = [x.as_record() for x in found]
    tests = matrix.test_paths(cell)
    deselected = dict(deselect or {})
    args = cell_pytest_args(cell, outdir, tests, matrix.reruns)
    # the uv the cell installs with, for tests that ask the index (tests/common/peers/fetch.py)
    env = {**dict(cell.backend.env), **({UV_ENV: uv} if uv else {})}
    return CellPlan(
        cell,
        python,
        outdir,
        install_commands(cell, python, uv=uv, requirements=requirements, candidates=candidates),
        [*args, *(f"--deselect={path}" for path in deselected)],
        xfails,
        env=env,
        candidates=list(candidates),
        cwd=matrix.root,
        tests=list(tests),
        deselected=deselected,
    )


# --- what the tests said ------------------------------------------------------------------

CONTROLS_PREFIX = "tests/compat/controls/"


def control_outcomes(log: evidence.TestLog) -> dict[str, str]:
    """The naive variant of each negative control and how it ended (xfailed: it bit)."""
    return {
        nodeid.split("::")[-1].split("[")[0].removeprefix("test_"): outcome
        for nodeid, outcome in sorted(log.outcomes.items())
        if nodeid.startswith(CONTROLS_PREFIX) and nodeid.endswith("[naive]")
    }


def tracker_outcomes(log: evidence.TestLog) -> dict[str, dict[str, str]]:
    """Each upstream-bug tracker: fixed (a strict XPASS), else its final outcome."""
    return {
        nodeid: (
            {"outcome": "fixed", "reason": reason.removeprefix("fixed: ")}
            if reason.startswith("fixed: ")
            else {"outcome": log.outcomes.get(nodeid, "absent"), "reason": reason}
        )
        for nodeid, reason in sorted(log.trackers.items())
    }


def scenario_outcomes(path: Path, log: evidence.TestLog) -> dict[str, dict[str, str]]:
    """The downstream scenarios the tests named (``scenarios.json``), each with its outcome from
    the reportlog (``absent`` if it never reported); empty when the file is missing or bad."""
    try:
        named = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(named, dict):
        return {}
    out: dict[str, dict[str, str]] = {}
    for nodeid, about in sorted(named.items()):
        if not isinstance(about, dict):
            continue
        entry = {k: str(about.get(k, "")) for k in ("library", "scenario", "route", "link")}
        entry["outcome"] = log.outcomes.get(nodeid, "absent")
        out[str(nodeid)] = entry
    return out


def peer_suites(path: Path) -> dict[str, dict[str, Any]]:
    """The peer suites' verdicts the tests wrote (``peers.json``: suite -> its entry, see
    tests/common/peers/check.py); the entries that are JSON objects, none if the file is
    missing or bad."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in sorted(found.items()) if isinstance(v, dict)}


def _take_tests(result: CellResult, log: evidence.TestLog) -> None:
    result.counts, result.failures = log.counts(), log.failures()
    result.tests = dict(sorted(log.outcomes.items()))
    result.skips = dict(sorted(log.skips.items()))
    result.reruns = dict(sorted(log.reruns.items()))
    result.controls = control_outcomes(log)
    result.trackers = tracker_outcomes(log)
    result.budget_cuts = dict(sorted(log.budget_cuts.items()))


def _read_facts(path: Path) -> dict[str, Any] | None:
    try:
        facts = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) else None


# --- one cell ---------------------------------------------------------------------------


RunCommand = Callable[..., Ran]  # (cmd, env, quiet=False): one command under the cell's deadline


@dataclass(frozen=True)
class _CellFiles:
    """The files a cell's test run writes beside its results (the conftests are told by env)."""

    spec: Path  # cell-spec.json: the cell's axes and expected failures
    scenarios: Path  # tests/downstream/conftest.py writes it
    peers: Path  # tests/downstream/test_peer_suites.py writes it
    facts: Path  # probe.json: what the probe found installed and loaded


def _fresh(outdir: Path) -> None:
    if outdir.is_dir():
        shutil.rmtree(outdir)
    elif outdir.exists():
        outdir.unlink()
    outdir.mkdir(parents=True)


def _install(
    plan: CellPlan, run: RunCommand, env: dict[str, str], result: CellResult, stop: Stop | None
) -> tuple[str, str, str] | None:
    """Run the install commands; (status, reason, output) of the first that fails, else None."""
    for cmd in plan.install:
        ran = run(cmd, env)
        result.timings["install"] = round(result.timings.get("install", 0) + ran.seconds, 2)
        if ran.interrupted:
            why = f"the run was stopped ({stop.signal if stop else '?'}) while this cell installed"
            return "interrupted", why, ran.output
        if ran.timed_out:
            return "timeout", f"install ran past {plan.cell.timeout_s} s", ran.output
        if ran.returncode != 0:
            why = install_error_reason(install_step(plan, cmd), ran.returncode, ran.output)
            return "install-error", why, ran.output
    return None


def _cell_files(plan: CellPlan, env: dict[str, str], result: CellResult) -> _CellFiles:
    """Write cell-spec.json and point the test run's conftests at the cell's files."""
    cell, outdir = plan.cell, plan.outdir
    files = _CellFiles(
        spec=outdir / "cell-spec.json",
        scenarios=outdir / "scenarios.json",
        peers=outdir / PEERS_FILE,
        facts=outdir / "probe.json",
    )
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
    result.hypothesis_profile = env.get("HYPOTHESIS_PROFILE") or "ci"  # tests/common/profiles.py
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
    env = {**os.environ, **plan.env}
    # torch and TorchAO are thousands of modules: without cached bytecode every import of a
    # cell recompiles them (~2x slower). Let the venv keep its __pycache__.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    failed = _install(plan, run, env, result, stop)
    if failed is not None:
        return finish(*failed)
    files = _cell_files(plan, env, result)
    role = plan.carry
    source = role.source if role else None
    if role is not None and source is None and not role.refused:
        # the blocked run and the cell's own run share the cell's deadline: each test session's
        # time budget (tests/common/budget.py) counts both
        env[paths.SESSIONS_ENV] = "2"
        blocked = _blocked_run(plan, env, run, result)
        if echo is not None and not isinstance(blocked, Ran):
            echo.write(_blocked_summary(plan, log) + "\n")
        if isinstance(blocked, Ran):
            why = "the run was stopped" if blocked.interrupted else f"ran past {cell.timeout_s} s"
            status = "interrupted" if blocked.interrupted else "timeout"
            return finish(status, f"the TorchAO-blocked run {why}", blocked.output)
        source = blocked
    status, why, output = _test_run(plan, files, run, env, result, source=source, stop=stop)
    return finish(status, why, output)


def _test_run(
    plan: CellPlan,
    files: _CellFiles,
    run: RunCommand,
    env: dict[str, str],
    result: CellResult,
    *,
    source: carry.Source | None,
    stop: Stop | None,
) -> tuple[str, str, str]:
    """The probe and pytest in one interpreter, judged: (status, reason, output)."""
    cell, outdir, role = plan.cell, plan.outdir, plan.carry
    # one interpreter per cell: the probe imports torch, records what loaded, then runs pytest
    probe = [str(plan.python), str(plan.probe_script), "--probe", cell.backend.torch_probe]
    carried = evidence.TestLog()
    pytest_args = plan.pytest_args
    if role is not None and source is not None and not role.full:
        independent = sorted(source.log.outcomes)
        (outdir / carry.DESELECT_FILE).write_text("".join(f"{n}\n" for n in independent))
        probe += ["--deselect", str(outdir / carry.DESELECT_FILE)]
        carried = source.log
        pytest_args = carry.narrowed(pytest_args, plan.tests, source.dependent)
    ran = run([*probe, "--out", str(files.facts), "--", *pytest_args], env)
    result.exit_status = ran.returncode
    facts = _read_facts(files.facts)
    if facts is not None:
        result.installed = facts.get("installed", {})
        result.torchao_cpp = facts.get("torchao_cpp")
        result.timings["import"] = facts.get("import_s", 0.0)
    result.timings["tests"] = round(ran.seconds, 2)
    tampered = None
    if not outdir.is_dir():
        tampered = "the cell's reports folder was replaced by a file during the run"
    elif not files.spec.is_file():
        tampered = "the cell's reports folder was deleted during the run"
    own_log = evidence.read_reportlog(outdir / "log.jsonl")
    test_log = carry.merge(own_log, carried)
    _take_tests(result, test_log)
    result.scenarios = scenario_outcomes(files.scenarios, test_log)
    result.peers = peer_suites(files.peers)
    stale = evidence.stale_patterns(plan.xfails, test_log) if own_log.finished else []
    verdict = evidence.classify(
        ran,
        facts,
        own_log,
        evidence.read_junit(outdir / "junit.xml"),
        timeout_s=cell.timeout_s,
        stale=stale,
        stop_signal=stop.signal if stop else None,
        tampered=tampered,
    )
    if verdict.status == "skipped" and facts is not None:
        return "skipped", backends.torch_lacks(cell.backend, facts.get("backend_error")), ""
    if role is not None:
        verdict = _carry_record(
            role, source, result, carried=carried, verdict=verdict, merged=test_log, stale=stale
        )
        if source is not None and outdir.is_dir():
            carry.write_drift(outdir / "drift.json", source.drift)
    return verdict.status, verdict.reason, ran.output


def _blocked_run(
    plan: CellPlan,
    env: dict[str, str],
    run: RunCommand,
    result: CellResult,
) -> carry.Source | Ran | None:
    """The source cell's first run: the whole suite with TorchAO blocked, in the cell's
    ``independent/`` folder. Returns what it established, ``None`` when carrying is refused
    (the role says why), or the run itself when it was stopped or ran out of time. Its output
    goes to the cell's log only: the tests that reach TorchAO fail there by design, and a
    terminal that printed them would read red; :func:`_blocked_summary` says it in one line."""
    role: carry.Role | None = plan.carry
    cell = plan.cell
    assert role is not None
    sub = plan.outdir / carry.BLOCKED_DIR
    sub.mkdir()
    args = [a.replace(str(plan.outdir), str(sub)) for a in plan.pytest_args]
    probe = [str(plan.python), str(plan.probe_script), "--probe", cell.backend.torch_probe]
    probe += ["--block", role.axis, "--leaks", str(sub / "leaks.json")]
    blocked_env = {**env, "COMPAT_MATRIX_DRIFT": str(sub / "drift.json")}
    ran = run([*probe, "--out", str(sub / "probe.json"), "--", *args], blocked_env, True)
    result.timings["tests_blocked"] = round(ran.seconds, 2)
    if ran.interrupted or ran.timed_out:
        return ran
    log = evidence.read_reportlog(sub / "log.jsonl")
    verdict = evidence.classify(
        ran,
        _read_facts(sub / "probe.json"),
        log,
        evidence.read_junit(sub / "junit.xml"),
        timeout_s=cell.timeout_s,
    )
    leaks = carry.read_leaks(sub / "leaks.json")
    if verdict.status not in RAN_STATUSES:
        role.refused = f"the run with {role.axis} blocked ended {verdict.status}: {verdict.reason}"
    elif leaks is None:
        role.refused = f"the run with {role.axis} blocked left no readable leaks.json"
    else:
        dependent, role.refused = carry.classify_tests(log, leaks, role.varying)
        if not role.refused:
            independent = set(log.outcomes) - set(dependent)
            role.made = carry.Source(
                cell.id,
                carry.keep(log, independent),
                tuple(dependent),
                carry.read_drift(sub / "drift.json"),
            )
    return role.made


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


def _carry_record(
    role: carry.Role,
    source: carry.Source | None,
    result: CellResult,
    *,
    carried: evidence.TestLog,
    verdict: evidence.Verdict,
    merged: evidence.TestLog,
    stale: Sequence[str],
) -> evidence.Verdict:
    """Record the cell's part in carrying and its verdict on all its tests."""
    if source is None:
        result.carry = {"axis": role.axis, "refused": role.refused}
        return verdict
    if role.full:  # every test ran here: record what would have been carried (carry.check)
        result.carry = {
            "axis": role.axis,
            "source": source.cell,
            "independent": dict(sorted(source.log.outcomes.items())),
        }
        return verdict
    mine = source.cell == result.id
    if not mine:
        result.carried = {n: source.cell for n in sorted(carried.outcomes)}
    result.carry = {
        "axis": role.axis,
        "source": source.cell,
        "run": len(merged.outcomes) - len(result.carried),
        "carried": len(result.carried),
    }
    return carry.judge(verdict, merged, stale, asked_for_none=not source.dependent)


def summary_line(result: CellResult) -> str:
    extra = f" — {result.reason}" if result.reason else ""
    done = f"{format_counts(result.counts)}; {result.duration_s} s"
    return f"{result.id}: {result.status.upper()} ({done}){extra}"
