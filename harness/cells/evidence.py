"""What a cell's test run left behind, the one verdict it supports, and the record it makes.

The evidence of a test run is four things: pytest's exit status, the reportlog (``log.jsonl``,
pytest-reportlog: every test's reports and the session's end), ``junit.xml`` and the probe's
``probe.json``. The reportlog is the one source of each test's outcome (it sees reruns and uses
node ids); junit.xml is read only to cross-check its counts. :func:`classify` gives a status
only when the evidence tells one story, and names what disagrees otherwise.
:func:`read_test_run` reads a cell's run into its record; :func:`read_blocked` is the reading
half of carrying (:mod:`harness.cells.carry`): what a TorchAO-blocked run establishes for the
cells it stands for. Standard library only (it runs in the nox process).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cells.probe import BACKEND_ABSENT, TORCH_IMPORT_FAILED
from harness.cells.record import CellResult
from harness.cells.status import FAILING, OUTCOMES, RAN_STATUSES
from harness.matrix.backends import torch_lacks
from harness.matrix.procs import Ran, signal_name
from harness.matrix.spec import Backend

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


# --- carrying, as read --------------------------------------------------------------------

BLOCK_MARK = "is blocked in this run"  # in harness/cells/probe.py's Blocked message


@dataclass(frozen=True)
class Source:
    """What the blocked run of a set's first cell established."""

    cell: str  # its id
    log: TestLog  # the blocked run's evidence, kept to the independent tests
    dependent: tuple[str, ...]  # node ids every cell runs itself
    drift: Mapping[str, Any]  # the independent tests' drift observations


@dataclass
class Role:
    """The part in carrying of one set of cells (those that differ only in TorchAO), shared by
    its cells as they run (:func:`harness.cells.plan.carry_roles` makes it): the first cell to
    run makes ``made`` (its blocked run comes first, :func:`read_blocked`) or says why carrying
    is ``refused``; the others carry from ``made``. ``full``: every test runs in every cell,
    and the first cell records what would have been carried."""

    axis: str
    varying: tuple[str, ...]  # expected-failure patterns that differ across the set
    full: bool = False
    made: Source | None = None  # set by the source cell once its blocked run is judged
    refused: str = ""  # why carrying is off for the set, set by the source cell

    @property
    def carried(self) -> Source | None:
        """What a cell of the set carries verdicts from: ``made``, except in a full run (every
        test runs in every cell, nothing is carried)."""
        return None if self.full else self.made


