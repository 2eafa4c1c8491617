"""History across runs, on recorded runs: six real runs of two cells (torch 2.6 and 2.5 with
TorchAO 0.8, cpu), cut down by fixtures/history/make_fixtures.py (fixtures/history/README.md says
how each run was made):

r1 the pins · r2 safetensors 0.4.5 as the upstream candidate · r3 the pins · r4 the pins on a
runner whose temporary folder is gone · r5 the pins · r6 the same fault as r4 (the gate's run).
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.ci import gate
from harness.report import history, screenshot
from harness.report import pages as report

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "history"
RUNS = [FIXTURES / f"r{i}" for i in range(1, 7)]
CELLS = ("torch2.5-ao0.8-cpu", "torch2.6-ao0.8-cpu")
ROUND_TRIP = "tests.test_sharing::test_save_round_trip_is_bit_identical[cpu]"


def raw(run: Path) -> dict[str, Any]:
    return dict(json.loads((run / "matrix.json").read_text()))


def failing(run: Path, cell: str) -> set[str]:
    """The oracle: the failing tests of a run's cell, read straight from its matrix.json."""
    return {history.junit_key(f["nodeid"]) for f in raw(run)["cells"][cell]["failures"]}


def test_the_recorded_runs_are_what_the_readme_says() -> None:
    for run in RUNS:
        cells = raw(run)["cells"]
        assert set(cells) == set(CELLS)
        expect = "0.4.5" if run.name == "r2" else "0.8.0"
        assert {c["installed"]["safetensors"] for c in cells.values()} == {expect}
    assert all(ROUND_TRIP in failing(RUNS[1], c) for c in CELLS)
    assert all(not failing(RUNS[i], c) for i in (0, 2, 4) for c in CELLS)
    assert all(failing(RUNS[3], c) == failing(RUNS[5], c) != set() for c in CELLS)
    installed = {
        json.dumps(raw(r)["cells"][c]["installed"], sort_keys=True)
        for r in RUNS[2:]
        for c in CELLS[:1]
    }
    assert len(installed) == 1, "r3-r6 ran with the same installed versions"


def test_version_changes_and_flaky_flips_are_told_apart() -> None:
    runs = history.load(RUNS[:5])
    assert [r.label for r in runs] == ["r1", "r2", "r3", "r4", "r5"]
    changes = history.changes(runs)
    # the oracle: every flip between consecutive runs, from the raw files
    expected = set()
    for before, after in itertools.pairwise(RUNS[:5]):
        for cell in CELLS:
            for test in failing(before, cell) ^ failing(after, cell):
                expected.add((cell, test, before.name, after.name))
    assert {(c["cell"], c["test"], c["before_run"], c["after_run"]) for c in changes} == expected
    for c in changes:
        if c["before_run"] in ("r1", "r2") and c["after_run"] in ("r2", "r3"):
            assert not c["flaky"]
            assert c["test"] == ROUND_TRIP
            assert ["safetensors", "0.8.0", "0.4.5"] in c["versions"] or [
                "safetensors",
                "0.4.5",
                "0.8.0",
            ] in c["versions"]
            assert c["cause"].startswith("changed with ")
            assert (
                "safetensors 0.8.0 → 0.4.5" in c["cause"]
                or "safetensors 0.4.5 → 0.8.0" in c["cause"]
            )
        else:  # r3 → r4 → r5: same versions, the runner's temporary folder went and came back
            assert c["flaky"] and c["versions"] == []
            assert c["cause"] == "flaky across runs (same installed versions)"
    assert changes == sorted(changes, key=lambda c: c["generated"], reverse=True)  # newest first
    flaky = history.flaky_tests(runs)
    assert flaky and all(labels == ["r3", "r4", "r5"] for labels in flaky.values())
    assert {key for key in flaky} == {(c, t) for c in CELLS for t in failing(RUNS[3], c)}


def test_timelines_and_strips() -> None:
    runs = history.load(RUNS[:5])
    lines = history.timelines(runs)
    for cell in CELLS:
        assert lines[cell][ROUND_TRIP] == ["ok", "failed", "ok", "ok", "ok"]
        for test in failing(RUNS[3], cell):
            assert lines[cell][test][3] in ("failed", "error")
            assert lines[cell][test][2] == lines[cell][test][4] == "ok"
    strips = history.strips(runs)
    for cell in CELLS:
        assert [s["colour"] for s in strips[cell] if s] == [
            raw(r)["cells"][cell]["colour"] for r in RUNS[:5]
        ]
        assert "safetensors 0.4.5" in strips[cell][1]["title"]  # type: ignore[index]


