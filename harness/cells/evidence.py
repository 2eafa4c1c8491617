"""What a cell's test run left behind, and the one verdict it supports.

The evidence of a test run is four things: pytest's exit status, the reportlog (``log.jsonl``,
pytest-reportlog: every test's reports and the session's end), ``junit.xml`` and the probe's
``probe.json``. The reportlog is the one source of each test's outcome (it sees reruns and uses
node ids); junit.xml is read only to cross-check its counts. :func:`classify` gives a status
only when the evidence tells one story, and names what disagrees otherwise. Standard library
only (it runs in the nox process).
"""

from __future__ import annotations

import fnmatch
import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cells.probe import BACKEND_ABSENT, TORCH_IMPORT_FAILED
from harness.cells.status import FAILING, OUTCOMES
from harness.matrix.procs import Ran, signal_name

PYTEST_STOPPED = {2: "interrupted", 3: "internal error", 4: "usage error"}  # pytest.ExitCode


def _message(longrepr: Any) -> str:
    if isinstance(longrepr, dict):
        crash = longrepr.get("reprcrash") or {}
        if crash.get("message"):
            return str(crash["message"])
        return str(longrepr.get("longrepr", ""))[:2000]
    if isinstance(longrepr, list) and len(longrepr) == 3:  # skip: (path, lineno, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")  # pytest.skip() adds the prefix
    return str(longrepr or "")[:2000]


@dataclass
class TestLog:
    """What a pytest-reportlog file says."""

    present: bool = False
    started: bool = False  # SessionStart seen
    exitstatus: int | None = None  # from SessionFinish; None: the session never finished
    finish_is_last: bool = True  # nothing was written after SessionFinish
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> final outcome
    reruns: dict[str, int] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)  # failing tests' messages
    skips: dict[str, str] = field(default_factory=dict)  # skipped tests' reasons
    unfinished: list[str] = field(default_factory=list)  # set up, never torn down
    trackers: dict[str, str] = field(default_factory=dict)  # upstream-bug tracker -> reason
    # properties the nightly's time budget stopped (tests/common/budget.py): nodeid -> what they ran
    budget_cuts: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.exitstatus is not None

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for state in self.outcomes.values():
            counts[state] += 1
        return counts

    def failures(self) -> list[dict[str, str]]:
        return [
            {"nodeid": n, "outcome": s, "message": self.messages.get(n, "")}
            for n, s in sorted(self.outcomes.items())
            if s in FAILING
        ]


BUDGET_PROPERTY = "hypothesis-budget"  # tests/common/budget.py's user property


def _budget_cut(props: Any) -> str:
    """'ran N of M examples in S s (budget B s)' from a test report's user properties, or ''.
    The record is the test process's output: anything malformed reads as no cut."""
    if not isinstance(props, list):
        return ""
    for pair in props:
        if isinstance(pair, list) and len(pair) == 2 and pair[0] == BUDGET_PROPERTY:
            try:
                cut = json.loads(pair[1])
                return (
                    f"ran {int(cut['ran'])} of {int(cut['asked'])} examples in"
                    f" {float(cut['seconds']):.0f} s (time budget {float(cut['budget']):.0f} s)"
                )
            except (TypeError, ValueError, KeyError):
                return ""
    return ""


