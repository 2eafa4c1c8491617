"""The cell statuses and test outcomes: one vocabulary, one order, for the cell, report and gate.

Each status has exactly one cause (docs/report.md's table is this one, checked by a test). Only
``passed`` and ``skipped`` are good; every other status fails ``nox -s matrix`` and the gate.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

# status -> its one cause
STATUSES: dict[str, str] = {
    "passed": "pytest finished its session with exit 0, and junit.xml and the reportlog agree",
    "failed": "pytest finished its session with exit 1 (a test failed, errored or passed against "
    "a strict expected failure), or an expected failure of matrix.toml matched no collected test "
    "(stale expected failure)",
    "skipped": "the runner lacks the cell's backend (host probe, platform or torch probe)",
    "no-tests": "pytest finished its session and collected no test (exit 5)",
    "error": "pytest stopped itself: interrupted (exit 2), internal error (3), usage error (4)",
    "install-error": (
        "installing the pins or the gate's candidates failed (the reason carries the"
        " installer's message), or torch does not import in the cell's venv"
    ),
    "unmet-requirements": "an installed cell's interpreter lacks a test requirement, or holds one "
    "at a version requirements/test.txt does not accept; nothing was installed or run",
    "crashed": "the test process ended before pytest finished its session: a signal (named), "
    "or an exit in mid-run (its status named)",
    "timeout": "the cell ran past cell_timeout_s and its process group was killed",
    "interrupted": "the run was stopped (SIGINT or SIGTERM) while the cell ran or before it"
    " started",
    "inconsistent": "the evidence disagrees (the reason names what): reportlog, junit.xml, "
    "probe.json and pytest's exit status must tell the same story",
    "harness-error": "the harness itself raised while running the cell (the reason names it)",
    "no-record": "the cell should have run in this run, and no cell.json exists for it",
}
OK_STATUSES = ("passed", "skipped")
BAD_STATUSES = tuple(s for s in STATUSES if s not in OK_STATUSES)
RAN_STATUSES = ("passed", "failed")  # every test of the cell ran and the evidence agrees

# a test's final outcome, in the one order every count is shown in
OUTCOMES = ("passed", "failed", "error", "xfailed", "xpassed", "skipped")
FAILING = ("failed", "error")


def colour(status: str, counts: Mapping[str, int]) -> str:
    """The class a cell is drawn with: pass, xfail (passed with expected failures), fail, error
    (did not run to a trustworthy end), skip."""
    if status == "passed":
        return "xfail" if counts.get("xfailed") else "pass"
    if status == "skipped":
        return "skip"
    return "fail" if status == "failed" else "error"


def format_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{counts[k]} {k}" for k in OUTCOMES if counts.get(k)) or "no tests"