def test_a_cell_missing_from_a_run_leaves_a_gap(tmp_path: Path) -> None:
    gap = tmp_path / "gap"
    gap.mkdir()
    doc = raw(RUNS[2])
    del doc["cells"][CELLS[0]]
    (gap / "matrix.json").write_text(json.dumps(doc))
    runs = history.load([RUNS[1], gap, RUNS[3]])
    assert history.strips(runs)[CELLS[0]][1] is None
    row = history.timelines(runs)[CELLS[0]][ROUND_TRIP]
    assert row == ["failed", None, "ok"]
    # the flip is still seen, across the gap
    assert any(
        c["cell"] == CELLS[0]
        and c["test"] == ROUND_TRIP
        and (c["before_run"], c["after_run"]) == ("r2", "r4")
        for c in history.changes(runs)
    )


def test_refuses_a_folder_without_a_matrix_json(tmp_path: Path) -> None:
    with pytest.raises(history.HistoryError, match=r"no readable matrix\.json"):
        history.load([tmp_path])
    (tmp_path / "matrix.json").write_text('{"cells": [], "generated": "x"}')
    with pytest.raises(history.HistoryError, match=r"not a matrix\.json"):
        history.load([tmp_path])
    (tmp_path / "matrix.json").write_text('{"cells": {"a": {}}, "generated": "x"}')
    with pytest.raises(history.HistoryError, match="cell 'a' has no status"):
        history.load([tmp_path])


def test_junit_and_pytest_ids_are_one_key() -> None:
    assert (
        history.junit_key("tests/test_sharing.py::test_x[cpu]") == "tests.test_sharing::test_x[cpu]"
    )
    assert history.junit_key("tests/a/test_b.py::TestC::test_d") == "tests.a.test_b.TestC::test_d"
    assert history.junit_key("tests.test_sharing::test_x[cpu]") == "tests.test_sharing::test_x[cpu]"
    assert history.junit_key("tests/test_x.py") == "tests/test_x.py"


# --- the report ------------------------------------------------------------------------------


def write_manifest(reports: Path, cells: dict[str, dict[str, Any]]) -> None:
    """The run's manifest (run.json) naming exactly these cells, as `nox -s matrix` writes it."""
    keys = ("tier", "torch", "torchao", "backend")
    entries = [
        {"id": cid, **{k: cell[k] for k in keys}, "python": cell.get("python", "3.11"), "pins": []}
        for cid, cell in cells.items()
    ]
    (reports / "run.json").write_text(json.dumps({"state": "finished", "cells": entries}))


def current_reports(tmp_path: Path, run: Path) -> Path:
    """A reports folder holding ``run``'s cells as cell.json files, as a run leaves them."""
    reports = tmp_path / "reports"
    cells = raw(run)["cells"]
    for cid, cell in cells.items():
        (reports / "cells" / cid).mkdir(parents=True)
        (reports / "cells" / cid / "cell.json").write_text(json.dumps(cell))
    write_manifest(reports, cells)
    return reports


def test_report_gains_strips_and_the_recently_changed_list(tmp_path: Path) -> None:
    reports = current_reports(tmp_path, RUNS[4])
    assert report.main(["--reports", str(reports), "--history", *map(str, RUNS[:4])]) == 0
    data = json.loads((reports / "matrix.json").read_text())
    assert [r["label"] for r in data["history"]["runs"]] == [
        "r1",
        "r2",
        "r3",
        "r4",
        history.CURRENT,
    ]
    html = (reports / "matrix.html").read_text()
    for cell in CELLS:
        assert f'data-history="{cell}"' in html
    for i, run in enumerate(RUNS[:4]):  # each strip square is that run's verdict of the cell
        colours = [raw(run)["cells"][c]["colour"] for c in CELLS]
        for colour in set(colours):
            assert html.count(f'<span class="{colour}" title="r{i + 1} (') == colours.count(colour)
    assert 'id="recently-changed"' in html and "flaky across runs (same installed versions)" in html
    assert "changed with safetensors 0.8.0 → 0.4.5, candidate safetensors==0.4.5 added" in html
    md = (reports / "matrix.md").read_text()
    assert "## Recently changed across 5 runs" in md
    for cell in CELLS:
        assert (
            f"- r1 → r2, {cell}: ok → failed — changed with safetensors 0.8.0 → 0.4.5, candidate "
            f"safetensors==0.4.5 added: `{ROUND_TRIP}`"
        ) in md
        assert (
            f"- r3 → r4, {cell}: ok → error — ⚠️ flaky across runs (same installed versions): `"
            in md
        )
    # without --history the report is as before: no strip, no list
    assert report.main(["--reports", str(reports)]) == 0
    assert "data-history" not in (reports / "matrix.html").read_text()
    assert "Recently changed" not in (reports / "matrix.md").read_text()
    assert "history" not in json.loads((reports / "matrix.json").read_text())


