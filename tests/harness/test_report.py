"""The matrix report: the cells that should have run, colours, absent backends, Markdown
limits, node ids, and the HTML page in a real browser at 1400 px."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cells.record import CellResult
from harness.ci import trigger
from harness.matrix import paths, spec
from harness.report import pages as report
from harness.report import screenshot
from tests.common.harness.report_runs import Run

ROOT = Path(__file__).resolve().parents[2]
needs_chromium = pytest.mark.skipif(
    screenshot.chromium() is None, reason="no chromium on this runner (.ci/run installs Debian's)"
)


FAILURES = [
    {"nodeid": "tests/test_a.py::test_bad[cpu]", "outcome": "failed", "message": "assert 1 == 2"},
    {"nodeid": "tests/test_a.py::test_worse", "outcome": "error", "message": "<b>not bold</b>"},
]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    r = Run(tmp_path / "reports")
    r.cell("2.3", "0.6", "cpu", "passed", counts={"passed": 40, "xfailed": 0})
    r.cell("2.3", "0.7", "cpu", "passed", counts={"passed": 38, "xfailed": 2})
    r.cell("2.4", "0.6", "cpu", "failed", counts={"passed": 38, "failed": 1}, failures=FAILURES)
    r.cell(
        "2.4",
        "0.7",
        "cpu",
        "crashed",
        reason="the interpreter died (SIGSEGV)",
        log_tail="Fatal Python error: Segmentation fault",
    )
    r.cell("2.10", "0.6", "cpu", "timeout", reason="tests ran past the cell's 10 s")
    r.cell("2.10", "0.7", "cpu", "no-record")  # expected, never written
    for t in ("2.3", "2.4"):
        r.cell(t, "0.6", "cuda", "skipped", reason="no cuda on this runner")
    return r


def test_colours_totals_no_record_and_version_order(run: Run) -> None:
    data = run.write()
    cells = data["cells"]
    assert {cid: c["colour"] for cid, c in cells.items()} == {
        "torch2.3-ao0.6-cpu": "pass",
        "torch2.3-ao0.7-cpu": "xfail",
        "torch2.4-ao0.6-cpu": "fail",
        "torch2.4-ao0.7-cpu": "error",
        "torch2.10-ao0.6-cpu": "error",
        "torch2.10-ao0.7-cpu": "error",
        "torch2.3-ao0.6-cuda": "skip",
        "torch2.4-ao0.6-cuda": "skip",
    }
    assert cells["torch2.10-ao0.7-cpu"]["status"] == "no-record"
    (grid,) = data["grids"]  # a grid only for the backend that ran
    assert grid["backend"] == "cpu"
    assert [row["torch"] for row in grid["rows"]] == ["2.3", "2.4", "2.10"]  # numeric order
    assert data["absent"] == [
        {"backend": "cuda", "reasons": ["no cuda on this runner"], "cells": 2}
    ]
    assert data["totals"]["bad_cells"] == 4
    saved = json.loads((run.reports / "matrix.json").read_text())
    assert saved == data and saved["totals"]["cells"] == 8


def test_a_record_outside_the_run_is_left_out_and_a_foreign_one_is_no_record(run: Run) -> None:
    stray = CellResult("torch9.9-ao0.1-cpu", "core", "3.11", "9.9", "0.1", "cpu", [])
    stray.write(paths.cell_dir(run.reports, stray.id))
    foreign = paths.cell_dir(run.reports, "torch2.10-ao0.7-cpu") / "cell.json"
    foreign.parent.mkdir(parents=True)
    foreign.write_text(json.dumps({"id": "torch2.3-ao0.6-cpu", "status": "passed"}))
    cells = run.write()["cells"]
    assert "torch9.9-ao0.1-cpu" not in cells
    assert cells["torch2.10-ao0.7-cpu"]["status"] == "no-record"
    assert "not a record of this cell" in cells["torch2.10-ao0.7-cpu"]["reason"]


def test_markdown_names_node_ids_and_absent_backends_in_one_line(run: Run) -> None:
    run.write()
    md = (run.reports / "matrix.md").read_text()
    assert "## cpu" in md and "## cuda" not in md
    assert "- **cuda**: no cuda on this runner — 2 cells skipped" in md
    assert "❌ failed: 38 passed, 1 failed" in md
    assert "💥 crashed: the interpreter died (SIGSEGV)" in md
    assert "💥 no-record: no record: the cell should have run" in md
    assert "`tests/test_a.py::test_bad[cpu]` — failed: assert 1 == 2" in md


def test_markdown_is_truncated_with_a_note(run: Run) -> None:
    data = report.canonical(
        report.build(report.load_cells(run.reports, run.expected()), run.expected())
    )
    full = report.render_markdown(data)
    short = report.render_markdown(data, limit=600)
    assert len(short.encode()) <= 600 < len(full.encode())
    assert "truncated to fit the step summary" in short


def test_a_cut_summary_leaves_room_for_the_judged_line_in_the_same_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """matrix.yml appends the judged line and matrix.md in one step: together under half of
    GitHub's 1 MiB (harness.matrix.limits)."""

    class Template:
        def render(self, **_: Any) -> str:
            return "| a row of the report |\n" * 100_000  # 2.2 MiB

    class Env:
        def get_template(self, _: str) -> Template:
            return Template()

    monkeypatch.setattr(report, "_env", Env)
    md = report.render_markdown({})
    assert "truncated to fit the step summary" in md
    judged = trigger.judged_line("o" * 39 + "/" + "n" * 100, "9" * 10, "f" * 40, "https://x")
    assert len((judged + "\n\n" + md).encode()) <= report.STEP_SUMMARY_LIMIT - 1024