def read_reportlog(path: Path) -> TestLog:
    log = TestLog()
    if not path.is_file():
        return log
    log.present = True
    final, messages = log.outcomes, log.messages
    open_tests: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        if not isinstance(rec, dict):
            continue
        kind = rec.get("$report_type")
        if log.finished and kind is not None:
            log.finish_is_last = False
        if kind == "SessionStart":
            log.started = True
        elif kind == "SessionFinish":
            status = rec.get("exitstatus")
            log.exitstatus = int(status) if isinstance(status, int) else -1
            log.finish_is_last = True
        if kind not in ("TestReport", "CollectReport"):
            continue
        outcome, when = rec.get("outcome"), rec.get("when")
        nodeid = str(rec.get("nodeid", ""))
        if kind == "CollectReport":
            if outcome == "failed":  # a module that does not import: an error of its own
                final[nodeid or "<collection>"] = "error"
                messages[nodeid or "<collection>"] = _message(rec.get("longrepr"))
            elif outcome == "skipped" and nodeid:  # a whole module skipped while collecting
                final[nodeid] = "skipped"
                log.skips[nodeid] = _message(rec.get("longrepr"))
            continue
        if when == "setup":
            open_tests[nodeid] = None
        elif when == "teardown":
            open_tests.pop(nodeid, None)
        if "tracker" in (rec.get("keywords") or {}) and when == "call":
            reason = str(rec.get("wasxfail") or _message(rec.get("longrepr")))
            # only a strict xfail that passed means "fixed upstream"; another failure is a
            # changed failure mode, reported as failed
            fixed = reason.startswith("[XPASS(strict)]")
            log.trackers[nodeid] = ("fixed: " if fixed else "") + reason.removeprefix(
                "[XPASS(strict)] "
            )
        if when == "call":
            cut = _budget_cut(rec.get("user_properties"))
            if cut:
                log.budget_cuts[nodeid] = cut
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
            if state in FAILING:
                messages.setdefault(nodeid, _message(rec.get("longrepr")))
            if state == "skipped" and outcome == "skipped":
                log.skips[nodeid] = _message(rec.get("longrepr"))
    log.unfinished = sorted(open_tests)
    return log


@dataclass(frozen=True)
class JUnitCounts:
    """Distinct test cases in a junit.xml (rerun and teardown duplicates collapsed)."""

    tests: int
    failing: int  # a failure or error in any of its entries
    skipped: int  # skipped (pytest's xfail is a skip there)


def read_junit(path: Path) -> JUnitCounts | str:
    """The counts, or why they cannot be read (missing, empty, not valid XML, not JUnit)."""
    if not path.is_file():
        return "no junit.xml"
    text = path.read_bytes()
    if not text.strip():
        return "junit.xml is empty"
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        return f"junit.xml is not valid XML ({exc})"
    if root.tag not in ("testsuites", "testsuite"):
        return f"junit.xml is not JUnit (root element <{root.tag}>)"
    cases: dict[tuple[str, str], set[str]] = {}
    for case in root.iter("testcase"):
        key = (case.get("classname") or "", case.get("name") or "")
        kinds = cases.setdefault(key, set())
        kinds.update(child.tag for child in case)
    return JUnitCounts(
        tests=len(cases),
        failing=sum(1 for kinds in cases.values() if kinds & {"failure", "error"}),
        skipped=sum(
            1 for kinds in cases.values() if "skipped" in kinds and not kinds & {"failure", "error"}
        ),
    )


def junit_disagreement(junit: JUnitCounts, log: TestLog) -> str | None:
    counts = log.counts()
    mine = JUnitCounts(
        tests=len(log.outcomes),
        failing=counts["failed"] + counts["error"],
        skipped=counts["skipped"] + counts["xfailed"],
    )
    if junit == mine:
        return None
    return (
        f"junit.xml lists {junit.tests} tests ({junit.failing} failing, {junit.skipped} skipped),"
        f" log.jsonl {mine.tests} ({mine.failing} failing, {mine.skipped} skipped)"
    )


def stale_patterns(xfails: Sequence[dict[str, Any]], log: TestLog) -> list[str]:
    """Expected-failure patterns of this cell that match no collected test."""
    collected = list(log.outcomes)
    out = []
    for entry in xfails:
        for pattern in entry["tests"]:
            if not any(fnmatch.fnmatchcase(nodeid, pattern) for nodeid in collected):
                where = f" ({entry['origin']})" if entry.get("origin") else ""
                out.append(f"{pattern}{where}")
    return out


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str = ""


def outcome_verdict(counts: dict[str, int], stale: Sequence[str] = ()) -> Verdict:
    """The status of a session that ran to its end, from its tests' outcomes: failed when a test
    failed or errored or an expected failure is stale, else passed."""
    stale_text = (
        f"stale expected failure: {', '.join(stale)} matches no collected test" if stale else ""
    )
    if counts["failed"] or counts["error"]:
        text = f"{counts['failed']} failed, {counts['error']} errors"
        return Verdict("failed", f"{text}; {stale_text}" if stale else text)
    return Verdict("failed", stale_text) if stale else Verdict("passed")