def test_report_refuses_a_bad_history_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = current_reports(tmp_path, RUNS[4])
    assert report.main(["--reports", str(reports), "--history", str(tmp_path / "nowhere")]) == 2
    assert "--history:" in capsys.readouterr().err


@pytest.mark.skipif(
    screenshot.chromium() is None, reason="no chromium on this runner (.ci/run installs Debian's)"
)
def test_history_view_in_a_headless_browser(tmp_path: Path) -> None:
    reports = current_reports(tmp_path, RUNS[5])
    assert report.main(["--reports", str(reports), "--history", *map(str, RUNS[:5])]) == 0
    page = (reports / "matrix.html").resolve()
    dom = screenshot.browser(["--dump-dom", page.as_uri()], screenshot.WIDTH, screenshot.HEIGHT)
    for cell in CELLS:
        assert f'data-history="{cell}"' in dom
    flips = history.changes(history.load(RUNS))
    assert dom.count("data-change=") == len(
        {(c["before_run"], c["after_run"], c["cell"], c["after"]) for c in flips}
    )
    assert screenshot.overflow(screenshot.layout(page.read_text())) == []  # fits 1400 px
    shot = tmp_path / "history.png"  # the README's reports/screenshots/history.png was taken so
    screenshot.browser([f"--screenshot={shot}", page.as_uri()], screenshot.WIDTH, 1100)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


# --- the gate --------------------------------------------------------------------------------


def snapshots() -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        json.loads((FIXTURES / "gate-baseline.json").read_text()),
        json.loads((FIXTURES / "gate-current.json").read_text()),
    )


def test_gate_reports_a_regression_in_a_test_flaky_across_runs_as_flaky() -> None:
    baseline, current = snapshots()
    plain = gate.compare(baseline, current)
    regressions = [r for r in plain["rows"] if r["class"] == "regression"]
    assert regressions and not plain["ok"]
    result = history.reclassify(gate.compare(baseline, current), history.load(RUNS[:5]))
    assert len(result["rows"]) == len(plain["rows"]), "no row is dropped"
    for row in result["rows"]:
        if (row["cell"], row["test"]) in {(r["cell"], r["test"]) for r in regressions}:
            assert row["class"] == "flaky" and not row["fatal"]
            assert row["why"] == "flaky across runs: r3, r4, r5"
    assert result["ok"] and result["summary"]["flaky"] >= len(regressions)
    assert result["history_runs"] == ["r1", "r2", "r3", "r4", "r5"]


def test_gate_keeps_a_regression_whose_test_was_never_flaky_before() -> None:
    baseline, current = snapshots()
    # up to r3 those tests only ever passed: the failures of r6 are regressions
    result = history.reclassify(gate.compare(baseline, current), history.load(RUNS[:3]))
    assert not result["ok"]
    assert not any(r["why"].startswith("flaky across runs") for r in result["rows"])
    assert (
        result["summary"]["regression"]
        == len([r for r in result["rows"] if r["class"] == "regression"])
        > 0
    )


# how pytest-reportlog records each final outcome (the phase, its outcome, an xfail mark)
REPORTED = {
    "passed": ("call", "passed", False),
    "failed": ("call", "failed", False),
    "error": ("setup", "failed", False),
    "skipped": ("setup", "skipped", False),
    "xfailed": ("call", "skipped", True),
    "xpassed": ("call", "passed", True),
}


def report_line(nodeid: str, outcome: str) -> dict[str, Any]:
    when, reported, xfail = REPORTED[outcome]
    line = {"$report_type": "TestReport", "nodeid": nodeid, "when": when, "outcome": reported}
    return {**line, "wasxfail": "expected"} if xfail else line


def test_gate_cli_with_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``harness.ci.gate check --history`` end to end, on a current run rebuilt as cell folders."""
    baseline, current = snapshots()
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps(baseline))
    source = tmp_path / "current"
    for cid, cell in current["cells"].items():
        out = source / "cells" / cid
        out.mkdir(parents=True)
        (out / "cell.json").write_text(json.dumps({"id": cid, **cell}))
        lines = [report_line(t, o) for t, o in cell["tests"].items()]
        lines.append({"$report_type": "SessionFinish", "exitstatus": 1})
        (out / "log.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_manifest(source, current["cells"])
    args = ["check", "--from", str(source), "--baseline", str(base)]
    assert gate.main(args) == 1
    assert gate.main([*args, "--history", *map(str, RUNS[:5])]) == 0
    written = json.loads((source / "gate.json").read_text())
    assert {r["class"] for r in written["rows"]} <= {"flaky", "new", "fixed"}
    assert "flaky across runs: r3, r4, r5" in json.dumps(written)
    assert gate.main([*args, "--history", str(tmp_path / "nowhere")]) == 2
    shutil.rmtree(source)
    capsys.readouterr()
