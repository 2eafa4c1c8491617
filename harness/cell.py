"""Run one matrix cell and classify what happened.

A cell is: install the pins into a venv, probe what loaded, run the test suite with JUnit and
reportlog output, and write ``cell.json``. Every way a cell can go wrong ends in a status, never
in an exception that would stop the matrix:

==============  ================================================================
passed          the suite ran to the end; no test failed or errored
failed          the suite ran to the end; some test failed, errored or XPASSed (strict)
error           pytest stopped on its own (usage error, internal error, nothing collected)
install-error   installing the pins failed, or torch does not import afterwards
crashed         the interpreter died (signal, abort) before pytest finished
timeout         the cell ran past its time limit and was killed
skipped         the runner lacks the cell's backend (the reason says what is missing)
==============  ================================================================

Standard library only: this module runs in the nox process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness.probe import BACKEND_ABSENT
from harness.spec import Backend, Cell, Matrix

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "probe.py"
OK_STATUSES = ("passed", "skipped")
BAD_STATUSES = ("failed", "error", "install-error", "crashed", "timeout")
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
LOG_TAIL_LINES = 60


@dataclass
class CellResult:
    id: str
    tier: str
    python: str
    torch: str
    torchao: str
    backend: str
    pins: list[str]
    status: str = "passed"
    reason: str = ""
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    duration_s: float = 0.0
    installed: dict[str, str | None] = field(default_factory=dict)
    torchao_cpp: bool | None = None
    failures: list[dict[str, str]] = field(default_factory=list)
    log_tail: str = ""
    candidates: list[str] = field(default_factory=list)  # upstream candidates installed last
    controls: dict[str, str] = field(default_factory=dict)  # negative control -> its outcome
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step
    # upstream-bug trackers: nodeid -> {"outcome", "reason"}; xfailed: the bug is still there
    trackers: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def write(self, outdir: Path) -> Path:
        path = outdir / "cell.json"
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        return path


def new_result(cell: Cell) -> CellResult:
    return CellResult(
        cell.id,
        cell.tier,
        cell.python,
        cell.torch.label,
        cell.torchao.label,
        cell.backend.name,
        cell.requirements(),
    )


# --- backend detection on the host (before anything is installed) -----------------------


def host_lacks(backend: Backend, platform: str = sys.platform) -> str | None:
    """Why this runner cannot have ``backend``, or None if it may (the torch probe decides)."""
    if backend.platforms and platform not in backend.platforms:
        return f"{backend.name} needs platform {'/'.join(backend.platforms)}, runner is {platform}"
    if backend.host_probe:
        shown = " ".join(backend.host_probe)
        try:
            done = subprocess.run(
                list(backend.host_probe),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"no {backend.name} on this runner: `{shown}` failed ({type(exc).__name__})"
        if done.returncode != 0:
            return f"no {backend.name} on this runner: `{shown}` exited {done.returncode}"
    return None


# --- running commands with a deadline ----------------------------------------------------


@dataclass
class Ran:
    returncode: int | None  # None: killed at the deadline
    output: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_logged(
    cmd: Sequence[str],
    log: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = sys.stdout,
    cwd: Path = ROOT,
) -> Ran:
    """Run ``cmd`` in its own process group, teeing output to ``log`` (appended) and ``echo``.

    At the deadline the whole group is killed (SIGTERM, then SIGKILL) and returncode is None.
    """
    start = time.monotonic()
    chunks: list[str] = []
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
            errors="replace",
        )

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                chunks.append(line)
                fh.write(line)
                if echo is not None:
                    echo.write(line)
                    echo.flush()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            returncode: int | None = proc.wait(timeout=max(timeout_s, 0.001))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            returncode = None
        reader.join(timeout=10)
        if returncode is None:
            fh.write(f"\n[harness] killed after {timeout_s:.0f} s\n")
    return Ran(returncode, "".join(chunks), time.monotonic() - start)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


# --- reading pytest's reportlog ---------------------------------------------------------


def _message(longrepr: Any) -> str:
    if isinstance(longrepr, dict):
        crash = longrepr.get("reprcrash") or {}
        if crash.get("message"):
            return str(crash["message"])
        return str(longrepr.get("longrepr", ""))[:2000]
    if isinstance(longrepr, list) and len(longrepr) == 3:  # skip: (path, lineno, reason)
        return str(longrepr[2])
    return str(longrepr or "")[:2000]


@dataclass
class TestLog:
    """What a pytest-reportlog file says: each test's final outcome, its reruns, its message."""

    outcomes: dict[str, str] = field(default_factory=dict)
    reruns: dict[str, int] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    finished: bool = False  # pytest reached SessionFinish
    trackers: dict[str, str] = field(default_factory=dict)  # upstream-bug tracker -> its reason