def test_properties_stopped_by_the_time_budget_are_counted_on_both_pages(run: Run) -> None:
    cuts = {"t::a": "ran 10 of 10000 examples in 30 s (time budget 21 s)", "t::b": "ran 9"}
    run.cell("2.5", "0.6", "cpu", "passed", budget_cuts=cuts)
    data = run.write()
    assert (data["totals"]["budget_cuts"], data["totals"]["budget_cells"]) == (2, 1)
    said = "2 properties in 1 cells stopped at their time budget"
    assert said in (run.reports / "matrix.md").read_text()
    assert said in (run.reports / "matrix.html").read_text()


def test_cells_on_another_hypothesis_profile_are_counted_on_both_pages(run: Run) -> None:
    run.cell("2.5", "0.6", "cpu", "passed", hypothesis_profile="corner")
    run.cell("2.5", "0.7", "cpu", "passed", hypothesis_profile="ci")
    data = run.write()
    assert data["totals"]["profiles"] == {"corner": 1}
    for page in ("matrix.md", "matrix.html"):
        text = (run.reports / page).read_text()
        assert "corner</code> in 1 cells" in text or "`corner` in 1 cells" in text


def test_a_run_without_budget_cuts_says_nothing_of_a_budget(run: Run) -> None:
    run.write()
    assert "time budget" not in (run.reports / "matrix.md").read_text()


def test_html_escapes_what_tests_print(run: Run) -> None:
    run.write()
    page = (run.reports / "matrix.html").read_text()
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page


def test_a_saved_report_rerenders_to_the_same_page(run: Run) -> None:
    data = run.write()
    again = report.render_html(json.loads((run.reports / "matrix.json").read_text()))
    assert again == (run.reports / "matrix.html").read_text() == report.render_html(data)


