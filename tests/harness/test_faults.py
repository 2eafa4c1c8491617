"""Fault injection: real cells (real venvs, the real probe, pytest, the real noxfile) whose test
suites misbehave the way a user's suite or a runner can. No fault may yield a green cell or a
green ``nox -s matrix``; each is recorded with its own status and reason, and the other cells
still run. See tests/common/harness/faultproject.py for the throwaway project. This file holds
the one run in which many faults share a matrix; test_fault_runs.py the faults that need a run
each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.common.harness.fault_catalog import MANY
from tests.common.harness.faultproject import Project, matrix_toml

# --- one run, many faults side by side -------------------------------------------------------

STALE = """
[[xfail]]
tests = ["tests/test_fault.py::test_renamed_long_ago"]
torchao = ["0.7"]
backend = ["misc"]
reason = "a test renamed since: this expected failure no longer matches anything"
"""
TIMEOUT_S = 45  # other cells take 4-9 s here, 25 s at most under load (a cold venv included)

# cell -> (status, words its reason must contain)
EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch2.6-ao0.8-clean": ("passed", ()),
    "torch2.99-ao0.8-clean": (
        "install-error",
        ("install exited 1 (the pins): No solution", "2.99.0"),
    ),
    "torch2.6-ao0.98-clean": (
        "install-error",
        ("install exited 1 (the pins): No solution", "0.98.0"),
    ),
    "torch2.6-ao0.6-crash": ("crashed", ("SIGSEGV",)),
    "torch2.6-ao0.7-crash": ("crashed", ("exited 0", "before pytest finished")),
    "torch2.6-ao0.8-crash": ("crashed", ("exited 5", "before pytest finished")),
    "torch2.6-ao0.6-forge": ("inconsistent", ("inconsistent evidence", "junit.xml")),
    "torch2.6-ao0.7-forge": ("inconsistent", ("inconsistent evidence", "probe.json")),
    "torch2.6-ao0.8-forge": ("failed", ("1 failed",)),
    "torch2.6-ao0.6-folder": ("inconsistent", ("inconsistent evidence", "folder was deleted")),
    "torch2.6-ao0.7-folder": ("inconsistent", ("inconsistent evidence", "replaced by a file")),
    "torch2.6-ao0.8-folder": ("passed", ()),
    "torch2.6-ao0.6-junit": ("inconsistent", ("inconsistent evidence", "not valid XML")),
    "torch2.6-ao0.7-junit": ("inconsistent", ("inconsistent evidence", "junit.xml is empty")),
    "torch2.6-ao0.8-junit": ("inconsistent", ("junit.xml lists 0 tests", "log.jsonl 3")),
    "torch2.6-ao0.6-misc": ("timeout", (f"{TIMEOUT_S} s",)),
    "torch2.6-ao0.7-misc": ("failed", ("stale expected failure", "test_renamed_long_ago")),
}


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory, fault_envdir: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("many") / "project"
    text = matrix_toml(MANY, timeout_s=TIMEOUT_S, uninstallable=True, extra=STALE)
    project = Project.create(root, fault_envdir, text)
    # three groups side by side on two cores: the hanging cell only sleeps
    done = project.nox("-s", "matrix", "--", "--jobs", "3")
    return {"project": project, "done": done}


def test_many_faults_fail_the_matrix_and_every_cell_has_its_record(many: dict[str, Any]) -> None:
    project, done = many["project"], many["done"]
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    data = project.matrix_json()
    assert set(data["cells"]) == set(EXPECTED)  # every cell that should have run, no other
    bad = {cid for cid, (status, _) in EXPECTED.items() if status != "passed"}
    assert data["totals"]["bad_cells"] == len(bad)
    assert {cid for cid, c in data["cells"].items() if c["status"] != "passed"} == bad


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_each_fault_has_its_status_and_reason(many: dict[str, Any], cid: str) -> None:
    status, words = EXPECTED[cid]
    cell = many["project"].cell(cid)
    assert cell["status"] == status, (cell["status"], cell["reason"])
    for word in words:
        assert word in cell["reason"], cell["reason"]
    assert many["project"].matrix_json()["cells"][cid]["status"] == status


def test_what_ran_before_a_crash_is_kept(many: dict[str, Any]) -> None:
    for ao in ("0.6", "0.7", "0.8"):
        assert many["project"].cell(f"torch2.6-ao{ao}-crash")["counts"]["passed"] == 1


def test_install_errors_show_the_missing_pin(many: dict[str, Any]) -> None:
    assert "2.99.0" in many["project"].cell("torch2.99-ao0.8-clean")["log_tail"]
    assert "0.98.0" in many["project"].cell("torch2.6-ao0.98-clean")["log_tail"]


def test_the_hang_was_killed_near_its_deadline(many: dict[str, Any]) -> None:
    cell = many["project"].cell("torch2.6-ao0.6-misc")
    assert TIMEOUT_S <= cell["duration_s"] < TIMEOUT_S + 30


def test_failing_tests_are_named_by_node_id_everywhere(many: dict[str, Any]) -> None:
    project = many["project"]
    nodeid = "tests/test_fault.py::test_fault"
    for cid in ("torch2.6-ao0.8-forge", "torch2.6-ao0.8-junit"):
        # one source (the reportlog): a junit.xml that lists nothing does not hide the failure
        assert [f["nodeid"] for f in project.cell(cid)["failures"]] == [nodeid]
        assert [f["nodeid"] for f in project.matrix_json()["cells"][cid]["failures"]] == [nodeid]
    for page in ("matrix.md", "matrix.html"):
        text = (project.reports / page).read_text()
        assert nodeid in text and "tests.test_fault" not in text
