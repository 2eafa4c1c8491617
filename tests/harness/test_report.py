"""The matrix report: merge, colours, Markdown limits, and the HTML page in a real browser."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness import report
from harness.cell import CellResult

ROOT = Path(__file__).resolve().parents[2]
# the runner's own Chrome first (GitHub's ubuntu-24.04 image), then Chromium (.ci/browser)
CHROMIUM = next(
    filter(None, map(shutil.which, ("google-chrome", "google-chrome-stable", "chromium", "chromium-browser"))),
    None,
)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="{cid}" tests="4" failures="2" errors="0" skipped="0">
<testcase classname="tests.test_a" name="test_flaky"><failure message="first try">x</failure></testcase>
<testcase classname="tests.test_a" name="test_flaky"/>
<testcase classname="tests.test_a" name="test_bad"><failure message="assert 1 == 2">tb</failure></testcase>
<testcase classname="tests.test_a" name="test_ok"/>
</testsuite></testsuites>
"""


def make_cell(reports: Path, torch: str, ao: str, backend: str, status: str, **extra: Any) -> str:
    cid = f"torch{torch}-ao{ao}-{backend}"
    result = CellResult(
        cid, "core", "3.11", torch, ao, backend, [f"torch=={torch}.0"], status=status
    )
    for key, value in extra.items():
        setattr(result, key, value)
    out = reports / "cells" / cid
    out.mkdir(parents=True)
    result.write(out)
    return cid


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    r = tmp_path / "reports"
    make_cell(r, "2.3", "0.6", "cpu", "passed", counts={"passed": 40, "xfailed": 0})
    make_cell(r, "2.3", "0.7", "cpu", "passed", counts={"passed": 38, "xfailed": 2})
    failed = make_cell(r, "2.4", "0.6", "cpu", "failed", counts={"passed": 38, "failed": 1})
    (r / "cells" / failed / "junit.xml").write_text(JUNIT.format(cid=failed))
    make_cell(
        r,
        "2.4",
        "0.7",
        "cpu",
        "crashed",
        reason="the interpreter died (SIGSEGV)",
        log_tail="Fatal Python error: Segmentation fault",
    )
    make_cell(r, "2.10", "0.6", "cpu", "timeout", reason="tests ran past the cell's 10 s")
    for t in ("2.3", "2.4"):
        make_cell(
            r, t, "0.6", "cuda", "skipped", reason="no cuda on this runner: `nvidia-smi -L` failed"
        )
    return r


def test_merge_colours_totals_and_version_order(reports: Path) -> None:
    data = report.write(reports)
    cells = data["cells"]
    assert {cid: c["colour"] for cid, c in cells.items()} == {
        "torch2.3-ao0.6-cpu": "pass",
        "torch2.3-ao0.7-cpu": "xfail",
        "torch2.4-ao0.6-cpu": "fail",
        "torch2.4-ao0.7-cpu": "error",
        "torch2.10-ao0.6-cpu": "error",
        "torch2.3-ao0.6-cuda": "skip",
        "torch2.4-ao0.6-cuda": "skip",
    }
    assert data["grids"]["cpu"]["torch"] == ["2.3", "2.4", "2.10"]  # numeric, not lexical
    assert list(data["grids"]) == ["cpu", "cuda"]
    assert data["totals"]["bad_cells"] == 3
    # rerun duplicates collapse to the last attempt: test_flaky passed in the end
    failing = cells["torch2.4-ao0.6-cpu"]["failures"]
    assert [f["nodeid"] for f in failing] == ["tests.test_a::test_bad"]
    assert json.loads((reports / "matrix.json").read_text())["totals"]["cells"] == 7


def test_markdown_shows_every_cell_and_the_failures(reports: Path) -> None:
    report.write(reports)
    md = (reports / "matrix.md").read_text()
    assert "## cpu" in md and "## cuda" in md
    assert "❌ failed: 38 passed, 1 failed" in md
    assert "💥 crashed: the interpreter died (SIGSEGV)" in md
    assert "`tests.test_a::test_bad` — failed: assert 1 == 2" in md
    assert "Skipped: no cuda on this runner" in md


def test_markdown_is_truncated_with_a_note(reports: Path) -> None:
    data = report.build(report.load_cells(reports))
    full = report.render_markdown(data)
    short = report.render_markdown(data, limit=600)
    assert len(short.encode()) <= 600 < len(full.encode())
    assert "truncated to fit the step summary" in short


def _chromium(*args: str, tmp: Path) -> str:
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