def test_negative_controls_one_row_per_cell(tmp_path: Path) -> None:
    r = Run(tmp_path / "reports")
    bites = {
        "params_quantized_weight_moves_intact": "xfailed",
        "device_forms_mean_one_device": "xfailed",
    }
    r.cell(
        "2.3", "0.6", "cpu", "passed",
        controls={**bites, "params_quantized_weight_moves_intact": "passed"},
    )  # fmt: skip
    r.cell(
        "2.3", "0.8", "cpu", "failed", controls={**bites, "device_forms_mean_one_device": "failed"}
    )
    r.cell("2.3", "0.7", "cpu", "passed", controls=bites)
    data = r.write()
    (table,) = data["controls"]
    assert table["cells"] == ["torch2.3-ao0.6-cpu", "torch2.3-ao0.7-cpu", "torch2.3-ao0.8-cpu"]
    assert table["names"] == [
        "device_forms_mean_one_device",
        "params_quantized_weight_moves_intact",
    ]
    md = (r.reports / "matrix.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| 2.3 / 0.8"))
    assert row.count("🦷 fails as declared") == 1 and "❌ did not fail where declared" in row
    html = (r.reports / "matrix.html").read_text()
    assert (
        'data-control="params_quantized_weight_moves_intact" data-cell="torch2.3-ao0.6-cpu-control"'
        ' data-outcome="passed"' in html
    )


def test_negative_control_rows_name_the_python_where_corners_share_a_pair(tmp_path: Path) -> None:
    """issue 44: three cells of torch 2.3 x TorchAO 0.8 (the default Python and two corners)
    read as three different rows; a pair with one cell keeps its short label."""
    r = Run(tmp_path / "reports")
    bites = {"device_forms_mean_one_device": "xfailed"}
    for python in ("3.11", "3.10", "3.12"):
        r.cell("2.3", "0.8", "cpu", "passed", python=python, controls=bites)
    r.cell("2.4", "0.8", "cpu", "passed", controls=bites)
    data = r.write()
    (table,) = data["controls"]
    labels = [table["labels"][cid] for cid in table["cells"]]
    assert sorted(labels) == [
        "2.3 / 0.8 · Python 3.10",
        "2.3 / 0.8 · Python 3.11",
        "2.3 / 0.8 · Python 3.12",
        "2.4 / 0.8",
    ]
    md = (r.reports / "matrix.md").read_text()
    rows = [line.split(" |")[0] for line in md.splitlines() if line.startswith("| 2.")]
    assert sorted(rows) == sorted(f"| {label}" for label in labels)
    html = (r.reports / "matrix.html").read_text()
    assert all(f"<th>{label}</th>" in html for label in labels)


def test_drift_table_marks_changes_between_neighbouring_versions(tmp_path: Path) -> None:
    r = Run(tmp_path / "reports")
    seen = {
        ("2.4", "0.6"): ("device('cuda', index=0)", ["layout_tensor"]),
        ("2.5", "0.6"): ("raises RuntimeError", ["layout_tensor"]),
        ("2.5", "0.7"): ("raises RuntimeError", ["tensor_impl"]),
        ("2.10", "0.7"): ("device('cuda', index=0)", ["tensor_impl"]),
    }
    for (t, ao), (dev, fields) in seen.items():
        cid = r.cell(t, ao, "cpu", "passed")
        probes = {
            "torch.device(0)": {"value": dev, "axis": "torch", "about": ""},
            "AQT fields": {"value": repr(fields), "axis": "torchao", "about": ""},
        }
        (paths.cell_dir(r.reports, cid) / "drift.json").write_text(json.dumps(probes))
    reason = "B1 https://example.invalid/1"
    tracker = {
        "tests/compat/upstream/test_trackers.py::test_b1": {"outcome": "xfailed", "reason": reason}
    }
    r.cell("2.3", "0.6", "cpu", "passed", trackers=tracker)
    fixed = {
        "tests/compat/upstream/test_trackers.py::test_b1": {"outcome": "fixed", "reason": reason}
    }
    garbage = r.cell("2.3", "0.7", "cpu", "failed", trackers=fixed)
    (paths.cell_dir(r.reports, garbage) / "drift.json").write_text("{not json")
    data = r.write()
    (entry,) = data["drift"]
    by_torch = entry["axes"]["torch"]
    assert by_torch["columns"] == ["2.3", "2.4", "2.5", "2.10"]
    (row,) = by_torch["rows"]
    assert row["values"] == [
        None,
        "device('cuda', index=0)",
        "raises RuntimeError",
        "device('cuda', index=0)",
    ]
    assert row["changed"] == [False, False, True, True]
    assert entry["axes"]["torchao"]["rows"][0]["changed"] == [False, True]  # the rename
    (t,) = data["trackers"]
    assert t["fixed_in"] == ["torch2.3-ao0.7-cpu"]
    assert json.loads((r.reports / "drift.json").read_text())["trackers"][0]["test"] == t["test"]
    html = (r.reports / "matrix.html").read_text()
    assert 'class="changed" data-probe="torch.device(0)" data-version="2.5"' in html
    assert "FIXED in torch2.3-ao0.7-cpu" in (r.reports / "matrix.md").read_text()