def classify(
    ran: Ran,
    facts: dict[str, Any] | None,
    log: TestLog,
    junit: JUnitCounts | str,
    *,
    timeout_s: int,
    stale: Sequence[str] = (),
    stop_signal: str | None = None,
    tampered: str | None = None,
) -> Verdict:
    """The status of a test run (the probe, then pytest in the same interpreter).

    ``tampered`` says how the cell's folder was destroyed during the run, if it was: then no
    file in it can be trusted, and the cell is inconsistent whatever else it says."""
    rc = ran.returncode
    if ran.interrupted:
        return Verdict("interrupted", f"the run was stopped ({stop_signal}) while this cell ran")
    if ran.timed_out:
        what = "tests" if log.started else "importing torch and starting pytest"
        return Verdict("timeout", f"{what} ran past the cell's {timeout_s} s")
    assert rc is not None
    if rc < 0:
        when = "" if log.started else " before pytest started"
        return Verdict("crashed", f"the interpreter died ({signal_name(rc)}){when}")
    if rc == TORCH_IMPORT_FAILED and facts is not None and facts.get("import_error"):
        return Verdict("install-error", f"torch does not import: {facts['import_error']}")
    if rc == BACKEND_ABSENT and facts is not None and facts.get("backend_ok") is False:
        return Verdict("skipped", "")  # the caller words the absence
    if tampered:
        return Verdict("inconsistent", f"inconsistent evidence: {tampered}")
    if not log.present:
        pytest_wrote = not isinstance(junit, str)
        if rc in PYTEST_STOPPED and facts is not None and not pytest_wrote:
            why = PYTEST_STOPPED[rc]
            return Verdict("error", f"pytest stopped itself (exit {rc}: {why}) before its session")
        if facts is None and not pytest_wrote:
            return Verdict("crashed", f"the interpreter exited {rc} before pytest started")
        return Verdict(
            "inconsistent", f"inconsistent evidence: pytest exited {rc} but log.jsonl is missing"
        )
    if not log.finished:
        return Verdict("crashed", f"the interpreter exited {rc} before pytest finished its session")
    problems = []
    if log.exitstatus != rc:
        problems.append(f"pytest exited {rc} but log.jsonl's SessionFinish says {log.exitstatus}")
    if not log.finish_is_last:
        problems.append("log.jsonl has records after its SessionFinish")
    if log.unfinished:
        problems.append(f"{log.unfinished[0]} started and never finished")
    if facts is None:
        problems.append("probe.json is missing although pytest ran")
    if isinstance(junit, str):
        problems.append(junit)
    else:
        problems += filter(None, [junit_disagreement(junit, log)])
    counts = log.counts()
    failing = counts["failed"] + counts["error"]
    if rc == 0 and failing:
        problems.append(f"pytest exited 0 with {failing} failing tests in log.jsonl")
    if rc == 1 and not failing:
        problems.append("pytest exited 1 with no failing test in log.jsonl")
    if rc == 5 and log.outcomes:
        problems.append(f"pytest exited 5 (no tests) but log.jsonl has {len(log.outcomes)}")
    if rc not in (0, 1, 5, *PYTEST_STOPPED):
        problems.append(f"exit status {rc} is not one pytest uses")
    if problems:
        return Verdict("inconsistent", "inconsistent evidence: " + "; ".join(problems))
    if rc in (0, 1):
        return outcome_verdict(counts, stale)
    if rc == 5:
        return Verdict("no-tests", "pytest collected no test")
    broken = sorted(n for n, o in log.outcomes.items() if o == "error" and "::" not in n)
    if rc == 2 and broken:  # pytest stops before running anything when a module is broken
        first = f"{broken[0]}: {log.messages.get(broken[0], '')}".strip().rstrip(":")
        return Verdict(
            "error", f"pytest stopped itself: {len(broken)} collection error(s), {first}"
        )
    return Verdict("error", f"pytest stopped itself (exit {rc}: {PYTEST_STOPPED[rc]})")
