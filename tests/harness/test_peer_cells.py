"""The peer suites in the harness: the cell's record, the report, `--peer-suites`, the gate.

The cells run for real on a throwaway project (tests/harness/test_cell.py's plan, torch-free
probe) whose test runs the throwaway peer suite of tests/harness/peerproject.py through the real
tests/downstream/peers; the report and the gate read real records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cells import cell as cellmod
from harness.cells.cell import run_cell
from harness.matrix import spec
from tests.harness.test_cell import plan, read

ROOT = Path(__file__).resolve().parents[2]

CELL_TEST = """
    import os
    from pathlib import Path

    from tests.downstream.peers import check
    from tests.harness import peerproject as toy


    def test_toy_suite(tmp_path):
        record = Path(os.environ["COMPAT_MATRIX_PEERS"])
        got = check.check(
            toy.suite(tmp_path / "plugin"),
            toy.sdist(tmp_path / "sdist"),
            release=toy.VERSION,
            work=tmp_path / "runs",
            logs=record.parent / "peers",
            record=record,
        )
        assert got["ok"], got["message"]
"""


@pytest.mark.parametrize("breaks", [True, False])
def test_the_cell_records_the_peer_suites_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, breaks: bool
) -> None:
    monkeypatch.setenv("TOY_BREAK", "1" if breaks else "0")
    p = plan(tmp_path, CELL_TEST)
    result = run_cell(p, echo=None)
    toy = result.peers["toy"]
    assert toy["release"] == "1.0" and toy["runs"]["compat"]["counts"]["passed"] == (
        4 if breaks else 5
    )
    assert [r["test"] for r in toy["lifted"]] == ["tests/test_toy.py::test_refusal"]
    assert read(p)["peers"] == result.peers
    assert (p.outdir / "peers" / "toy-plain.log").is_file()  # beside the record
    if breaks:
        assert result.status == "failed"
        regression = "tests/test_toy.py::test_breaks_through_the_patch"
        assert [r["test"] for r in toy["regressions"]] == [regression]
        (failure,) = result.failures
        assert regression in failure["message"] and "the patch broke this" in failure["message"]
    else:
        assert result.status == "passed", result.reason
        assert toy["ok"] and toy["regressions"] == []


def test_peer_suites_of_a_cell_without_the_file_or_with_a_bad_one_are_empty(
    tmp_path: Path,
) -> None:
    assert cellmod.peer_suites(tmp_path / "absent.json") == {}
    bad = tmp_path / "peers.json"
    bad.write_text("[1]")
    assert cellmod.peer_suites(bad) == {}
    bad.write_text('{"a": {"ok": true}, "b": 3}')
    assert cellmod.peer_suites(bad) == {"a": {"ok": True}}


def test_a_deselected_path_is_left_out_and_recorded(tmp_path: Path) -> None:
    p = plan(tmp_path, "def test_kept(): pass\n")
    (tmp_path / "project" / "test_peer.py").write_text("def test_peer(): assert False\n")
    p.pytest_args.append("--deselect=test_peer.py")  # a node id prefix, as plan_for writes it
    p.deselected = {"test_peer.py": "the group's peer suites ran in another cell"}
    result = run_cell(p, echo=None)
    assert result.status == "passed", result.reason
    assert list(result.tests) == ["test_it.py::test_kept"]
    assert read(p)["deselected"] == {"test_peer.py": "the group's peer suites ran in another cell"}


def test_a_downstream_cells_plan_names_uv_and_deselects_the_peer_suites(tmp_path: Path) -> None:
    m = spec.load()
    (cell, *_) = m.cells(tiers=["downstream"], backend="cpu")
    why = {m.peer_suites: "--peer-suites first: ran in another cell"}
    plan_ = cellmod.plan_for(m, cell, Path("python"), uv="/the/uv", reports=tmp_path, deselect=why)
    assert plan_.env[cellmod.UV_ENV] == "/the/uv"
    assert plan_.env["CUDA_VISIBLE_DEVICES"] == ""  # the backend's own env kept
    assert f"--deselect={m.peer_suites}" in plan_.pytest_args and plan_.deselected == why
    plain = cellmod.plan_for(m, cell, Path("python"), uv="/the/uv", reports=tmp_path)
    assert not any(a.startswith("--deselect") for a in plain.pytest_args)
    assert plain.deselected == {}


def test_the_harness_and_the_peer_suites_name_the_same_variables() -> None:
    from tests.downstream.peers import check, fetch

    assert check.RECORD_ENV == cellmod.PEERS_ENV and fetch.UV_ENV == cellmod.UV_ENV
    text = (ROOT / spec.load().peer_suites).read_text()
    assert "def test_accelerate_suite(" in text and "def test_safetensors_suite(" in text