def downstream_scenarios(i: int) -> dict[str, dict[str, str]]:
    """Every library with long scenario titles, each outcome somewhere."""
    outcomes = ("passed", "xfailed", "failed", "skipped")
    out = {}
    for n, library in enumerate(("accelerate", "diffusers", "open_clip", "peft", "safetensors", "transformers")):  # fmt: skip
        for route in ("alone", "compat"):
            out[f"tests/downstream/test_{library}.py::test_{route}"] = {
                "library": library,
                "scenario": f"a long scenario title of {library}: " + "v" * 120,
                "route": route,
                "link": "https://example.invalid/" + "u" * 80,
                "outcome": outcomes[(i + n + (route == "compat")) % 4],
            }
    return out


def wide_run(reports: Path) -> Run:
    """The widest report the matrix makes: both tiers' torch and TorchAO versions on one
    backend, long messages, long probe values, controls and trackers in every cell."""
    r = Run(reports)
    matrix = spec.load()
    long_message = "AssertionError: " + "x" * 400
    controls = {name: "xfailed" for name in ("device_forms_mean_one_device", "meta_detection_matches_placement", "params_quantized_weight_moves_intact", "sharing_overlap_groups_match_the_oracle")}  # fmt: skip
    for i, cell in enumerate(matrix.cells(tiers=spec.TIERS, backend="cpu")):
        status = ("passed", "failed", "crashed", "inconsistent")[i % 4]
        cid = r.cell(
            cell.torch.label,
            cell.torchao.label,
            "cpu",
            status,
            cell.group,
            scenarios=downstream_scenarios(i) if cell.group else {},
            counts={"passed": 230, "failed": 1, "xfailed": 9, "skipped": 4},
            reason=("inconsistent evidence: " + "junit.xml lists 0 tests " * 6) if i % 4 else "",
            log_tail="\n".join(f"line {n} " + "y" * 300 for n in range(5)),
            failures=[{"nodeid": "tests/compat/sharing/test_sharing.py::test_" + "z" * 150, "outcome": "failed", "message": long_message}],
            installed={"torch": cell.torch.pin, "torchao": cell.torchao.pin},
            torchao_cpp=True,
            controls=controls,
            trackers={"tests/compat/upstream/test_trackers.py::test_b1_overlap_sweep_keeps_a_running_max": {"outcome": "xfailed", "reason": "B1 " + "w" * 300}},
        )  # fmt: skip
        probes = {
            "torch.device(0)": {"value": f"device(type='cuda', index={i})" * 3, "axis": "torch"},
            "AQT fields": {"value": "['tensor_impl', 'block_size', 'shape', 'quant_min']", "axis": "torchao"},
        }  # fmt: skip
        (paths.cell_dir(reports, cid) / "drift.json").write_text(json.dumps(probes))
    for backend in ("cuda", "mps", "xpu"):
        r.cell(
            "2.6", "0.8", backend, "skipped", reason=f"no {backend} on this runner: `x` exited 1"
        )
    return r


