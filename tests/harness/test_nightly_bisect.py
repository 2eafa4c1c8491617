"""The nightly's bisect step, for real: a night's report whose prerelease cell turned red on two
throwaway releases newer than their pins, bisected over a folder index of wheels built here in a
real venv through the cell runner; the first bad release and the test named, the innocent
release cleared, and the regression issue saying it. The planning is also checked on the real
matrix.toml against pins read from the files by hand."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from harness.bisect.bisection import Target
from harness.ci import nightly_bisect as nightly
from harness.ci import nightly_issue
from harness.matrix.interpreters import uv_bin
from harness.matrix.paths import ROOT
from harness.matrix.spec import AxisVersion, Backend, Cell, Matrix
from harness.matrix.spec import load as load_matrix
from tests.common.harness.throwaway_wheels import outer_site_venv, wheel

FAKE_PROBE = Path(__file__).parents[1] / "common" / "harness" / "fake_probe.py"
CULPRIT, INNOCENT = "nightlydemo", "nightlyother"
CULPRIT_RELEASES = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.0rc1"]
FIRST_BAD = "1.4"  # VALUE goes from 1 to 2 here
PRERELEASE_CELL = "torchlatest-aolatest-pre-cpu"


def real_matrix() -> Matrix:
    return load_matrix(ROOT / "matrix.toml")


def pins_by_hand(dist: str) -> Version:
    """The oracle for the highest pin: every ``dist==X`` in matrix.toml and in requirements/."""
    texts = [(ROOT / "matrix.toml").read_text()]
    texts += [p.read_text() for p in (ROOT / "requirements").glob("*.txt")]
    found = re.findall(rf"(?<![\w-]){re.escape(dist)}==([0-9][\w.]*)", "\n".join(texts))
    return max(Version(v) for v in found)


def cell(cid: str, *, tier: str, status: str, installed: dict[str, str], red: int = 1) -> dict:
    tests = {f"tests/test_x.py::test_{i}": "failed" for i in range(red)}
    tests["tests/test_x.py::test_fine"] = "passed"
    backend = cid.rsplit("-", 1)[-1]
    return {
        "id": cid,
        "tier": tier,
        "status": status,
        "backend": backend,
        "torch": "latest" if cid.startswith("torchlatest") else "2.15",
        "torchao": "latest" if cid.startswith("torchlatest") else "0.18",
        "installed": installed,
        "tests": tests if status == "failed" else {"tests/test_x.py::test_fine": "passed"},
    }


def test_plan_bisects_each_new_release_of_a_red_watched_cell_from_its_highest_pin() -> None:
    matrix = real_matrix()
    pin = pins_by_hand("safetensors")
    above = f"{pin.major}.{pin.minor + 1}.0rc1"
    new = {"safetensors": above, "torch": "2.15.0"}
    cells = [
        cell(PRERELEASE_CELL, tier="prerelease", status="failed", installed=new, red=7),
        # the same release breaking the same tests in another watched cell: bisected once
        cell(
            "torchlatest-aolatest-py3.12-cpu",
            tier="extended",
            status="failed",
            installed=new,
            red=7,
        ),
        cell("torchlatest-aolatest-py3.13-cpu", tier="extended", status="passed", installed=new),
        cell("torch2.15-ao0.18-cpu", tier="extended", status="failed", installed=new),  # pinned
        cell(
            "torchlatest-aolatest-py3.10-cpu",
            tier="extended",
            status="failed",
            installed={"safetensors": str(pin)},
        ),
        cell("torchlatest-aolatest-cuda", tier="extended", status="failed", installed=new),
    ]
    jobs, notes = nightly.plan(matrix, cells, max_tests=5)
    assert jobs == [
        nightly.Job(
            PRERELEASE_CELL,
            "safetensors",
            str(pin),
            above,
            tuple(f"tests/test_x.py::test_{i}" for i in range(5)),
        )
    ]
    assert [(n["cell"], n["reason"]) for n in notes] == [
        (
            "torchlatest-aolatest-py3.10-cpu",
            "red without a release above the pins: nothing to bisect",
        ),
        ("torchlatest-aolatest-cuda", "backend cuda is not on this runner"),
    ]


def test_main_refuses_a_report_that_is_not_a_matrix_report(tmp_path: Path) -> None:
    bad = tmp_path / "matrix.json"
    bad.write_text(json.dumps({"rows": []}))
    out = io.StringIO()
    assert nightly.main(["--matrix-json", str(bad), "--reports", str(tmp_path)], echo=out) == 2
    assert str(bad) in out.getvalue() and "not a matrix report" in out.getvalue()
    assert not (tmp_path / "nightly-bisect.json").exists()


# --- end to end ---------------------------------------------------------------------------------


SUITE = f"""
    import {CULPRIT}, {INNOCENT}

    def test_value():
        assert {CULPRIT}.VALUE == 1

    def test_other():
        assert {INNOCENT}.VALUE == 1
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    index = tmp_path_factory.mktemp("wheels")
    for version in CULPRIT_RELEASES:
        value = 2 if Version(version) >= Version(FIRST_BAD) else 1
        wheel(index, CULPRIT, version, f"VALUE = {value}\n")
    for version in ("1.0", "1.1"):
        wheel(index, INNOCENT, version, "VALUE = 1\n")
    project = tmp_path_factory.mktemp("project")
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_demo.py").write_text(textwrap.dedent(SUITE))
    pins = project / "pins.txt"  # the repository's highest pins of the two
    pins.write_text(f"{CULPRIT}==1.1\n{INNOCENT}==1.0\n")
    venv = outer_site_venv(tmp_path_factory.mktemp("venv") / "venv")
    return {"index": index, "project": project, "pins": pins, "venv": venv}