def read_reportlog(path: Path) -> TestLog:
    log = TestLog()
    if not path.exists():
        return log
    final, messages = log.outcomes, log.messages
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        kind = rec.get("$report_type")
        if kind == "SessionFinish":
            log.finished = True
        if kind not in ("TestReport", "CollectReport"):
            continue
        outcome, when = rec.get("outcome"), rec.get("when")
        nodeid = rec.get("nodeid", "")
        if kind == "CollectReport":
            if outcome == "failed":
                final[nodeid or "<collection>"] = "error"
                messages[nodeid or "<collection>"] = _message(rec.get("longrepr"))
            continue
        if "tracker" in (rec.get("keywords") or {}) and when == "call":
            reason = str(rec.get("wasxfail") or _message(rec.get("longrepr")))
            # only a strict xfail that passed means "fixed upstream"; another failure is a
            # changed failure mode, reported as failed
            fixed = reason.startswith("[XPASS(strict)]")
            log.trackers[nodeid] = ("fixed: " if fixed else "") + reason.removeprefix(
                "[XPASS(strict)] "
            )
        if outcome == "rerun":  # pytest-rerunfailures: this attempt failed, another follows
            log.reruns[nodeid] = log.reruns.get(nodeid, 0) + 1
            continue
        xfail = "wasxfail" in rec
        state = final.get(nodeid)
        if when == "setup":
            if outcome == "failed":
                state = "error"
            elif outcome == "skipped":
                state = "xfailed" if xfail else "skipped"
        elif when == "call":
            if outcome == "passed":
                state = "xpassed" if xfail else "passed"
            elif outcome == "failed":
                state = "failed"
            else:
                state = "xfailed" if xfail else "skipped"
        elif when == "teardown" and outcome == "failed":
            state = "error"
        if state is not None:
            final[nodeid] = state
            if state in ("failed", "error"):
                messages.setdefault(nodeid, _message(rec.get("longrepr")))
    return log


CONTROLS_PREFIX = "tests/controls/"


def control_outcomes(log: TestLog) -> dict[str, str]:
    """The naive variant of each negative control and how it ended (xfailed: it bit)."""
    return {
        nodeid.split("::")[-1].split("[")[0].removeprefix("test_"): outcome
        for nodeid, outcome in sorted(log.outcomes.items())
        if nodeid.startswith(CONTROLS_PREFIX) and nodeid.endswith("[naive]")
    }


def summarize(log: TestLog) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Final outcome counts and the failing tests."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for state in log.outcomes.values():
        counts[state] += 1
    failures = [
        {"nodeid": n, "outcome": s, "message": log.messages.get(n, "")}
        for n, s in sorted(log.outcomes.items())
        if s in ("failed", "error")
    ]
    return counts, failures


# --- one cell ---------------------------------------------------------------------------


