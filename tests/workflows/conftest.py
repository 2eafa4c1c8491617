"""The act scenarios need no torch: none of tests/conftest.py's cell plumbing applies here
(run with --confcutdir=tests/workflows). Prints each scenario's wall time at the end."""

from __future__ import annotations

import pytest

TIMES: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMES:
        terminalreporter.section("act scenarios: wall time")
        for name, seconds in TIMES.items():
            terminalreporter.write_line(f"{seconds:6.0f} s  {name}")