def throwaway_target(world: dict[str, Path], reports: Path) -> nightly.TargetFor:
    """The night's cell as the bisect step rebuilds it: what the night resolved (the new
    releases), from the folder index, in the real venv; the torch-free probe."""
    uv = uv_bin()
    local = ["--no-index", "--find-links", str(world["index"])]
    setup = [uv, "pip", "install", "--python", str(world["venv"]), *local]
    setup += [f"{CULPRIT}==2.0rc1", f"{INNOCENT}==1.1"]
    the_cell = Cell(
        "3.11",
        AxisVersion("latest", "latest"),
        AxisVersion("latest", "latest"),
        Backend("cpu"),
        120,
    )

    def target(job: nightly.Job) -> Target:
        return Target(
            the_cell,
            world["venv"],
            uv,
            reports=reports / f"{job.dist}-{job.high}",
            rootdir=world["project"],
            probe_script=FAKE_PROBE,
            setup=[setup],
            base_index_args=local,
        )

    return target


def test_a_red_prerelease_cell_is_bisected_to_its_first_bad_release_and_reported(
    world: dict[str, Path], tmp_path: Path
) -> None:
    real = real_matrix()
    matrix = dataclasses.replace(
        real,
        prerelease=(*real.prerelease, CULPRIT, INNOCENT),
        test_requirements=(*real.test_requirements, str(world["pins"])),
    )
    night: dict[str, Any] = {
        "id": PRERELEASE_CELL,
        "tier": "prerelease",
        "backend": "cpu",
        "status": "failed",
        "installed": {CULPRIT: "2.0rc1", INNOCENT: "1.1", "torch": "2.15.0"},
        "tests": {"test_demo.py::test_value": "failed", "test_demo.py::test_other": "passed"},
    }
    jobs, notes = nightly.plan(matrix, [night])
    assert notes == []
    assert [(j.dist, j.low, j.high, j.tests) for j in jobs] == [
        (CULPRIT, "1.1", "2.0rc1", ("test_demo.py::test_value",)),
        (INNOCENT, "1.0", "1.1", ("test_demo.py::test_value",)),
    ]
    findings = nightly.run(jobs, throwaway_target(world, tmp_path), echo=None)
    culprit, innocent = findings
    assert culprit["status"] == "answered", culprit
    assert culprit["first"] == FIRST_BAD and culprit["verdict"] == "broke"
    assert culprit["changes"] == [
        {"test": "test_demo.py::test_value", "before": "passed", "after": "failed"}
    ]
    assert innocent["status"] == "cleared", innocent

    written, _ = nightly.write(findings, notes, tmp_path / "reports")
    lines, first_bad = nightly_issue.load_bisected(written)
    assert first_bad == 1 and len(lines) == 2
    assert f"**{CULPRIT} {FIRST_BAD}** broke `test_demo.py::test_value`" in lines[0]
    assert f"{INNOCENT} 1.0 → 1.1" in lines[1] and "cleared" in lines[1]
    # a green gate does not make the night green: the issue opens and names the release
    gate = {"ok": True, "summary": {}, "rows": [], "candidates": []}
    told = nightly_issue.Night(bisected=lines, first_bad=first_bad)
    assert nightly_issue.is_red(gate, told)
    assert not nightly_issue.is_red(gate, nightly_issue.Night(bisected=lines[1:]))
    body = nightly_issue.issue_text(gate, "RUN", told)["body"]
    assert "### New releases bisected" in body and lines[0] in body
