"""The peer suites in the harness: the cell's record, the report, `--peer-suites`, the gate.

The cells run for real on a throwaway project (tests/harness/test_cell.py's plan, torch-free
probe) whose test runs the throwaway peer suite of tests/common/harness/peerproject.py through the real
tests/common/peers; the report and the gate read real records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cells import cell as cellmod
from harness.cells import evidence, run, verdict
from harness.cells import plan as planmod
from harness.cells.cell import run_cell
from harness.cells.record import CellResult
from harness.ci import gate
from harness.matrix import paths, selection, spec
from tests.common.harness.throwaway_cells import plan, read

ROOT = Path(__file__).resolve().parents[2]

CELL_TEST = """
    import os
    from pathlib import Path

    from tests.common.peers import check
    from tests.common.harness import peerproject as toy


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
    assert evidence.peer_suites(tmp_path / "absent.json") == {}
    bad = tmp_path / "peers.json"
    bad.write_text("[1]")
    assert evidence.peer_suites(bad) == {}
    bad.write_text('{"a": {"ok": true}, "b": 3}')
    assert evidence.peer_suites(bad) == {"a": {"ok": True}}


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
    plan_ = planmod.plan_for(m, cell, Path("python"), uv="/the/uv", reports=tmp_path, deselect=why)
    assert plan_.env[planmod.UV_ENV] == "/the/uv"
    assert plan_.env["CUDA_VISIBLE_DEVICES"] == ""  # the backend's own env kept
    assert f"--deselect={m.peer_suites}" in plan_.pytest_args and plan_.deselected == why
    plain = planmod.plan_for(m, cell, Path("python"), uv="/the/uv", reports=tmp_path)
    assert not any(a.startswith("--deselect") for a in plain.pytest_args)
    assert plain.deselected == {}


def test_the_harness_and_the_peer_suites_name_the_same_variables() -> None:
    from tests.common.peers import check, fetch

    assert check.RECORD_ENV == cellmod.PEERS_ENV and fetch.UV_ENV == planmod.UV_ENV
    text = (ROOT / spec.load().peer_suites).read_text()
    assert "def test_accelerate_suite(" in text and "def test_safetensors_suite(" in text


# --- `--peer-suites first`: one downstream cell per group runs them --------------------------


def test_first_runs_the_peer_suites_in_one_cell_per_group_and_backend() -> None:
    m = spec.load()
    cells = m.cells(tiers=["core", "downstream"])
    chosen = run.peer_deselection(m, cells, "first")
    assert run.peer_deselection(m, cells, "every") == {} == run.peer_deselection(m, cells)
    downstream = [c for c in cells if c.group]
    ran = [c.id for c in downstream if c.id not in chosen]
    assert sorted(ran) == sorted(
        f"torch{t}-ao{a}-ds{g}-{b}"
        for b in m.backends
        for t, a, g in (
            ("2.3", "0.6", "2024.12"),
            ("2.6", "0.6", "2026.11"),
            ("2.11", "0.17", "2026.12"),
        )
    )
    assert len(chosen) == len(downstream) - len(ran) and not any(
        c.group is None for c in cells if c.id in chosen
    )
    assert chosen["torch2.5-ao0.8-ds2024.12-cpu"] == {
        "tests/downstream/test_peer_suites.py": "--peer-suites first: group 2024.12's peer suites"
        " run in torch2.3-ao0.6-ds2024.12-cpu"
    }
    # the run's own order decides: a run narrowed to later cells runs them in its first
    later = [c for c in downstream if c.torch.label == "2.5" and c.backend.name == "cpu"]
    assert sorted(run.peer_deselection(m, later, "first")) == [c.id for c in later[1:]]
    with pytest.raises(ValueError, match="--peer-suites must be one of"):
        run.peer_deselection(m, cells, "some")


# --- `--downstream-extended newest`: one cell of today's stack per group in CI ---------------


def test_newest_keeps_one_downstream_cell_of_extended_releases_per_group_and_backend() -> None:
    from packaging.version import Version

    m = spec.load()
    every = selection.select(m, ["core", "downstream"], probe_host=False).cells
    kept = selection.select(
        m, ["core", "downstream"], probe_host=False, downstream_extended="newest"
    ).cells
    beyond = [c for c in every if c.group and "extended" in (c.torch.tier, c.torchao.tier)]
    assert beyond  # the 2026.12 group: torch 2.11-2.15 with TorchAO 0.17/0.18
    # the oracle: per group and backend, the greatest (torch, TorchAO) by packaging's versions
    expected = set()
    for where in {(c.group, c.backend.name) for c in beyond}:
        mine = [c for c in beyond if (c.group, c.backend.name) == where]
        expected.add(max(mine, key=lambda c: (Version(c.torch.pin), Version(c.torchao.pin))).id)
    assert {c.id for c in kept if c in beyond} == expected
    assert "torch2.15-ao0.18-ds2026.12-cpu" in expected
    assert [c for c in every if c not in beyond] == [c for c in kept if c not in beyond]
    assert len(every) - len(kept) == len(beyond) - len(expected) > 0
    with pytest.raises(ValueError, match="--downstream-extended must be one of"):
        selection.select(m, ["downstream"], probe_host=False, downstream_extended="some")