@pytest.mark.skipif(
    CHROMIUM is None, reason="no Chrome or Chromium on this runner (.ci/browser installs one where apt has it)"
)
def test_html_page_in_a_headless_browser(reports: Path, tmp_path: Path) -> None:
    data = report.write(reports)
    page = (reports / "matrix.html").resolve().as_uri()
    dom = _chromium("--dump-dom", page, tmp=tmp_path)
    for cid, cell in data["cells"].items():
        assert f'data-cell="{cid}"' in dom
        assert f'data-status="{cell["status"]}"' in dom
    assert dom.count('class="grid"') == 2
    assert "1 failing" in dom and "Fatal Python error" in dom
    shot = ROOT / "reports" / "screenshots" / "matrix.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    _chromium(f"--screenshot={shot}", "--window-size=1400,900", page, tmp=tmp_path)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_negative_controls_are_a_separate_row(tmp_path: Path) -> None:
    r = tmp_path / "reports"
    bites = {
        "params_quantized_weight_moves_intact": "xfailed",
        "device_forms_mean_one_device": "xfailed",
    }
    make_cell(
        r,
        "2.3",
        "0.6",
        "cpu",
        "passed",
        controls={**bites, "params_quantized_weight_moves_intact": "passed"},
    )
    make_cell(r, "2.3", "0.7", "cpu", "passed", controls=bites)
    make_cell(
        r,
        "2.3",
        "0.8",
        "cpu",
        "failed",
        controls={**bites, "device_forms_mean_one_device": "failed"},
    )
    data = report.write(r)
    table = data["controls"]["cpu"]
    assert table["cells"] == ["torch2.3-ao0.6-cpu", "torch2.3-ao0.7-cpu", "torch2.3-ao0.8-cpu"]
    assert table["rows"]["params_quantized_weight_moves_intact"]["torch2.3-ao0.6-cpu"] == "passed"
    md = (r / "matrix.md").read_text()
    row = next(
        line for line in md.splitlines() if line.startswith("| device_forms_mean_one_device")
    )
    assert row.count("🦷 fails as declared") == 2 and "❌ did not fail where declared" in row
    html = (r / "matrix.html").read_text()
    assert (
        'data-control="params_quantized_weight_moves_intact" data-cell="torch2.3-ao0.6-cpu-control" data-outcome="passed"'
        in html
    )


def test_drift_table_marks_changes_between_neighbouring_versions(tmp_path: Path) -> None:
    r = tmp_path / "reports"
    seen = {
        ("2.4", "0.6"): ("device('cuda', index=0)", ["layout_tensor"]),
        ("2.5", "0.6"): ("raises RuntimeError", ["layout_tensor"]),
        ("2.5", "0.7"): ("raises RuntimeError", ["tensor_impl"]),
        ("2.10", "0.7"): ("device('cuda', index=0)", ["tensor_impl"]),
    }
    for (t, ao), (dev, fields) in seen.items():
        cid = make_cell(r, t, ao, "cpu", "passed")
        probes = {
            "torch.device(0)": {"value": dev, "axis": "torch", "about": ""},
            "AQT fields": {"value": repr(fields), "axis": "torchao", "about": ""},
        }
        (r / "cells" / cid / "drift.json").write_text(json.dumps(probes))
    tracker = {
        "tests/test_upstream.py::test_b1": {
            "outcome": "xfailed",
            "reason": "B1 https://example.invalid/1",
        }
    }
    make_cell(r, "2.3", "0.6", "cpu", "passed", trackers=tracker)
    fixed = {
        "tests/test_upstream.py::test_b1": {
            "outcome": "fixed",
            "reason": "B1 https://example.invalid/1",
        }
    }
    make_cell(r, "2.3", "0.7", "cpu", "failed", trackers=fixed)
    data = report.write(r)
    by_torch = data["drift"]["cpu"]["torch"]
    assert by_torch["columns"] == ["2.3", "2.4", "2.5", "2.10"]
    (row,) = by_torch["rows"]
    assert row["values"] == [
        None,
        "device('cuda', index=0)",
        "raises RuntimeError",
        "device('cuda', index=0)",
    ]
    assert row["changed"] == [False, False, True, True]
    by_ao = data["drift"]["cpu"]["torchao"]
    assert by_ao["rows"][0]["changed"] == [False, True]  # the layout_tensor -> tensor_impl rename
    (t,) = data["trackers"]
    assert t["fixed_in"] == ["torch2.3-ao0.7-cpu"]
    assert (
        json.loads((r / "drift.json").read_text())["trackers"][0]["test"]
        == "tests/test_upstream.py::test_b1"
    )
    html = (r / "matrix.html").read_text()
    assert 'class="changed" data-probe="torch.device(0)" data-version="2.5"' in html
    assert "FIXED in torch2.3-ao0.7-cpu" in (r / "matrix.md").read_text()