@needs_chromium
@pytest.mark.parametrize("which", ["fixture", "widest"])
def test_the_page_fits_1400px_without_a_horizontal_scrollbar(
    run: Run, tmp_path: Path, which: str
) -> None:
    chosen = run if which == "fixture" else wide_run(tmp_path / "wide")
    data = chosen.write()
    page = (chosen.reports / "matrix.html").read_text()
    measured = screenshot.layout(page)
    assert measured["width"] == 1400
    assert screenshot.overflow(measured) == [], measured
    wider = page.replace("</body>", '<div style="width: 1500px">x</div></body>')
    assert screenshot.overflow(screenshot.layout(wider)) != []  # the check can fail
    dom = screenshot.browser(["--dump-dom", (chosen.reports / "matrix.html").as_uri()], 1400, 900)
    for cid, cell in data["cells"].items():
        if cell["status"] != "skipped":
            assert f'data-cell="{cid}"' in dom and f'data-status="{cell["status"]}"' in dom


# --- the README's screenshot --------------------------------------------------------------

SHOT = ROOT / "reports" / "screenshots"


def test_the_readme_screenshot_shows_the_current_page_of_a_real_run() -> None:
    png = (SHOT / "matrix.png").read_bytes()
    data_bytes = (SHOT / "matrix.json").read_bytes()
    width, _, text = screenshot.png_info(png)
    assert width == screenshot.WIDTH
    assert text[screenshot.DATA_KEY] == screenshot.sha256(data_bytes)
    data = json.loads(data_bytes)
    # re-rendered with today's templates: a changed page needs `nox -s screenshot` again
    page = report.render_html(data)
    assert text[screenshot.HTML_KEY] == screenshot.sha256(page.encode()), (
        "the report's page changed since the screenshot: run `nox -s matrix`, then"
        " `nox -s screenshot`, and commit reports/screenshots/"
    )
    # real cells of this matrix, from a `nox -s matrix` run (its manifest named them)
    assert data["run"]["expected"].startswith("the run's manifest")
    matrix = spec.load()
    known = {c.id: c for c in matrix.cells(tiers=spec.TIERS)}
    ran = [c for c in data["cells"].values() if c["status"] != "skipped"]
    assert set(data["cells"]) <= set(known) and len(ran) >= 12
    for cell in ran:
        pins = known[cell["id"]]
        for dist, pin in (("torch", pins.torch.pin), ("torchao", pins.torchao.pin)):
            found = cell["installed"][dist].split("+")[0]
            # a "latest" pin is the newest release at install time: any real version
            assert found == pin or (pin == spec.LATEST and found[:1].isdigit()), cell["id"]
        least = 20 if cell.get("group") else 100  # a downstream cell runs tests/downstream only
        assert cell["counts"]["passed"] >= least and cell["duration_s"] > 1


@needs_chromium
def test_the_readme_screenshot_fits_1400px() -> None:
    page = report.render_html(json.loads((SHOT / "matrix.json").read_text()))
    assert screenshot.overflow(screenshot.layout(page)) == []