def test_the_option_reaches_the_runner_and_ci_uses_first() -> None:
    noxfile = (ROOT / "noxfile.py").read_text()
    assert "peer_suites=args.peer_suites" in noxfile
    assert "downstream_extended=args.downstream_extended" in noxfile
    ci = " ".join((ROOT / ".ci" / "run").read_text().replace("\\\n", " ").split())
    assert (
        "stage matrix nox -s matrix -- --tier core --tier downstream --peer-suites first"
        " --downstream-extended newest ||" in ci
    )


# --- the gate: tests the run deselected are not missing --------------------------------------

FIRST, OTHER = "torch2.3-ao0.6-ds2024.12-cpu", "torch2.3-ao0.7-ds2024.12-cpu"
PEER = "tests/downstream/test_peer_suites.py"
PEER_TESTS = {
    f"{PEER}::test_accelerate_suite": "passed",
    f"{PEER}::test_safetensors_suite": "passed",
}


def downstream_cell(
    reports: Path, cid: str, tests: dict[str, str], deselected: dict[str, str] | None = None
) -> dict[str, str]:
    torch, ao = cid.removeprefix("torch").split("-")[:2]
    result = CellResult(
        cid, "downstream", "3.11", torch, ao.removeprefix("ao"), "cpu", [], "2024.12"
    )
    result.tests, result.deselected = tests, deselected or {}
    result.write(paths.cell_dir(reports, cid))
    return {
        "id": cid,
        "tier": "downstream",
        "python": "3.11",
        "torch": torch,
        "torchao": ao.removeprefix("ao"),
        "backend": "cpu",
        "group": "2024.12",
        "pins": [],
    }


@pytest.mark.parametrize("recorded", [True, False])
def test_the_gate_does_not_miss_tests_the_run_deselected(tmp_path: Path, recorded: bool) -> None:
    own = {"tests/downstream/test_accelerate.py::test_x": "passed"}
    cells = [
        downstream_cell(tmp_path / "base", cid, {**own, **PEER_TESTS}) for cid in (FIRST, OTHER)
    ]
    want = verdict.Expected(cells, "this test")
    why = {PEER: f"--peer-suites first: group 2024.12's peer suites run in {FIRST}"}
    downstream_cell(tmp_path / "now", FIRST, {**own, **PEER_TESTS})
    downstream_cell(tmp_path / "now", OTHER, own, why if recorded else None)
    result = gate.compare(
        gate.snapshot(tmp_path / "base", want), gate.snapshot(tmp_path / "now", want)
    )
    if recorded:
        assert result["ok"] and result["rows"] == [] and result["deselected"] == 2
        assert "2 tests of the baseline were deselected" in gate.render_markdown(result)
    else:  # the same absence without the record's word for it: lost
        assert not result["ok"] and result["deselected"] == 0
        assert {(r["class"], r["test"]) for r in result["rows"]} == {
            ("missing", f"{PEER}::test_accelerate_suite"),
            ("missing", f"{PEER}::test_safetensors_suite"),
            ("fewer tests", "*"),
        }


def test_a_deselection_hides_only_the_tests_under_its_path(tmp_path: Path) -> None:
    own = {"tests/downstream/test_accelerate.py::test_x": "passed"}
    (base,) = [downstream_cell(tmp_path / "base", OTHER, {**own, **PEER_TESTS})]
    want = verdict.Expected([base], "this test")
    downstream_cell(tmp_path / "now", OTHER, {}, {PEER: "ran elsewhere"})
    result = gate.compare(
        gate.snapshot(tmp_path / "base", want), gate.snapshot(tmp_path / "now", want)
    )
    assert [(r["class"], r["test"], r["before"], r["after"]) for r in result["rows"]] == [
        ("missing", "tests/downstream/test_accelerate.py::test_x", "passed", "absent"),
        ("fewer tests", "*", "1 tests", "0 tests"),
    ]
    assert not result["ok"] and result["deselected"] == 2


# --- the report ------------------------------------------------------------------------------


def suite_entry(release: str, **more: object) -> dict[str, object]:
    counts = {"passed": 58, "skipped": 38}
    return {
        "release": release,
        "runs": {
            "plain": {"counts": counts, "seconds": 13.2},
            "compat": {"counts": more.pop("compat_counts", counts), "seconds": 14.0},
        },
        "regressions": [],
        "fixed": [],
        "lifted": [],
        "stale": [],
        "skips": {"t::gpu1": "test requires a GPU", "t::gpu2": "test requires a GPU"},
        "ok": True,
        "error": "",
        **more,
    }


