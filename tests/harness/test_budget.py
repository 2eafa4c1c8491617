"""The nightly profile's time budget (tests/common/budget.py), run for real: a throwaway suite with a
slow property and a quick one runs under pytest in a subprocess with the budget plugin, and the
slow one stops at its share of the time, passes, and is named in the summary and the reportlog.
Under the ``ci`` profile nothing reads the clock: every example runs.

Here with the harness's tests, not in every cell: the plugin's behaviour depends on the pinned
pytest and Hypothesis (the same pins in requirements/test.txt and harness.txt), never on torch or
TorchAO, and its throwaway suite imports neither; run in each cell it cost ~10 s of each."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.common import budget
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = """
import time
from hypothesis import given, strategies as st

@given(st.integers())
def test_slow(x):
    time.sleep(0.02)  # 10,000 examples: 200 s

@given(st.integers())
def test_quick(x):
    pass

def test_plain():
    pass
"""
CONFTEST = "from tests.common import profiles\n\nprofiles.load()\n"


MARKED = """
import os
import pytest
from hypothesis import given, strategies as st

@pytest.mark.examples(40)
@given(st.integers())
def test_marked(x):
    with open(os.environ["DRAWN"], "a") as fh:
        fh.write(f"{x}\\n")
"""
EXPLICIT = """
from hypothesis import given, settings, strategies as st

@given(st.integers())
@settings(max_examples=40)
def test_explicit(x):
    pass
"""


def run_suite(
    tmp_path: Path, profile: str, budget_s: str, suite: str = SUITE
) -> tuple[subprocess.CompletedProcess[str], float, list[dict[str, object]]]:
    (tmp_path / "test_throwaway.py").write_text(suite)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    log = tmp_path / "log.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HYPOTHESIS_PROFILE": profile,
        budget.ENV: budget_s,
        "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / ".hypothesis"),
        "DRAWN": str(tmp_path / "drawn.txt"),
    }
    start = time.monotonic()
    done = run_module(
        "pytest", "-p", "tests.common.budget", "-p", "no:cacheprovider",
        f"--report-log={log}", "--rootdir", tmp_path, tmp_path, "-q",
        cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    seconds = time.monotonic() - start
    reports = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return done, seconds, reports


def test_a_nightly_property_stops_at_its_share_and_says_so(tmp_path: Path) -> None:
    done, seconds, reports = run_suite(tmp_path, "nightly", "6")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    # two properties share 6 s: the slow one, 200 s unbounded, stops near its 3 s
    assert seconds < 60, seconds
    assert "properties stopped by the time budget" in done.stdout
    line = next(x for x in done.stdout.splitlines() if "test_slow:" in x)
    assert "of 10000 examples in" in line and "(its share of the time budget: 3 s)" in line
    ran = int(line.split(": ")[1].split(" of ")[0])
    assert 10 <= ran < 10_000
    # the reportlog (which the harness keeps per cell) carries it on the test's report
    (call,) = [
        r for r in reports
        if r.get("nodeid", "").endswith("::test_slow") and r.get("when") == "call"
    ]  # fmt: skip
    recorded = dict(call["user_properties"])[budget.PROPERTY]
    assert json.loads(recorded)["ran"] == ran and json.loads(recorded)["asked"] == 10_000


def test_the_ci_profile_never_reads_the_clock(tmp_path: Path) -> None:
    done, _, _ = run_suite(tmp_path, "ci", "0.001")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped by the time budget" not in done.stdout and "3 passed" in done.stdout


@pytest.mark.parametrize(("profile", "drawn"), [("ci", 40), ("corner", 10), ("nightly", None)])
def test_the_examples_marker_sets_the_deterministic_runs_and_the_nightly_keeps_its_own(
    tmp_path: Path, profile: str, drawn: int | None
) -> None:
    done, _, _ = run_suite(tmp_path, profile, "3", MARKED)
    assert done.returncode == 0, done.stdout + done.stderr
    count = len((tmp_path / "drawn.txt").read_text().splitlines())
    if drawn is not None:
        assert count == drawn  # the marker's 40 (a quarter, at least ten, under corner)
    else:  # explores past the marker: its 10,000, or as many as its 3 s allow
        assert count > 40 * 5, count


def test_an_explicit_max_examples_is_refused_naming_the_property(tmp_path: Path) -> None:
    done, _, _ = run_suite(tmp_path, "ci", "3", EXPLICIT)
    assert done.returncode != 0
    assert "test_throwaway.py::test_explicit (max_examples=40)" in done.stderr + done.stdout
    assert "@pytest.mark.examples(N)" in done.stderr + done.stdout


@pytest.mark.parametrize("raw", ["0", "-1", "soon"])
def test_a_bad_budget_is_refused_with_the_value(raw: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"{budget.ENV}={raw!r}: expected a positive"):
        budget.total_seconds({budget.ENV: raw})


def test_without_an_override_the_properties_get_half_the_cells_limit() -> None:
    from harness.matrix import spec

    assert budget.total_seconds({}) == budget.SHARE * spec.load().cell_timeout_s


def test_sessions_that_share_a_cell_split_the_properties_share() -> None:
    """A carry source runs two sessions under one deadline; each gets half, so the two fit."""
    from harness.matrix import paths, spec

    alone = budget.SHARE * spec.load().cell_timeout_s
    assert budget.total_seconds({paths.SESSIONS_ENV: "2"}) == alone / 2
    assert budget.total_seconds({paths.SESSIONS_ENV: "1"}) == alone
    # an explicit budget is the session's own, whatever shares the cell
    assert budget.total_seconds({paths.SESSIONS_ENV: "2", budget.ENV: "30"}) == 30


@pytest.mark.parametrize("raw", ["0", "-2", "two", "1.5"])
def test_a_bad_session_count_is_refused_with_the_value(raw: str) -> None:
    from harness.matrix import paths

    with pytest.raises(pytest.UsageError, match=f"{paths.SESSIONS_ENV}={raw!r}: expected"):
        budget.total_seconds({paths.SESSIONS_ENV: raw})
