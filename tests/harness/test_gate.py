"""The regression gate: every class on constructed results, and a candidate wheel end to end."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness import gate
from harness.cell import CellPlan, CellResult, candidate_command, run_cell
from harness.runner import uv_bin
from harness.spec import Backend, Cell, Version_


def write_cell(reports: Path, cid: str, status: str, records: list[dict[str, object]]) -> None:
    torch, ao, backend = cid.removeprefix("torch").split("-")
    out = reports / "cells" / cid
    out.mkdir(parents=True)
    CellResult(cid, "core", "3.11", torch, ao.removeprefix("ao"), backend, [], status=status).write(
        out
    )
    lines = [json.dumps({"$report_type": "TestReport", **r}) for r in records]
    lines.append(json.dumps({"$report_type": "SessionFinish", "exitstatus": 0}))
    (out / "log.jsonl").write_text("\n".join(lines) + "\n")


def call(nodeid: str, outcome: str, **extra: object) -> dict[str, object]:
    return {"nodeid": nodeid, "when": "call", "outcome": outcome, **extra}


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base, cur = tmp_path / "base", tmp_path / "cur"
    write_cell(
        base,
        "torch2.5-ao0.7-cpu",
        "failed",
        [
            call("t::stays_green", "passed"),
            call("t::breaks", "passed"),
            call("t::errors_now", "passed"),
            call("t::gets_fixed", "failed"),
            call("t::flaky", "passed"),
            call("t::vanishes", "passed"),
            call("t::expected", "skipped", wasxfail=""),
        ],
    )
    write_cell(base, "torch2.6-ao0.8-cpu", "passed", [call("t::a", "passed")])
    write_cell(base, "torch2.6-ao0.8-cuda", "skipped", [])
    write_cell(
        cur,
        "torch2.5-ao0.7-cpu",
        "failed",
        [
            call("t::stays_green", "passed"),
            call("t::breaks", "failed", longrepr="assert 1 == 2"),
            {"nodeid": "t::errors_now", "when": "setup", "outcome": "failed"},
            call("t::gets_fixed", "passed"),
            call("t::flaky", "rerun"),
            call("t::flaky", "passed"),
            call("t::expected", "skipped", wasxfail=""),
            call("t::brand_new", "passed"),
            call("t::brand_new_broken", "failed"),
        ],
    )
    write_cell(cur, "torch2.6-ao0.8-cpu", "crashed", [])
    write_cell(cur, "torch2.6-ao0.8-cuda", "skipped", [])
    return base, cur


def test_every_class(runs: tuple[Path, Path]) -> None:
    base, cur = runs
    result = gate.compare(gate.snapshot(base), gate.snapshot(cur))
    got = {(r["class"], r["cell"], r["test"]) for r in result["rows"]}
    c57 = "torch2.5-ao0.7-cpu"
    assert got == {
        ("regression", c57, "t::breaks"),
        ("regression", c57, "t::errors_now"),
        ("regression", c57, "t::brand_new_broken"),
        ("fixed", c57, "t::gets_fixed"),
        ("flaky", c57, "t::flaky"),
        ("missing", c57, "t::vanishes"),
        ("new", c57, "t::brand_new"),
        ("missing", "torch2.6-ao0.8-cpu", "*"),  # ran in the baseline, crashed now
    }
    assert result["summary"] == {"regression": 3, "missing": 2, "fixed": 1, "flaky": 1, "new": 1}
    assert result["ok"] is False


def test_exit_codes_and_outputs(runs: tuple[Path, Path], tmp_path: Path) -> None:
    base, cur = runs
    baseline = tmp_path / "baseline.json"
    assert gate.main(["baseline", "--from", str(base), "--out", str(baseline)]) == 0
    assert gate.main(["check", "--from", str(base), "--baseline", str(baseline)]) == 0
    assert json.loads((base / "gate.json").read_text())["ok"] is True
    assert gate.main(["check", "--from", str(cur), "--baseline", str(baseline)]) == 1
    md = (cur / "gate.md").read_text()
    assert (
        "❌" in md and "| regression | torch2.5-ao0.7-cpu | `t::breaks` | passed | failed |" in md
    )
    assert (
        gate.main(["check", "--from", str(tmp_path / "nothing"), "--baseline", str(baseline)]) == 2
    )


def test_tiers_limit_which_baseline_cells_are_expected(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, _ = runs
    baseline = gate.snapshot(base)
    baseline["cells"]["torch2.6-ao0.8-cpu"]["tier"] = "extended"
    current = gate.snapshot(base)
    del current["cells"]["torch2.6-ao0.8-cpu"]
    assert gate.compare(baseline, current)["summary"]["missing"] == 1
    assert gate.compare(baseline, current, ["core"])["ok"] is True


def test_a_missing_cell_alone_fails_the_gate(runs: tuple[Path, Path], tmp_path: Path) -> None:
    base, _ = runs
    only = tmp_path / "only"
    write_cell(
        only,
        "torch2.5-ao0.7-cpu",
        "failed",
        [
            call(n, o)
            for n, o in gate.snapshot(base)["cells"]["torch2.5-ao0.7-cpu"]["tests"].items()
        ],
    )
    result = gate.compare(gate.snapshot(base), gate.snapshot(only))
    assert [r["cell"] for r in result["rows"]] == ["torch2.6-ao0.8-cpu"]
    assert result["ok"] is False


# --- end to end: a baseline run, then a candidate wheel that changes behaviour -------------


def make_wheel(dist: Path, name: str, version: str, source: str) -> Path:
    """A minimal, valid pure-Python wheel (PEP 427), built here: no network, no build backend."""
    files = {
        f"{name}/__init__.py": source,
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: compat-matrix-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = f"{name}-{version}.dist-info/RECORD"
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    lines.append(f"{record},,")
    dist.mkdir(parents=True, exist_ok=True)
    wheel = dist / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(record, "\n".join(lines) + "\n")
    return wheel


def test_candidate_wheel_end_to_end(tmp_path: Path) -> None:
    uv = uv_bin()
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    good = make_wheel(tmp_path / "dist", "tinylib", "1.0", "def answer():\n    return 42\n")
    patched = make_wheel(tmp_path / "dist", "tinylib", "1.1", "def answer():\n    return 41\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_tiny.py").write_text(
        "import tinylib\n\ndef test_answer():\n    assert tinylib.answer() == 42\n\n"
        "def test_unrelated():\n    assert True\n"
    )
    cell = Cell("3.11", Version_("2.6", "2.6.0"), Version_("0.8", "0.8.0"), Backend("cpu"), 300)
    fake_probe = Path(__file__).with_name("fake_probe.py")

    def run(reports: Path, candidates: list[str]) -> CellResult:
        out = reports / "cells" / cell.id
        install = [
            [
                uv,
                "pip",
                "install",
                "-q",
                "--python",
                str(python),
                "pytest==9.2.0",
                "pytest-reportlog==1.0.0",
                str(good),
            ]
        ]
        if candidates:
            install.append(candidate_command(uv, python, candidates))
        args = [
            str(project),
            f"--rootdir={project}",  # node ids relative to the project wherever the clone lives
            "-p",
            "no:cacheprovider",
            f"--junitxml={out / 'junit.xml'}",
            f"--report-log={out / 'log.jsonl'}",
        ]
        plan = CellPlan(
            cell, python, out, install, args, [], probe_script=fake_probe, candidates=candidates
        )
        return run_cell(plan, echo=None)

    before = run(tmp_path / "before", [])
    assert before.status == "passed"
    baseline = tmp_path / "baseline.json"
    assert gate.main(["baseline", "--from", str(tmp_path / "before"), "--out", str(baseline)]) == 0

    after = run(tmp_path / "after", [str(patched)])
    assert after.status == "failed"
    assert gate.main(["check", "--from", str(tmp_path / "after"), "--baseline", str(baseline)]) == 1
    verdict = json.loads((tmp_path / "after" / "gate.json").read_text())
    assert verdict["candidates"] == [str(patched)]
    assert [(r["class"], r["test"]) for r in verdict["rows"]] == [
        ("regression", "test_tiny.py::test_answer")
    ]

    # the same candidate that keeps behaviour passes the gate
    same = make_wheel(tmp_path / "dist2", "tinylib", "1.2", "def answer():\n    return 6 * 7\n")
    assert run(tmp_path / "again", [str(same)]).status == "passed"
    assert gate.main(["check", "--from", str(tmp_path / "again"), "--baseline", str(baseline)]) == 0
