"""Fault injection: real cells (real venvs, the real probe, pytest, the real noxfile) whose test
suites misbehave the way a user's suite or a runner can. No fault may yield a green cell or a
green ``nox -s matrix``; each is recorded with its own status and reason, and the other cells
still run. See faultproject.py for the throwaway project."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from harness.matrix import spec
from harness.matrix.spec import MatrixSpecError
from tests.harness.faultproject import Project, alive, matrix_toml, stop, wait_for

# --- one run, many faults side by side -------------------------------------------------------

MANY = {
    "clean": {"0.6": "none", "0.7": "none", "0.8": "none"},
    "crash": {"0.6": "segv", "0.7": "exit0", "0.8": "exit5"},
    "forge": {"0.6": "forged", "0.7": "probe_gone", "0.8": "fails"},
    "folder": {"0.6": "rmdir", "0.7": "replace", "0.8": "none"},
    "junit": {"0.6": "junit_garbage", "0.7": "junit_empty", "0.8": "junit_nothing"},
    "misc": {"0.6": "hang", "0.7": "none"},
}
STALE = """
[[xfail]]
tests = ["tests/test_fault.py::test_renamed_long_ago"]
torchao = ["0.7"]
backend = ["misc"]
reason = "a test renamed since: this expected failure no longer matches anything"
"""
TIMEOUT_S = 60  # other cells take 5-25 s here (a cold venv's first torch import included)

# cell -> (status, words its reason must contain)
EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch2.6-ao0.6-clean": ("passed", ()),
    "torch2.6-ao0.7-clean": ("passed", ()),
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


# --- a harness error, a lost record --------------------------------------------------------


def test_a_harness_error_is_the_cells_status_and_the_group_goes_on(
    tmp_path: Path, fault_envdir: Path
) -> None:
    # a folder planted where the record goes makes writing cell.json raise
    faults = {"lone": {"0.6": "block_record", "0.7": "replace", "0.8": "none"}}
    project = Project.create(tmp_path / "project", fault_envdir, matrix_toml(faults))
    done = project.nox("-s", "matrix", "--", "--jobs", "1")
    assert done.returncode == 1, done.stdout[-3000:]
    cell = project.cell("torch2.6-ao0.6-lone")
    assert cell["status"] == "harness-error", cell["reason"]
    assert "the harness failed" in cell["reason"] and "IsADirectoryError" in cell["reason"]
    assert "replaced by a file" in project.cell("torch2.6-ao0.7-lone")["reason"]
    assert project.cell("torch2.6-ao0.8-lone")["status"] == "passed"  # the group went on


def test_a_lost_record_is_no_record_and_fails_the_run(tmp_path: Path, fault_envdir: Path) -> None:
    faults = {"lone": {"0.6": "none", "0.7": "wipe_cells", "0.8": "none"}}
    project = Project.create(tmp_path / "project", fault_envdir, matrix_toml(faults))
    done = project.nox("-s", "matrix", "--", "--jobs", "1")
    assert done.returncode == 1, done.stdout[-3000:]
    cells = project.matrix_json()["cells"]
    assert cells["torch2.6-ao0.6-lone"]["status"] == "no-record"  # its cell.json went with it
    assert cells["torch2.6-ao0.7-lone"]["status"] == "inconsistent"
    assert cells["torch2.6-ao0.8-lone"]["status"] == "passed"
    assert "no record" in (project.reports / "matrix.md").read_text()


# --- stopping ------------------------------------------------------------------------------


def _assert_stopped(project: Project, started: Path, cids: tuple[str, str]) -> None:
    pids = json.loads(started.read_text())
    for pid in (pids["pid"], pids["child"]):  # the test and the process it spawned
        assert not alive(pid), f"process {pid} of the stopped cell is still running"
    running, waiting = (project.cell(cid) for cid in cids)
    assert running["status"] == "interrupted" and "while" in running["reason"]
    assert waiting["status"] == "interrupted" and "before" in waiting["reason"]


def test_sigterm_to_the_matrix_stops_records_and_rerenders(
    tmp_path: Path, fault_envdir: Path
) -> None:
    faults = {"clean": {"0.8": "none"}, "slow": {"0.6": "slow", "0.7": "none"}}
    project = Project.create(tmp_path / "project", fault_envdir, matrix_toml(faults))
    proc = project.start_nox("-s", "matrix", "--", "--jobs", "2", log=tmp_path / "nox.log")
    started = project.reports / "started-torch2.6-ao0.6-slow.json"
    wait_for(started, 240, proc)
    wait_for(project.reports / "cells" / "torch2.6-ao0.8-clean" / "cell.json", 240, proc)
    assert stop(proc, signal.SIGTERM) != 0
    _assert_stopped(project, started, ("torch2.6-ao0.6-slow", "torch2.6-ao0.7-slow"))
    assert project.cell("torch2.6-ao0.8-clean")["status"] == "passed"
    data = project.matrix_json()  # rendered after the stop
    assert data["cells"]["torch2.6-ao0.6-slow"]["status"] == "interrupted"
    assert data["run"]["state"] == "interrupted"


def test_sigint_to_one_session_stops_and_records(tmp_path: Path, fault_envdir: Path) -> None:
    faults = {"slow": {"0.6": "slow", "0.7": "none"}}
    project = Project.create(tmp_path / "project", fault_envdir, matrix_toml(faults))
    proc = project.start_nox("-s", "tests-torch2.6-slow", log=tmp_path / "nox.log")
    started = project.reports / "started-torch2.6-ao0.6-slow.json"
    wait_for(started, 240, proc)
    assert stop(proc, signal.SIGINT) != 0
    _assert_stopped(project, started, ("torch2.6-ao0.6-slow", "torch2.6-ao0.7-slow"))


# --- malformed matrix files: a load-time error naming file, field and value ------------------

BASE = matrix_toml({"clean": {"0.8": "none"}})
UNPAIRED = """
[[torch]]
version = "2.7"
pin = "2.7.1"
tier = "extended"

