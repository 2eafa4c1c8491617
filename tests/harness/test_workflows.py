"""The GitHub workflows: offline validators, hardening rules, and one source for the matrix."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import gha, spec

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return dict(doc)


def jobs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(doc["jobs"])


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is installed by requirements/harness.txt"
    return found


def test_the_expected_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "nightly.yml", "gate.yml", "matrix.yml"}


def test_zizmor_offline_is_clean() -> None:
    done = subprocess.run(
        [tool("zizmor"), "--offline", str(ROOT / ".github" / "workflows")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_schema_is_valid() -> None:
    done = subprocess.run(
        [
            tool("check-jsonschema"),
            "--builtin-schema",
            "vendor.github-workflows",
            *map(str, WORKFLOWS),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_hardening_rules(path: Path) -> None:
    text = path.read_text()
    doc = load(path)
    assert doc["permissions"] == {}, "top-level permissions: {} (widened per job)"
    assert "pull_request_target" not in (doc["on"] or {})
    for line in text.splitlines():
        m = re.search(r"uses:\s*(\S+)", line)
        if m and not m.group(1).startswith(("./", "$/")):
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m.group(1)), line
            assert re.search(r"#\s*v\d+(\.\d+)*\s*$", line), f"version comment missing: {line}"
    for name, job in jobs(doc).items():
        if "uses" in job:  # a call of the reusable workflow: its jobs carry the limits
            assert job.get("permissions") is not None, name
            continue
        assert "timeout-minutes" in job, f"{path.name}:{name} has no timeout-minutes"
        assert "permissions" in job, f"{path.name}:{name} does not state its permissions"
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), (
                f"{path.name}:{name}: expression in a run script"
            )
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_nightly_schedule_and_inputs() -> None:
    doc = load(ROOT / ".github" / "workflows" / "nightly.yml")
    (cron,) = [entry["cron"] for entry in doc["on"]["schedule"]]
    assert cron.split()[0] != "0", "not at minute 0"
    assert "workflow_dispatch" in doc["on"]
    defaults = doc["on"]["workflow_dispatch"]["inputs"]
    assert set(defaults["backends"]["default"].split()) == set(spec.load().backends)
    assert set(defaults["tiers"]["default"].split()) == set(spec.TIERS)
    assert jobs(doc)["matrix"]["with"]["gate"] is True


def test_gate_entry_points() -> None:
    doc = load(ROOT / ".github" / "workflows" / "gate.yml")
    assert {"workflow_dispatch", "workflow_call", "repository_dispatch"} <= set(doc["on"])
    assert doc["on"]["repository_dispatch"]["types"] == ["upstream-pr"]
    resolve = jobs(doc)["resolve"]["steps"][0]
    assert set(resolve["env"]) == {"FROM_INPUT", "FROM_DISPATCH"}  # inputs reach steps via env only
    assert jobs(doc)["matrix"]["with"]["gate"] is True


def test_matrix_pipeline_shape() -> None:
    doc = load(ROOT / ".github" / "workflows" / "matrix.yml")
    setup, cell, aggregate = (jobs(doc)[k] for k in ("setup", "cell", "aggregate"))
    assert any("python -m harness.gha" in s.get("run", "") for s in setup["steps"])
    assert "$GITHUB_OUTPUT" in "".join(s.get("run", "") for s in setup["steps"])
    strategy = cell["strategy"]
    assert strategy["fail-fast"] is False and "max-parallel" in strategy
    assert strategy["matrix"] == "${{ fromJSON(needs.setup.outputs.matrix) }}"
    upload = [
        s for s in cell["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")
    ]
    assert (
        upload[0]["with"]["name"] == "${{ matrix.artifact }}"
        and upload[0]["if"] == "${{ always() }}"
    )
    assert aggregate["if"] == "${{ always() }}" and aggregate["needs"] == "cell"
    download = [
        s
        for s in aggregate["steps"]
        if str(s.get("uses", "")).startswith("actions/download-artifact@")
    ]
    assert (
        download[0]["with"]["pattern"] == "reports-*"
        and download[0]["with"]["merge-multiple"] is True
    )
    assert any("GITHUB_STEP_SUMMARY" in s.get("run", "") for s in aggregate["steps"])


def test_github_matrix_equals_the_cells_nox_lists() -> None:
    m = spec.load()
    emitted = gha.github_matrix(m, list(spec.TIERS))["include"]
    artifacts = [e["artifact"] for e in emitted]
    assert len(artifacts) == len(set(artifacts)), "artifact names must be unique per run"
    done = subprocess.run(
        [sys.executable, "-m", "nox", "-l", "--json", "-t", "cell"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    listed = {s["name"] for s in json.loads(done.stdout)}
    assert {e["session"] for e in emitted} == listed
    runners = {e["backend"]: e["runs-on"] for e in emitted}
    assert runners["cpu"] == ["ubuntu-24.04"] and runners["mps"] == ["macos-14"]
    ci = gha.github_matrix(m, ["core"], ["cpu"])["include"]
    assert len(ci) == 12 and {e["backend"] for e in ci} == {"cpu"}