def read_leaks(path: Path) -> list[dict[str, str]] | None:
    """The blocked run's record of who reached the blocked distribution; None if unreadable."""
    try:
        doc = json.loads(path.read_text())
        leaks = doc["leaks"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(leaks, list) or not all(isinstance(x, dict) for x in leaks):
        return None
    return [{"test": str(x.get("test", "")), "what": str(x.get("what", ""))} for x in leaks]


def classify_tests(
    log: TestLog, leaks: Sequence[Mapping[str, str]], varying: Sequence[str]
) -> tuple[list[str], str]:
    """(the dependent node ids, why carrying is refused or ``""``) from a blocked run."""
    outside = [x["what"] for x in leaks if not x["test"]]
    if outside:
        return [], f"TorchAO was reached outside any test ({outside[0]}): no test can be carried"
    broken = sorted(n for n, o in log.outcomes.items() if "::" not in n)
    if broken:
        return [], f"the TorchAO-blocked run did not collect {broken[0]}: no test can be carried"
    marked = {n for n, text in [*log.messages.items(), *log.skips.items()] if BLOCK_MARK in text}
    dependent = {x["test"] for x in leaks} | marked
    dependent |= {n for n in log.outcomes if any(fnmatch.fnmatchcase(n, p) for p in varying)}
    return sorted(dependent), ""


def keep(log: TestLog, nodeids: set[str]) -> TestLog:
    """``log`` with only the given tests (the session's own facts kept)."""

    def only(d: Mapping[str, Any]) -> dict[str, Any]:
        return {n: v for n, v in d.items() if n in nodeids}

    return dataclasses.replace(
        log,
        outcomes=only(log.outcomes),
        reruns=only(log.reruns),
        messages=only(log.messages),
        skips=only(log.skips),
        unfinished=[n for n in log.unfinished if n in nodeids],
        trackers=only(log.trackers),
        budget_cuts=only(log.budget_cuts),
    )


def merge(run: TestLog, carried: TestLog) -> TestLog:
    """One log of a cell's tests: those it ran and those carried (a test it ran wins); the
    session's own facts are the run's."""
    return dataclasses.replace(
        run,
        outcomes={**carried.outcomes, **run.outcomes},
        reruns={**carried.reruns, **run.reruns},
        messages={**carried.messages, **run.messages},
        skips={**carried.skips, **run.skips},
        trackers={**carried.trackers, **run.trackers},
        budget_cuts={**carried.budget_cuts, **run.budget_cuts},
    )


def judge(
    verdict: Verdict, merged: TestLog, stale: Sequence[str], *, asked_for_none: bool = False
) -> Verdict:
    """The cell's status from its run's verdict and all its tests, carried ones included: a
    run that ended cleanly (passed or failed; no tests when every test was carried) is judged
    again on the merged outcomes."""
    clean = (*RAN_STATUSES, "no-tests") if asked_for_none else RAN_STATUSES
    if verdict.status not in clean:
        return verdict
    return outcome_verdict(merged.counts(), stale)


def read_object(path: Path) -> dict[str, Any] | None:
    """A JSON object a run wrote (probe.json, drift.json, scenarios.json, peers.json); None if
    the file is missing, unreadable or not a JSON object."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_drift(path: Path, carried: Mapping[str, Any]) -> None:
    """The cell's drift.json: the carried observations, then its own (which win)."""
    own = read_object(path) or {}
    merged = {**carried, **own}
    if merged:
        path.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")


def read_blocked(role: Role, cell: str, ran: Ran, sub: Path, *, timeout_s: int) -> None:
    """Judge the blocked run of ``cell`` (its files in ``sub``): ``role.made`` is what it
    established, or ``role.refused`` says why nothing can be carried."""
    log = read_reportlog(sub / "log.jsonl")
    verdict = classify(
        ran,
        read_object(sub / "probe.json"),
        log,
        read_junit(sub / "junit.xml"),
        timeout_s=timeout_s,
    )
    leaks = read_leaks(sub / "leaks.json")
    if verdict.status not in RAN_STATUSES:
        role.refused = f"the run with {role.axis} blocked ended {verdict.status}: {verdict.reason}"
    elif leaks is None:
        role.refused = f"the run with {role.axis} blocked left no readable leaks.json"
    else:
        dependent, role.refused = classify_tests(log, leaks, role.varying)
        if not role.refused:
            independent = set(log.outcomes) - set(dependent)
            role.made = Source(
                cell,
                keep(log, independent),
                tuple(dependent),
                read_object(sub / "drift.json") or {},
            )


# --- the record of a cell's run ------------------------------------------------------------

PEERS_FILE = "peers.json"  # tests/common/peers/check.py writes it
CONTROLS_PREFIX = "tests/compat/controls/"


@dataclass(frozen=True)
class CellFiles:
    """The files a cell's test run writes beside its results (the conftests are told by env)."""

    outdir: Path
    spec: Path  # cell-spec.json: the cell's axes and expected failures
    scenarios: Path  # tests/downstream/conftest.py writes it
    peers: Path  # tests/downstream/test_peer_suites.py writes it
    facts: Path  # probe.json: what the probe found installed and loaded

    @classmethod
    def at(cls, outdir: Path) -> CellFiles:
        return cls(
            outdir,
            spec=outdir / "cell-spec.json",
            scenarios=outdir / "scenarios.json",
            peers=outdir / PEERS_FILE,
            facts=outdir / "probe.json",
        )


def control_outcomes(log: TestLog) -> dict[str, str]:
    """The naive variant of each negative control and how it ended (xfailed: it bit)."""
    return {
        nodeid.split("::")[-1].split("[")[0].removeprefix("test_"): outcome
        for nodeid, outcome in sorted(log.outcomes.items())
        if nodeid.startswith(CONTROLS_PREFIX) and nodeid.endswith("[naive]")
    }


def tracker_outcomes(log: TestLog) -> dict[str, dict[str, str]]:
    """Each upstream-bug tracker: fixed (a strict XPASS), else its final outcome."""
    return {
        nodeid: (
            {"outcome": "fixed", "reason": reason.removeprefix("fixed: ")}
            if reason.startswith("fixed: ")
            else {"outcome": log.outcomes.get(nodeid, "absent"), "reason": reason}
        )
        for nodeid, reason in sorted(log.trackers.items())
    }


def scenario_outcomes(path: Path, log: TestLog) -> dict[str, dict[str, str]]:
    """The downstream scenarios the tests named (``scenarios.json``), each with its outcome from
    the reportlog (``absent`` if it never reported); empty when the file is missing or bad."""
    named = read_object(path) or {}
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
    found = read_object(path) or {}
    return {str(k): v for k, v in sorted(found.items()) if isinstance(v, dict)}


def take_tests(result: CellResult, log: TestLog, files: CellFiles) -> None:
    """Every test's outcome and what the tests wrote beside them, into the record."""
    result.counts, result.failures = log.counts(), log.failures()
    result.tests = dict(sorted(log.outcomes.items()))
    result.skips = dict(sorted(log.skips.items()))
    result.reruns = dict(sorted(log.reruns.items()))
    result.controls = control_outcomes(log)
    result.trackers = tracker_outcomes(log)
    result.budget_cuts = dict(sorted(log.budget_cuts.items()))
    result.scenarios = scenario_outcomes(files.scenarios, log)
    result.peers = peer_suites(files.peers)


def take_facts(result: CellResult, ran: Ran, facts: dict[str, Any] | None) -> None:
    result.exit_status = ran.returncode
    if facts is not None:
        result.installed = facts.get("installed", {})
        result.torchao_cpp = facts.get("torchao_cpp")
        result.timings["import"] = facts.get("import_s", 0.0)
    result.timings["tests"] = round(ran.seconds, 2)


def tampering(files: CellFiles) -> str | None:
    """How the cell's folder was destroyed during the run, if it was."""
    if not files.outdir.is_dir():
        return "the cell's reports folder was replaced by a file during the run"
    if not files.spec.is_file():
        return "the cell's reports folder was deleted during the run"
    return None


def carry_record(
    role: Role,
    source: Source | None,
    result: CellResult,
    *,
    verdict: Verdict,
    merged: TestLog,
    stale: Sequence[str],
) -> Verdict:
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
    if source.cell != result.id:
        result.carried = {n: source.cell for n in sorted(source.log.outcomes)}
    result.carry = {
        "axis": role.axis,
        "source": source.cell,
        "run": len(merged.outcomes) - len(result.carried),
        "carried": len(result.carried),
    }
    return judge(verdict, merged, stale, asked_for_none=not source.dependent)


@dataclass(frozen=True)
class Reading:
    """What reading a cell's test run needs beside its files: the cell's backend, expected
    failures and deadline, the signal that stopped the run if one did, and its part in
    carrying (read once the blocked run, if any, is judged)."""

    backend: Backend
    xfails: Sequence[dict[str, Any]]
    timeout_s: int
    stop_signal: str | None = None
    role: Role | None = None


def read_test_run(ran: Ran, files: CellFiles, result: CellResult, how: Reading) -> Verdict:
    """Read a cell's test run (the probe, then pytest) into ``result``, carried tests included,
    and judge it."""
    facts = read_object(files.facts)
    take_facts(result, ran, facts)
    own_log = read_reportlog(files.outdir / "log.jsonl")
    carried = how.role.carried if how.role is not None else None
    test_log = merge(own_log, carried.log if carried is not None else TestLog())
    take_tests(result, test_log, files)
    stale = stale_patterns(how.xfails, test_log) if own_log.finished else []
    verdict = classify(
        ran,
        facts,
        own_log,
        read_junit(files.outdir / "junit.xml"),
        timeout_s=how.timeout_s,
        stale=stale,
        stop_signal=how.stop_signal,
        tampered=tampering(files),
    )
    if verdict.status == "skipped" and facts is not None:
        return Verdict("skipped", torch_lacks(how.backend, facts.get("backend_error")))
    if how.role is not None:
        source = how.role.made
        verdict = carry_record(
            how.role, source, result, verdict=verdict, merged=test_log, stale=stale
        )
        if source is not None and files.outdir.is_dir():
            write_drift(files.outdir / "drift.json", source.drift)
    return verdict