[[torchao]]
version = "0.9"
pin = "0.9.0"
tier = "extended"
torch = ["2.7"]
"""
# (id, old text, new text, field named, text the message shows)
MALFORMED = [
    (
        "backend without absence detection",
        "[backends.clean]",
        '[backends.tpu]\nindex_env = "COMPAT_MATRIX_INDEX_TPU"\n\n[backends.clean]',
        "backends.tpu",
        "host_probe",
    ),
    (
        "constant torch_probe",
        "[backends.clean]",
        '[backends.tpu]\ntorch_probe = "True"\n\n[backends.clean]',
        "backends.tpu.torch_probe",
        "'True'",
    ),
    (
        "empty host_probe",
        "[backends.clean]",
        "[backends.tpu]\nhost_probe = []\n\n[backends.clean]",
        "backends.tpu.host_probe",
        "[]",
    ),
    (
        "unknown platform",
        'platforms = ["linux"]',
        'platforms = ["Linux"]',
        "backends.clean.platforms[0]",
        "'Linux'",
    ),
    (
        "torch = [] on TorchAO",
        'pin = "0.8.0"',
        'pin = "0.8.0"\ntorch = []',
        "torchao[2].torch",
        "[]",
    ),
    (
        "duplicate torch pair",
        'pin = "0.8.0"',
        'pin = "0.8.0"\ntorch = ["2.6", "2.6"]',
        "torchao[2].torch[1]",
        "'2.6'",
    ),
    (
        "exclusion that matches no cell",
        "[backends.clean]",
        UNPAIRED
        + '\n[[exclude]]\ntorch = ["2.6"]\ntorchao = ["0.9"]\nreason = "never paired"\n'
        + "\n[backends.clean]",
        "exclude[0]",
        "matches no cell",
    ),
    (
        "index_env not a variable name",
        'platforms = ["linux"]',
        'platforms = ["linux"]\nindex_env = "MY-INDEX"',
        "backends.clean.index_env",
        "'MY-INDEX'",
    ),
    (
        "runs_on empty",
        'platforms = ["linux"]',
        'platforms = ["linux"]\nruns_on = []',
        "backends.clean.runs_on",
        "[]",
    ),
    (
        "reruns out of range",
        "cell_timeout_s = 60",
        "cell_timeout_s = 60\nreruns = 9",
        "run.reruns",
        "9",
    ),
    (
        "xfail without patterns",
        "[backends.clean]",
        '[[xfail]]\ntests = []\nreason = "x"\n\n[backends.clean]',
        "xfail[0].tests",
        "[]",
    ),
    ("no python", 'python = ["3.11"]', "python = []", "run.python", None),
]


@pytest.mark.parametrize(
    ("old", "new", "field", "shown"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_matrix_fails_at_load_and_nox_exits_nonzero(
    tmp_path: Path, fault_envdir: Path, old: str, new: str, field: str, shown: str | None
) -> None:
    assert old in BASE, old
    project = Project.create(tmp_path / "project", fault_envdir, BASE.replace(old, new, 1))
    with pytest.raises(MatrixSpecError) as info:
        spec.load(project.root / "matrix.toml")
    assert info.value.field == field, str(info.value)
    message = str(info.value)
    if shown is not None:
        assert shown in message, message
    done = project.nox("-s", "matrix", timeout=120)
    assert done.returncode != 0
    assert f"{field}: " in done.stdout + done.stderr
    assert not (project.reports / "cells").exists()  # nothing ran


# --- the gate sees lost coverage --------------------------------------------------------------


def test_gate_names_skipped_and_fewer_tests_and_excuses_only_an_absent_backend(
    tmp_path: Path, fault_envdir: Path
) -> None:
    from tests.harness.faultproject import SHRINKING, SKIPPABLE

    project = Project.create(
        tmp_path / "project", fault_envdir, matrix_toml({"clean": {"0.8": "none"}})
    )
    tests = project.root / "tests"
    (tests / "test_skippable.py").write_text(SKIPPABLE)
    (tests / "test_shrinking.py").write_text(SHRINKING)
    done = project.nox("-s", "baseline")
    assert done.returncode == 0, done.stdout[-3000:]
    assert (project.reports / "baseline.json").exists()

    # a whole module switched off, and a test gone: the cell still passes, the gate does not
    (tests / "test_skippable.py").write_text(
        'import pytest\n\npytestmark = pytest.mark.skip(reason="switched off")\n' + SKIPPABLE
    )
    (tests / "test_shrinking.py").write_text(SHRINKING.split("\n\ndef test_goes_away")[0] + "\n")
    done = project.nox("-s", "gate")
    assert done.returncode == 1, done.stdout[-3000:]
    cid = "torch2.6-ao0.8-clean"
    assert project.cell(cid)["status"] == "passed"
    verdict = json.loads((project.reports / "gate.json").read_text())
    rows = {(r["class"], r["test"]) for r in verdict["rows"]}
    for name in ("test_one", "test_two", "test_three"):
        assert ("now skipped", f"tests/test_skippable.py::{name}") in rows
    assert ("missing", "tests/test_shrinking.py::test_goes_away") in rows
    (fewer,) = [r for r in verdict["rows"] if r["class"] == "fewer tests"]
    assert (fewer["cell"], fewer["before"], fewer["after"]) == (cid, "8 tests", "7 tests")
    assert verdict["ok"] is False
    gate_md = (project.reports / "gate.md").read_text()
    assert "now skipped" in gate_md and "fewer tests" in gate_md and "switched off" in gate_md

    # the same suite on a runner without the backend: skipped for a reason the gate accepts
    (tests / "test_skippable.py").write_text(SKIPPABLE)
    (tests / "test_shrinking.py").write_text(SHRINKING)
    text = (project.root / "matrix.toml").read_text()
    (project.root / "matrix.toml").write_text(
        text.replace('platforms = ["linux"]', 'platforms = ["darwin"]')
    )
    done = project.nox("-s", "gate")
    assert done.returncode == 0, done.stdout[-3000:]
    assert project.cell(cid)["status"] == "skipped"
    verdict = json.loads((project.reports / "gate.json").read_text())
    assert [(r["class"], r["cell"], r["test"]) for r in verdict["rows"]] == [
        ("now skipped", cid, "*")
    ]
    assert verdict["ok"] is True


def test_a_candidate_that_does_not_install_is_named_by_the_gate(
    tmp_path: Path, fault_envdir: Path
) -> None:
    """``nox -s gate -- --candidate safetensors==99.0.0`` (offline, as every run here): the pins
    install, the candidate does not. The cell is an install-error whose reason names the
    candidates' install and carries uv's message; the gate's row says so, in gate.json and in
    gate.md, which the workflow appends to the step summary."""
    project = Project.create(
        tmp_path / "project", fault_envdir, matrix_toml({"clean": {"0.8": "none"}})
    )
    done = project.nox("-s", "baseline")
    assert done.returncode == 0, done.stdout[-3000:]
    done = project.nox("-s", "gate", "--", "--candidate", "safetensors==99.0.0")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    cid = "torch2.6-ao0.8-clean"
    cell = project.cell(cid)
    assert cell["status"] == "install-error" and cell["candidates"] == ["safetensors==99.0.0"]
    reason = cell["reason"]
    assert reason.startswith(
        "install exited 1 (the candidates): No solution found when resolving dependencies: Because "
    ), reason
    assert "safetensors==99.0.0" in reason and "\n" not in reason
    verdict = json.loads((project.reports / "gate.json").read_text())
    assert [(r["class"], r["cell"], r["test"], r["after"], r["why"]) for r in verdict["rows"]] == [
        ("missing", cid, "*", "install-error", reason)
    ]
    row = f"| missing | {cid} | `*` | passed | install-error | yes | {reason} |"
    assert row in (project.reports / "gate.md").read_text().splitlines()


# every fault this module injects (the README states the count)
INJECTED = (
    sorted({f for faults in MANY.values() for f in faults.values()} - {"none", "fails"})
    + [
        "uninstallable torch pin",
        "uninstallable TorchAO pin",
        "uninstallable gate candidate",
        "stale expected failure",
        "a folder where cell.json goes",
        "reports/cells deleted",
        "SIGTERM to nox -s matrix",
        "SIGINT to one session",
        "a module switched off",
        "a test removed",
    ]
    + [f"malformed matrix.toml: {m[0]}" for m in MALFORMED]
)