@dataclass
class CellPlan:
    """Everything needed to run a cell, resolved by the caller (the noxfile or a test)."""

    cell: Cell
    python: Path  # the venv's interpreter
    outdir: Path
    install: list[list[str]]  # commands; empty when the venv is prepared by the caller
    pytest_args: list[str]
    xfails: list[dict[str, Any]]
    probe_script: Path = PROBE  # imports torch, writes probe.json, then runs pytest
    env: dict[str, str] = field(default_factory=dict)
    candidates: list[str] = field(default_factory=list)
    cwd: Path = ROOT  # the project the tests belong to: the folder of matrix.toml


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
    then, if any, the upstream candidates (taken verbatim: a requirement, a wheel path, a URL),
    installed after the pins so that they replace what the pins brought."""
    cmd = [uv, "pip", "install", "--python", str(python)]
    index = cell.backend.index_url(environ)
    if index:
        cmd += ["--index", index]  # uv prefers it over the default index for what it holds
    cmd += cell.requirements()
    for req in requirements:
        cmd += ["-r", str(req)]
    return [cmd, candidate_command(uv, python, candidates)] if candidates else [cmd]


def candidate_command(uv: str, python: Path, candidates: Sequence[str]) -> list[str]:
    """Install upstream candidates verbatim into the venv, over whatever the pins brought."""
    return [uv, "pip", "install", "--python", str(python), *candidates]


def cell_pytest_args(
    cell: Cell, outdir: Path, tests: Sequence[str] = ("tests",), reruns: int = 0
) -> list[str]:
    rerun_args = [f"--reruns={reruns}"] if reruns else []
    return [
        *tests,
        "--ignore=tests/harness",
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
) -> CellPlan:
    outdir = reports / "cells" / cell.id
    project = matrix.path.parent
    requirements = [str(project / r) for r in matrix.requirements_for(cell)]
    xfails = [
        x.as_record()
        for x in matrix.xfails_for(cell.torch.label, cell.torchao.label, cell.backend.name)
    ]
    return CellPlan(
        cell,
        python,
        outdir,
        install_commands(cell, python, uv=uv, requirements=requirements, candidates=candidates),
        cell_pytest_args(cell, outdir, reruns=matrix.reruns),
        xfails,
        env=dict(cell.backend.env),
        candidates=list(candidates),
        cwd=project,
    )


def run_cell(plan: CellPlan, *, echo: TextIO | None = sys.stdout) -> CellResult:
    """Install, probe, test; write cell.json, junit.xml, log.jsonl and output.log in outdir."""
    cell, outdir = plan.cell, plan.outdir
    if outdir.exists():
        shutil.rmtree(outdir)
    outdir.mkdir(parents=True)
    log = outdir / "output.log"
    result = new_result(cell)
    result.candidates = list(plan.candidates)
    start = time.monotonic()
    deadline = start + cell.timeout_s

    def finish(status: str, reason: str = "", output: str = "") -> CellResult:
        result.status, result.reason = status, reason
        result.duration_s = round(time.monotonic() - start, 2)
        if output:
            result.log_tail = tail(output)
        result.write(outdir)
        return result

    reason = host_lacks(cell.backend)
    if reason:
        return finish("skipped", reason)

    env = {**os.environ, **plan.env}
    # torch and TorchAO are thousands of modules: without cached bytecode every import of a
    # cell recompiles them (~2x slower). Let the venv keep its __pycache__.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for cmd in plan.install:
        ran = run_logged(
            cmd, log, timeout_s=deadline - time.monotonic(), env=env, echo=echo, cwd=plan.cwd
        )
        result.timings["install"] = round(result.timings.get("install", 0) + ran.seconds, 2)
        if ran.timed_out:
            return finish("timeout", f"install ran past {cell.timeout_s} s", ran.output)
        if ran.returncode != 0:
            return finish("install-error", f"install exited {ran.returncode}", ran.output)

    spec_file = outdir / "cell-spec.json"
    spec_file.write_text(
        json.dumps(
            {
                "id": cell.id,
                "torch": cell.torch.label,
                "torchao": cell.torchao.label,
                "backend": cell.backend.name,
                "python": cell.python,
                "xfails": plan.xfails,
            },
            indent=2,
        )
    )
    env["COMPAT_MATRIX_CELL"] = str(spec_file)
    env["COMPAT_MATRIX_DRIFT"] = str(outdir / "drift.json")  # tests/conftest.py writes it
    facts_file = outdir / "probe.json"
    # one interpreter per cell: the probe imports torch, records what loaded, then runs pytest
    ran = run_logged(
        [
            str(plan.python),
            str(plan.probe_script),
            "--probe",
            cell.backend.torch_probe,
            "--out",
            str(facts_file),
            "--",
            *plan.pytest_args,
        ],
        log,
        timeout_s=deadline - time.monotonic(),
        env=env,
        echo=echo,
        cwd=plan.cwd,
    )
    facts = json.loads(facts_file.read_text()) if facts_file.exists() else None
    if facts is not None:
        result.installed = facts["installed"]
        result.torchao_cpp = facts["torchao_cpp"]
        result.timings["import"] = facts.get("import_s", 0.0)
    if ran.timed_out and facts is None:
        return finish("timeout", "importing torch ran past the cell's time limit", ran.output)
    if facts is None:
        return finish("install-error", "torch does not import in the cell's venv", ran.output)
    if ran.returncode == BACKEND_ABSENT and not facts["backend_ok"]:
        why = facts["backend_error"] or f"`{cell.backend.torch_probe}` is false"
        return finish("skipped", f"no usable {cell.backend.name} in torch: {why}")
    result.timings["tests"] = round(ran.seconds, 2)
    test_log = read_reportlog(outdir / "log.jsonl")
    counts, failures = summarize(test_log)
    result.counts, result.failures = counts, failures
    result.controls = control_outcomes(test_log)
    result.trackers = {
        nodeid: (
            {"outcome": "fixed", "reason": reason.removeprefix("fixed: ")}
            if reason.startswith("fixed: ")
            else {"outcome": test_log.outcomes.get(nodeid, "absent"), "reason": reason}
        )
        for nodeid, reason in sorted(test_log.trackers.items())
    }
    if ran.timed_out:
        return finish("timeout", f"tests ran past the cell's {cell.timeout_s} s", ran.output)
    rc = ran.returncode
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else rc
        return finish("crashed", f"the interpreter died ({name})", ran.output)
    if rc in (0, 1) and not test_log.finished:
        return finish("crashed", f"pytest exited {rc} before finishing its session", ran.output)
    if rc == 0:
        return finish("passed")
    if rc == 1:
        return finish("failed", f"{counts['failed']} failed, {counts['error']} errors", ran.output)
    if rc == 5:
        return finish("error", "no tests were collected", ran.output)
    if rc in (2, 3, 4):
        return finish("error", f"pytest stopped itself (exit {rc})", ran.output)
    return finish("crashed", f"the interpreter exited {rc} without a pytest summary", ran.output)


def skipped_results(cells: Sequence[Cell], reason: str, reports: Path) -> list[CellResult]:
    """Record cells that will not run (backend absent) so the report shows a clean skip."""
    out = []
    for cell in cells:
        outdir = reports / "cells" / cell.id
        if outdir.exists():
            shutil.rmtree(outdir)
        outdir.mkdir(parents=True)
        result = new_result(cell)
        result.status, result.reason = "skipped", reason
        result.write(outdir)
        out.append(result)
    return out


def summary_line(result: CellResult) -> str:
    c = result.counts
    counts = ", ".join(f"{c[k]} {k}" for k in OUTCOMES if c.get(k))
    extra = f" — {result.reason}" if result.reason else ""
    done = f"{counts or 'no tests'}; {result.duration_s} s"
    return f"{result.id}: {result.status.upper()} ({done}){extra}"