def test_the_report_shows_each_cells_peer_suites_and_where_they_ran(tmp_path: Path) -> None:
    from tests.common.harness.report_runs import Run

    r = Run(tmp_path / "reports")
    lifted = {
        "test": "tests/test_pt_model.py::TorchModelTestCase::test_failure",
        "reason": "asserts the shared-tensor refusal",
    }
    r.cell(
        "2.3",
        "0.6",
        "cpu",
        "passed",
        "2024.12",
        peers={
            "accelerate": suite_entry("1.2.1"),
            "safetensors": suite_entry("0.8.0", lifted=[lifted]),
        },
    )
    r.cell("2.3", "0.7", "cpu", "passed", "2024.12", deselected={PEER: f"run in {FIRST}"})
    regression = {
        "test": "tests/test_hooks.py::HooksModelTester::test_align_devices_as_cpu_offload",
        "message": "TensorMoveError: cannot move | meta",
    }
    r.cell(
        "2.6",
        "0.8",
        "cpu",
        "failed",
        "2026.11",
        peers={
            "accelerate": suite_entry(
                "1.15.0",
                compat_counts={"passed": 57, "failed": 1, "skipped": 38},
                regressions=[regression],
                fixed=[{"test": "tests/test_hooks.py::test_now_works"}],
                ok=False,
            )
        },
    )
    data = r.write()
    (grid,) = data["downstream"]
    peers = grid["peers"]
    assert [(p["cell"], p["suite"], p["release"], p["colour"]) for p in peers["rows"]] == [
        (FIRST, "accelerate", "1.2.1", "pass"),
        (FIRST, "safetensors", "0.8.0", "pass"),
        ("torch2.6-ao0.8-ds2026.11-cpu", "accelerate", "1.15.0", "fail"),
    ]
    assert peers["groups"][0] == {
        "group": "2024.12",
        "ran": [FIRST],
        "deselected": [OTHER],
        "why": f"run in {FIRST}",
        "neither": [],
    }
    md = (r.reports / "matrix.md").read_text()
    assert "### The peers' own test suites on cpu" in md
    assert f"- group 2024.12: ran in {FIRST}; deselected in 1 other cell(s) (run in {FIRST})" in md
    assert (
        "| ✅ 2.3 · 0.6 (2024.12) | safetensors | 0.8.0 | 58 passed, 38 skipped (13 s)"
        " | 58 passed, 38 skipped (14 s) | — | — | 1 | 2 |"
    ) in md
    assert (
        "| ❌ 2.6 · 0.8 (2026.11) | accelerate | 1.15.0 | 58 passed, 38 skipped (13 s)"
        " | 57 passed, 1 failed, 38 skipped (14 s) | tests/test_hooks.py::HooksModelTester::"
        "test_align_devices_as_cpu_offload: TensorMoveError: cannot move / meta |"
        " `tests/test_hooks.py::test_now_works` | — | 2 |"
    ) in md
    assert "- safetensors 0.8.0 `tests/test_pt_model.py::TorchModelTestCase::test_failure`:" in md
    assert "- accelerate 1.2.1: test requires a GPU (2)" in md
    page = (r.reports / "matrix.html").read_text()
    assert f'data-cell="{FIRST}" data-suite="safetensors"' in page
    assert "<code>tests/test_hooks.py::test_now_works</code>" in page
    assert 'data-group="2024.12"' in page and "asserts the shared-tensor refusal" in page


def test_a_suite_that_could_not_be_judged_shows_its_error(tmp_path: Path) -> None:
    from tests.common.harness.report_runs import Run

    r = Run(tmp_path / "reports")
    broken = {"release": "0.8.0", "runs": {}, "ok": False, "error": "the index gives no sdist"}
    r.cell("2.6", "0.8", "cpu", "failed", "2026.11", peers={"safetensors": broken})
    data = r.write()
    (row,) = data["downstream"][0]["peers"]["rows"]
    assert row["colour"] == "fail" and row["plain"] == "did not run"
    assert "| error: the index gives no sdist |" in (r.reports / "matrix.md").read_text()


def test_records_without_peer_suites_show_no_section(tmp_path: Path) -> None:
    from tests.common.harness.report_runs import Run

    r = Run(tmp_path / "reports")
    r.cell("2.6", "0.8", "cpu", "passed", "2026.11")
    data = r.write()
    assert data["downstream"] == [] or data["downstream"][0]["peers"]["rows"] == []
    assert "peers' own test suites" not in (r.reports / "matrix.md").read_text()
