"""The act scenarios need no torch: none of the cell plumbing (tests/common/cell_plugin.py)
applies here. Prints each scenario's wall time at the end, and when
every scenario (marked ``act``) ran and passed, records the files they exercised in
reports/act.json (harness.ci.act_scope), so that .ci/run can leave them out until one changes."""

from __future__ import annotations

import pytest

from harness.ci import act_scope
from tests.common.workflows.act import ROOT, TIMES

SCENARIOS: set[str] = set()  # every act-marked test collected, before any deselection
PASSED: set[str] = set()
RECORDED: list[str] = []  # the record's path once written, for the summary


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    SCENARIOS.update(i.nodeid for i in items if i.get_closest_marker("act"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed and report.nodeid in SCENARIOS:
        PASSED.add(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0 and SCENARIOS and PASSED == SCENARIOS:
        act_scope.record(ROOT, ROOT / act_scope.RECORD, sorted(SCENARIOS), TIMES)
        RECORDED.append(str(act_scope.RECORD))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMES:
        terminalreporter.section("act scenarios: wall time")
        for name, seconds in TIMES.items():
            terminalreporter.write_line(f"{seconds:6.0f} s  {name}")
    if RECORDED:  # pytest_sessionfinish runs before the terminal summary
        terminalreporter.write_line(f"every scenario passed: recorded in {RECORDED[0]}")