def test_downstream_cells_have_their_own_grid(tmp_path: Path) -> None:
    """Library rows, one column per downstream cell: alone and through compat, each coloured;
    compat's own grid keeps only compat's cells; where a library breaks alone is listed."""
    r = Run(tmp_path / "reports")
    r.cell("2.5", "0.7", "cpu", "passed", counts={"passed": 3})
    about = {"library": "accelerate", "scenario": "cpu_offload", "link": "https://x.invalid/1"}
    for ao, alone in (("0.6", "passed"), ("0.7", "xfailed")):
        r.cell(
            "2.5",
            ao,
            "cpu",
            "passed",
            "2024.12",
            scenarios={
                "t::alone": {**about, "route": "alone", "outcome": alone},
                "t::compat": {**about, "route": "compat", "outcome": "passed"},
            },
        )
    data = r.write()
    assert [c for row in data["grids"][0]["rows"] for c in row["cells"]] == ["torch2.5-ao0.7-cpu"]
    (grid,) = data["downstream"]
    assert [c["id"] for c in grid["columns"]] == [
        "torch2.5-ao0.6-ds2024.12-cpu",
        "torch2.5-ao0.7-ds2024.12-cpu",
    ]
    (row,) = grid["rows"]
    works, breaks = (row["cells"][c["id"]] for c in grid["columns"])
    assert (works["alone"]["colour"], breaks["alone"]["colour"]) == ("pass", "warn")
    assert works["compat"]["colour"] == breaks["compat"]["colour"] == "pass"
    assert grid["breaks"] == [
        {
            "library": "accelerate",
            "scenario": "cpu_offload",
            "cells": ["torch2.5-ao0.7-ds2024.12-cpu"],
            "where": "torch2.5-ao0.7-ds2024.12-cpu",
        }
    ]
    md = (r.reports / "matrix.md").read_text()
    assert "| **accelerate** | ✅ / ✅ | 🟨 / ✅ |" in md
    page = (r.reports / "matrix.html").read_text()
    assert 'data-library="accelerate"' in page and 'data-route="alone"' in page


def test_a_python_corner_gets_its_row_under_its_torch_and_unpublished_pairs_are_listed() -> None:
    def card(cid: str, torch: str, ao: str, python: str) -> dict[str, Any]:
        return {
            "id": cid,
            "torch": torch,
            "torchao": ao,
            "python": python,
            "backend": "cpu",
            "status": "passed",
            "counts": {},
        }

    cells = [
        card("torch2.10-ao0.16-cpu", "2.10", "0.16", "3.11"),
        card("torch2.6-ao0.8-py3.13-cpu", "2.6", "0.8", "3.13"),
        card("torch2.6-ao0.8-cpu", "2.6", "0.8", "3.11"),
        card("torch2.6-ao0.8-py3.10-cpu", "2.6", "0.8", "3.10"),
        card("torch2.6-ao0.6-cpu", "2.6", "0.6", "3.11"),
    ]
    (grid,), absent = report.grids(cells)
    assert not absent
    assert [r["torch"] for r in grid["rows"]] == [
        "2.6",
        "2.6 · Python 3.10",
        "2.6 · Python 3.13",
        "2.10",
    ]
    assert grid["rows"][0]["by_ao"] == {"0.6": "torch2.6-ao0.6-cpu", "0.8": "torch2.6-ao0.8-cpu"}
    # the corner rows keep torch 2.6's columns: their 0.8 card stands under the 0.8 card
    assert [r["slots"] for r in grid["rows"][:3]] == [
        ["torch2.6-ao0.6-cpu", "torch2.6-ao0.8-cpu"],
        [None, "torch2.6-ao0.8-py3.10-cpu"],
        [None, "torch2.6-ao0.8-py3.13-cpu"],
    ]
    assert grid["rows"][3]["slots"] == ["torch2.10-ao0.16-cpu"]
    listed = report.not_published(
        [
            {"python": "3.14", "torch": "2.6", "torchao": "0.8", "lacking": "torch 2.6.0"},
            {"python": "3.13", "torch": "2.3", "torchao": "0.8", "lacking": "torch 2.3.1"},
            {"python": "3.14", "torch": "2.3", "torchao": "0.8", "lacking": "torch 2.3.1"},
        ]
    )
    assert listed == [
        {"torch": "2.3", "torchao": "0.8", "lacking": "torch 2.3.1", "pythons": ["3.13", "3.14"]},
        {"torch": "2.6", "torchao": "0.8", "lacking": "torch 2.6.0", "pythons": ["3.14"]},
    ]
