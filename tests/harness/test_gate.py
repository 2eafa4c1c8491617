"""The regression gate: every class on constructed records, the committed baseline (schema 1)
still accepted, gate.md's rows whatever they hold, a candidate wheel end to end, and a candidate
that does not install, named with uv's own words."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cells import install, verdict
from harness.cells.cell import run_cell
from harness.cells.group_run import uv_bin
from harness.cells.plan import CellPlan, candidate_command
from harness.cells.record import CellResult
from harness.ci import gate
from harness.matrix import paths, selection, spec
from harness.matrix.spec import AxisVersion, Backend, Cell

ROOT = Path(__file__).resolve().parents[2]


def entry(cid: str) -> dict[str, Any]:
    torch, ao, *py, backend = cid.removeprefix("torch").split("-")
    return {
        "id": cid,
        "tier": "core",
        "python": py[0].removeprefix("py") if py else "3.11",
        "torch": torch,
        "torchao": ao.removeprefix("ao"),
        "backend": backend,
        "pins": [],
    }


def write_cell(
    reports: Path,
    cid: str,
    status: str,
    tests: dict[str, str],
    *,
    reason: str = "",
    skips: dict[str, str] | None = None,
    reruns: dict[str, int] | None = None,
) -> dict[str, Any]:
    e = entry(cid)
    result = CellResult(cid, "core", e["python"], e["torch"], e["torchao"], e["backend"], [])
    result.status, result.reason, result.tests = status, reason, tests
    result.skips, result.reruns = skips or {}, reruns or {}
    result.write(paths.cell_dir(reports, cid))
    return e


def expect(*cids: str) -> verdict.Expected:
    return verdict.Expected([entry(c) for c in cids], "this test")


C57, C68, CUDA, GONE = (
    "torch2.5-ao0.7-cpu",
    "torch2.6-ao0.8-cpu",
    "torch2.6-ao0.8-cuda",
    "torch2.4-ao0.6-cpu",
)
BEFORE = {
    "t::stays_green": "passed",
    "t::breaks": "passed",
    "t::errors_now": "passed",
    "t::gets_fixed": "failed",
    "t::flaky": "passed",
    "t::vanishes": "passed",
    "t::expected": "xfailed",
    "t::switched_off": "passed",
    "t::needs_gpu": "passed",
}
NOW = {
    "t::stays_green": "passed",
    "t::breaks": "failed",
    "t::errors_now": "error",
    "t::gets_fixed": "passed",
    "t::flaky": "passed",
    "t::expected": "xfailed",
    "t::switched_off": "skipped",
    "t::needs_gpu": "skipped",
    "t::brand_new": "passed",
}


@pytest.fixture
def runs(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    base, cur = tmp_path / "base", tmp_path / "cur"
    write_cell(base, C57, "failed", BEFORE)
    write_cell(base, C68, "passed", {"t::a": "passed"})
    write_cell(base, CUDA, "passed", {"t::a": "passed"})
    write_cell(base, GONE, "passed", {"t::a": "passed"})
    write_cell(
        cur,
        C57,
        "failed",
        NOW,
        skips={"t::switched_off": "switched off", "t::needs_gpu": "needs a CUDA device"},
        reruns={"t::flaky": 1},
    )
    write_cell(cur, C68, "crashed", {}, reason="the interpreter died (SIGSEGV)")
    write_cell(cur, CUDA, "skipped", {}, reason="no cuda on this runner: `nvidia-smi -L` exited 9")
    # GONE should have run and left no record
    everything = expect(C57, C68, CUDA, GONE)
    return gate.snapshot(base, everything), gate.snapshot(cur, everything)


def test_every_class(runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    baseline, current = runs
    result = gate.compare(baseline, current)
    got = {(r["class"], r["cell"], r["test"], r["fatal"]) for r in result["rows"]}
    assert got == {
        ("regression", C57, "t::breaks", True),
        ("regression", C57, "t::errors_now", True),
        ("fixed", C57, "t::gets_fixed", False),
        ("flaky", C57, "t::flaky", False),
        ("missing", C57, "t::vanishes", True),
        ("now skipped", C57, "t::switched_off", True),
        ("now skipped", C57, "t::needs_gpu", False),  # an absent backend is not lost coverage
        ("new", C57, "t::brand_new", False),
        ("missing", C68, "*", True),  # ran in the baseline, crashed now
        ("now skipped", CUDA, "*", False),  # the runner lacks the backend
        ("missing", GONE, "*", True),  # no record
    }
    rows = {(r["cell"], r["test"]): r for r in result["rows"]}
    assert rows[(C57, "t::switched_off")]["why"] == "switched off"
    assert rows[(GONE, "*")]["after"] == "no-record"
    assert result["ok"] is False


def test_a_fall_in_collected_tests_is_named(tmp_path: Path) -> None:
    write_cell(tmp_path / "b", C68, "passed", {"t::a": "passed", "t::b": "passed"})
    write_cell(tmp_path / "c", C68, "passed", {"t::a": "passed"})
    want = expect(C68)
    result = gate.compare(gate.snapshot(tmp_path / "b", want), gate.snapshot(tmp_path / "c", want))
    assert [(r["class"], r["before"], r["after"]) for r in result["rows"]] == [
        ("missing", "passed", "absent"),
        ("fewer tests", "2 tests", "1 tests"),
    ]
    assert result["ok"] is False


def test_a_new_cell_that_did_not_run_fails_the_gate(tmp_path: Path) -> None:
    write_cell(tmp_path / "b", C68, "passed", {"t::a": "passed"})
    write_cell(tmp_path / "c", C68, "passed", {"t::a": "passed"})
    write_cell(tmp_path / "c", C57, "inconsistent", {}, reason="inconsistent evidence: x")
    result = gate.compare(
        gate.snapshot(tmp_path / "b", expect(C68)), gate.snapshot(tmp_path / "c", expect(C68, C57))
    )
    assert [(r["class"], r["cell"], r["before"]) for r in result["rows"]] == [
        ("missing", C57, "absent")
    ]


def test_exit_codes_outputs_and_the_manifest(tmp_path: Path) -> None:
    base, cur = tmp_path / "base", tmp_path / "cur"
    write_cell(base, C68, "passed", {"t::a": "passed"})
    write_cell(cur, C68, "failed", {"t::a": "failed"})
    matrix = spec.load()
    chosen = selection.Selection(("core",), ("cpu",), (matrix.default(),))
    for folder in (base, cur):
        selection.write_manifest(folder, selection.manifest(chosen, "finished"))
    baseline = tmp_path / "baseline.json"
    assert gate.main(["baseline", "--from", str(base), "--out", str(baseline)]) == 0
    assert json.loads(baseline.read_text())["cells"].keys() == {C68}
    assert gate.main(["check", "--from", str(base), "--baseline", str(baseline)]) == 0
    assert json.loads((base / "gate.json").read_text())["ok"] is True
    assert gate.main(["check", "--from", str(cur), "--baseline", str(baseline)]) == 1
    md = (cur / "gate.md").read_text()
    assert "❌" in md and f"| regression | {C68} | `t::a` | passed | failed | yes |" in md
    # flags override the manifest: every core cpu cell is expected (12 pairs + 8 Python
    # corners), nineteen have no record
    assert (
        gate.main(["check", "--from", str(base), "--baseline", str(baseline), "--backend", "cpu"])
        == 1
    )
    assert json.loads((base / "gate.json").read_text())["summary"]["missing"] == 19
    assert gate.main(["check", "--from", str(tmp_path / "none"), "--baseline", str(baseline)]) == 2


def test_the_committed_baseline_is_still_read(tmp_path: Path) -> None:
    """reports/baseline.json (schema 1, no skip reasons) judged against its own cpu core cells."""
    committed = json.loads((ROOT / "reports" / "baseline.json").read_text())
    assert committed["schema"] in gate.READABLE_SCHEMAS
    cpu_core = {
        cid: cell
        for cid, cell in committed["cells"].items()
        if cell["backend"] == "cpu" and cell.get("tier", "core") == "core"
    }
    assert len(cpu_core) == 20  # 12 pairs on the default Python + 8 Python corners
    assert {c.get("python") for c in cpu_core.values()} == {"3.10", "3.11", "3.12", "3.13"}
    for cid, cell in cpu_core.items():
        write_cell(tmp_path, cid, cell["status"], cell["tests"])
    result = gate.compare(committed, gate.snapshot(tmp_path, expect(*cpu_core)))
    assert result["ok"] is True, [r for r in result["rows"] if r["fatal"]][:5]
    with pytest.raises(ValueError, match="schema 99"):
        gate.compare({**committed, "schema": 99}, gate.snapshot(tmp_path, expect(*cpu_core)))


# --- gate.md: one table row per row, whatever its fields hold --------------------------------


def gfm_cells(line: str) -> list[str]:
    """A table row's cells as GitHub's table extension splits them: at every ``|`` that no
    backslash escapes (a backslash escapes the character after it, a backslash too)."""
    cells, current, i = [], "", 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            current, i = current + line[i : i + 2], i + 2
            continue
        if line[i] == "|":
            cells.append(current)
            current = ""
        else:
            current += line[i]
        i += 1
    return [*cells, current][1:-1]


def one_row(cell: str, test: str, why: str) -> dict[str, Any]:
    row = {
        "class": "missing",
        "cell": cell,
        "test": test,
        "before": "passed",
        "fatal": True,
        "carried_from": "",
    }
    return {
        "ok": False,
        "summary": dict.fromkeys(gate.CLASSES, 0) | {"missing": 1},
        "candidates": [],
        "rows": [{**row, "after": "install-error", "why": why}],
    }


def table_rows(md: str) -> list[str]:
    lines = md.splitlines()
    start = lines.index("| class | cell | test | before | after | fails the gate | why |") + 2
    return lines[start:]


@given(st.text(), st.text())
def test_a_row_stays_one_row_whatever_its_why(test: str, why: str) -> None:
    (line,) = table_rows(gate.render_markdown(one_row(C68, test, why)))
    cells = gfm_cells(line)
    assert len(cells) == 7 and cells[:2] == [" missing ", f" {C68} "]
    assert cells[-2:] == [" yes ", f" {gate.table_cell(why, gate.WHY_CHARS)} "]


def test_a_long_why_with_pipes_and_lines_is_cut_escaped_and_kept_whole_in_gate_json() -> None:
    assert gate.WHY_CHARS >= install.INSTALL_REASON_CHARS  # an install error is never cut here
    why = 'error: a | b\n  cause: File "<string>", x<0.20\r\n' + "y" * 1000
    result = one_row(C68, "t::a[x|y]", why)
    (line,) = table_rows(gate.render_markdown(result))
    assert line.startswith(
        f"| missing | {C68} | `t::a[x\\|y]` | passed | install-error | yes |"
        ' error: a \\| b cause: File "&lt;string>", x<0.20 yyy'
    )
    assert line.endswith(f"yyy{gate.CUT} |")
    shown = gfm_cells(line)[-1].strip().replace("\\|", "|").replace("&lt;", "<")
    assert len(shown) == gate.WHY_CHARS
    assert result["rows"][0]["why"] == why  # gate.json keeps it whole


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
    cell = Cell(
        "3.11", AxisVersion("2.6", "2.6.0"), AxisVersion("0.8", "0.8.0"), Backend("cpu"), 300
    )
    fake_probe = Path(__file__).parents[1] / "common" / "harness" / "fake_probe.py"

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

    chosen = selection.Selection(("core",), (), (cell,))
    for folder in ("before", "after", "again"):
        selection.write_manifest(tmp_path / folder, selection.manifest(chosen, "finished"))
    before = run(tmp_path / "before", [])
    assert before.status == "passed"
    baseline = tmp_path / "baseline.json"
    assert gate.main(["baseline", "--from", str(tmp_path / "before"), "--out", str(baseline)]) == 0

    after = run(tmp_path / "after", [str(patched)])
    assert after.status == "failed"
    assert gate.main(["check", "--from", str(tmp_path / "after"), "--baseline", str(baseline)]) == 1
    judged = json.loads((tmp_path / "after" / "gate.json").read_text())
    assert judged["candidates"] == [str(patched)]
    assert [(r["class"], r["test"]) for r in judged["rows"]] == [
        ("regression", "test_tiny.py::test_answer")
    ]

    # the same candidate that keeps behaviour passes the gate
    same = make_wheel(tmp_path / "dist2", "tinylib", "1.2", "def answer():\n    return 6 * 7\n")
    assert run(tmp_path / "again", [str(same)]).status == "passed"
    assert gate.main(["check", "--from", str(tmp_path / "again"), "--baseline", str(baseline)]) == 0


# --- the downstream tier: an alone scenario's change is the candidate's impact, not compat's ----

DS = "torch2.5-ao0.6-cpu"  # a downstream cell, as the gate sees it (its id is only a key here)
ALONE = "tests/downstream/test_a.py::test_offload_alone"
THROUGH = "tests/downstream/test_a.py::test_offload_through_compat"


def scenarios(alone: str, through: str) -> dict[str, dict[str, str]]:
    about = {"library": "accelerate", "scenario": "cpu_offload", "link": ""}
    return {
        ALONE: {**about, "route": "alone", "outcome": alone},
        THROUGH: {**about, "route": "compat", "outcome": through},
    }


def downstream_cell(reports: Path, alone: str, through: str) -> None:
    e = entry(DS)
    result = CellResult(DS, "downstream", "3.11", e["torch"], e["torchao"], "cpu", [], "2024.12")
    result.tests = {ALONE: alone, THROUGH: through}
    result.status = "failed" if "failed" in (alone, through) else "passed"
    result.scenarios = scenarios(alone, through)
    result.write(paths.cell_dir(reports, DS))


@pytest.mark.parametrize(
    ("before", "after", "through", "change", "ok"),
    [
        ("passed", "failed", "passed", "breaks without compat", True),
        ("xfailed", "failed", "passed", "now works", True),
        ("passed", "failed", "failed", "breaks without compat", False),
    ],
    ids=["breaks alone, green through compat", "a known break is fixed", "compat breaks too"],
)
def test_a_changed_alone_scenario_is_downstream_impact(
    tmp_path: Path, before: str, after: str, through: str, change: str, ok: bool
) -> None:
    downstream_cell(tmp_path / "base", before, "passed")
    downstream_cell(tmp_path / "now", after, through)
    base = gate.snapshot(tmp_path / "base", expect(DS))
    result = gate.compare(base, gate.snapshot(tmp_path / "now", expect(DS)))
    (impact,) = [r for r in result["rows"] if r["class"] == "downstream impact"]
    assert impact["test"] == ALONE and not impact["fatal"]
    assert change in impact["why"] and impact["through_compat"] == through
    assert result["ok"] is ok  # compat's own verdict: its route, judged as usual
    assert [r["test"] for r in result["rows"] if r["fatal"]] == ([] if ok else [THROUGH])
    md = gate.render_markdown(result)
    assert "## Downstream impact" in md and "| accelerate | cpu_offload |" in md


# --- a candidate that does not install: the gate says why, in uv's words ---------------------


def test_a_candidate_that_does_not_install_is_named_in_gate_json_and_gate_md(
    tmp_path: Path,
) -> None:
    """Real uv, offline: the candidate is a folder that is not a project. The cell is an
    install-error whose reason names the install and carries uv's message; the gate's row for
    the whole cell has it as its why, in gate.json and as one row of gate.md."""
    uv = uv_bin()
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    cell = Cell(
        "3.11", AxisVersion("2.6", "2.6.0"), AxisVersion("0.8", "0.8.0"), Backend("cpu"), 120
    )
    base, cur = tmp_path / "base", tmp_path / "cur"
    write_cell(base, cell.id, "passed", {"t::a": "passed"})
    candidate = tmp_path / "not|a-project"  # a pipe in uv's message, for gate.md to escape
    candidate.mkdir()
    pins = [sys.executable, "-c", "print('pins: nothing to do')"]
    plan = CellPlan(
        cell,
        python,
        paths.cell_dir(cur, cell.id),
        [pins, candidate_command(uv, python, [str(candidate)])],
        ["--never-reached"],
        [],
        probe_script=Path(__file__).parents[1] / "common" / "harness" / "fake_probe.py",
        env={"UV_OFFLINE": "1"},
        candidates=[str(candidate)],
    )
    result = run_cell(plan, echo=None)
    reason = (
        f"install exited 1 (the candidates): `{candidate}` does not appear to be a Python"
        " project, as neither `pyproject.toml` nor `setup.py` are present in the directory"
    )
    assert (result.status, result.reason) == ("install-error", reason)

    chosen = selection.Selection(("core",), (), (cell,))
    for folder in (base, cur):
        selection.write_manifest(folder, selection.manifest(chosen, "finished"))
    baseline = tmp_path / "baseline.json"
    assert gate.main(["baseline", "--from", str(base), "--out", str(baseline)]) == 0
    assert gate.main(["check", "--from", str(cur), "--baseline", str(baseline)]) == 1
    judged = json.loads((cur / "gate.json").read_text())
    assert judged["candidates"] == [str(candidate)]
    assert judged["rows"] == [
        {
            "class": "missing",
            "cell": cell.id,
            "test": "*",
            "before": "passed",
            "after": "install-error",
            "fatal": True,
            "why": reason,
            "carried_from": "",
        }
    ]
    escaped = reason.replace("|", "\\|")
    row = f"| missing | {cell.id} | `*` | passed | install-error | yes | {escaped} |"
    assert row in (cur / "gate.md").read_text().splitlines()


def test_a_cell_id_on_another_python_is_not_compared_like_with_like(tmp_path: Path) -> None:
    """A baseline recorded when the same id meant another Python (default_python moved): its
    verdicts are not compared; an older baseline without the Python is still compared."""
    base, cur = tmp_path / "base", tmp_path / "cur"
    write_cell(base, C68, "passed", {"t::a": "failed"})
    write_cell(cur, C68, "passed", {"t::a": "passed"})
    baseline = gate.snapshot(base, expect(C68))
    current = gate.snapshot(cur, expect(C68))
    assert current["cells"][C68]["python"] == "3.11"
    assert [r["class"] for r in gate.compare(baseline, current)["rows"]] == ["fixed"]
    baseline["cells"][C68]["python"] = "3.12"
    assert [r["class"] for r in gate.compare(baseline, current)["rows"]] == ["new"]
    del baseline["cells"][C68]["python"]  # a baseline from before the Python axis
    assert [r["class"] for r in gate.compare(baseline, current)["rows"]] == ["fixed"]


def test_re_recording_one_tier_keeps_the_other_cells(tmp_path: Path) -> None:
    base, cur = tmp_path / "base", tmp_path / "cur"
    write_cell(base, C68, "passed", {"t::a": "failed"})
    write_cell(base, GONE, "passed", {"t::b": "passed"})
    write_cell(cur, C68, "passed", {"t::a": "passed"})
    earlier = gate.snapshot(base, expect(C68, GONE))
    merged = gate.keep_others(gate.snapshot(cur, expect(C68)), earlier)
    assert merged["cells"][C68]["tests"] == {"t::a": "passed"}  # the new run wins
    assert merged["cells"][GONE]["tests"] == {"t::b": "passed"}  # kept
    assert "1 other cells kept from the baseline of" in merged["expected"]
    with pytest.raises(ValueError, match="schema 7"):
        gate.keep_others(merged, {**earlier, "schema": 7})
