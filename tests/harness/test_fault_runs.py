"""Fault injection, one run per fault: a harness error, a lost record, a stop by signal, a
malformed matrix file, lost coverage the gate must name. Real cells, real venvs, the real
noxfile, like test_faults.py (its ``many`` run holds the faults that share one run); apart from
it so that the two files run side by side (``nox -s tests`` gives each worker whole files)."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from harness.cells import run
from harness.matrix import spec
from harness.matrix.spec import MatrixSpecError
from tests.common.harness.fault_catalog import MALFORMED
from tests.common.harness.faultproject import Project, alive, matrix_toml, stop, wait_for

# --- a harness error, a lost record --------------------------------------------------------


def test_a_harness_error_is_the_cells_status_and_the_group_goes_on(
    tmp_path: Path, fault_envdir: Path
) -> None:
    # a folder planted where the record goes makes writing cell.json raise
    faults = {"lone": {"0.6": "block_record", "0.8": "none"}}
    project = Project.create(tmp_path / "project", fault_envdir, matrix_toml(faults))
    done = project.nox("-s", "matrix", "--", "--jobs", "1")
    assert done.returncode == 1, done.stdout[-3000:]
    cell = project.cell("torch2.6-ao0.6-lone")
    assert cell["status"] == "harness-error", cell["reason"]
    assert "the harness failed" in cell["reason"] and "IsADirectoryError" in cell["reason"]
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


def test_prune_removes_the_venvs_it_made_and_keeps_the_others(
    tmp_path: Path, fault_envdir: Path
) -> None:
    # two groups: "keep" has its venv before the run, "gone" gets one from the run itself
    faults = {"keep": {"0.8": "none"}, "gone": {"0.8": "none"}}
    project = Project.create(tmp_path / "project", fault_envdir, matrix_toml(faults))
    kept, made = (fault_envdir / f"matrix-tests-torch2.6-{b}" for b in ("keep", "gone"))
    first = project.nox("-s", "matrix", "--", "--cell", "*-keep")  # the warm uv cache: offline
    assert first.returncode == 0 and kept.is_dir(), first.stdout[-3000:]
    shutil.rmtree(made, ignore_errors=True)
    done = project.nox("-s", "matrix", "--", "--prune")
    assert project.cell("torch2.6-ao0.8-keep")["status"] == "passed"
    assert kept.is_dir() and not (kept / run.OWN_CACHE).exists()  # there before: used, kept
    # the new venv installed through a uv cache of its own (empty, and the run is offline:
    # torch is not in it, although the machine's cache that "keep" installs from has it)
    gone = project.cell("torch2.6-ao0.8-gone")
    assert gone["status"] == "install-error", gone["reason"]
    assert "torch==2.6.0" in gone["reason"], gone["reason"]
    assert "torch was not found in the cache" in gone["reason"], gone["reason"]  # uv (pinned)
    assert not made.exists()  # removed with its cache once its cell was recorded
    assert done.returncode == 1  # the install error fails the run, as any would


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
    from tests.common.harness.faultproject import SHRINKING, SKIPPABLE

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
