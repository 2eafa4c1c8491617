"""harness.ci.gha and harness.ci.trigger: what the workflows' setup and aggregate steps run."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.cells.cell import new_result
from harness.ci import gate, gha, trigger
from harness.matrix import limits, paths, spec
from harness.report import pages as report
from tests.common import python_module

ROOT = Path(__file__).resolve().parents[2]


def run_module(
    module: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "COMPAT_"))}
    return python_module.run_module(module, *args, env={**clean, **(env or {})})


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def setup_outputs(folder: Path, *args: str) -> dict[str, str]:
    """What the setup step (``gha matrix`` with ``args``) writes to its output file."""
    out = folder / "github_output"
    done = run_module("harness.ci.gha", "matrix", *args, f"--github-output={out}")
    assert done.returncode == 0, done.stderr
    return outputs(out)


def cells_of(jobs: list[dict[str, Any]]) -> list[str]:
    return [c for job in jobs for c in job["cells"].split()]


# --- the setup job: which cells, on which runners ----------------------------------------


@pytest.mark.parametrize(
    ("requested", "enabled", "event", "chosen"),
    [
        (["cpu", "cuda", "mps", "xpu"], [], "schedule", ["cpu"]),
        (["cpu", "cuda", "mps", "xpu"], ["cuda"], "schedule", ["cpu", "cuda"]),
        (["cpu", "cuda"], ["cuda", "xpu"], "workflow_dispatch", ["cpu", "cuda"]),
        # an upstream CI's dispatch names pull-request code (a fork's too): cpu only, and a
        # maintainer who wants it on a GPU starts gate.yml by hand (workflow_dispatch)
        (["cpu", "cuda", "xpu"], ["cuda", "xpu"], "repository_dispatch", ["cpu"]),
        # a fork's pull request never reaches a self-hosted GPU runner, enabled or not
        (["cpu", "cuda", "xpu"], ["cuda", "xpu"], "pull_request", ["cpu"]),
        (["cpu", "cuda"], ["cuda"], "push", ["cpu"]),
        (["cuda"], ["cuda"], None, ["cuda"]),  # a local call: no event rule
    ],
)
def test_backends_other_than_cpu_are_opt_in_and_maintainer_started(
    requested: list[str], enabled: list[str], event: str | None, chosen: list[str]
) -> None:
    got, dropped = gha.select_backends(requested, enabled, event, spec.load().backends)
    assert got == chosen
    assert set(dropped) == set(requested) - set(chosen)


def test_an_unknown_backend_is_refused_by_name() -> None:
    with pytest.raises(gha.GhaError, match="unknown backend 'rocm'"):
        gha.select_backends(["cpu"], ["rocm"], "schedule", spec.load().backends)


def test_cpu_jobs_come_first_so_gpu_jobs_never_hold_every_slot() -> None:
    m = spec.load()
    jobs = gha.plan(m, ["core"], ["cuda", "cpu"])["jobs"]
    assert [j["backend"] for j in jobs] == ["cpu"] * 4 + ["cuda"] * 4  # one per core torch
    assert set("\n".join(j["pythons"] for j in jobs).split()) == {"3.10", "3.11", "3.12", "3.13"}
    assert all(j["pythons"].split()[-1] == m.default_python for j in jobs)  # first on PATH


def test_runner_labels_are_overridable_per_backend() -> None:
    m = spec.load()
    labels = gha.runner_labels(
        m, '{"cuda": "self-hosted gpu-a100", "xpu": ["self-hosted", "b580"]}'
    )
    assert labels["cuda"] == ["self-hosted", "gpu-a100"] and labels["xpu"] == [
        "self-hosted",
        "b580",
    ]
    assert labels["cpu"] == list(m.backends["cpu"].runs_on)  # the default stays in matrix.toml
    jobs = gha.plan(m, ["core"], ["cuda"], labels=labels)["jobs"]
    assert {tuple(j["runs-on"]) for j in jobs} == {("self-hosted", "gpu-a100")}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("cuda: a100", "not JSON"),
        ('["a"]', "expected a JSON object"),
        ('{"rocm": ["x"]}', "unknown backend 'rocm'"),
        ('{"cuda": []}', "expected 1 to 8 runner labels"),
        ('{"cuda": ["ok", "bad label"]}', "expected 1 to 8 runner labels"),
        (
            '{"cuda": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}',
            "expected 1 to 8 runner labels",
        ),
        ('{"cuda": ["' + "x" * 65 + '"]}', "of at most 64 letters"),
    ],
)
def test_bad_runner_labels_are_refused_with_the_value(raw: str, message: str) -> None:
    with pytest.raises(gha.GhaError, match=message):
        gha.runner_labels(spec.load(), raw)


def test_the_matrix_narrows_to_named_cells_and_refuses_unknown_ones() -> None:
    m = spec.load()
    cells = ["torch2.6-ao0.8-cpu", "tests-torch2.5-ao0.7-cpu"]
    planned = gha.plan(m, ["core", "extended"], ["cpu"], cells=cells)
    assert planned["cells"] == ["torch2.5-ao0.7-cpu", "torch2.6-ao0.8-cpu"]
    assert [(j["job"], j["cells"]) for j in planned["jobs"]] == [
        ("torch2.5-cpu", "torch2.5-ao0.7-cpu"),
        ("torch2.6-cpu", "torch2.6-ao0.8-cpu"),
    ]
    with pytest.raises(gha.GhaError, match=r"unknown cell 'torch9\.9-ao0\.8-cpu'"):
        gha.plan(m, ["core"], ["cpu"], cells=["torch9.9-ao0.8-cpu"])


def test_the_setup_step_writes_its_plan_and_outputs_itself(tmp_path: Path) -> None:
    out, plan = tmp_path / "github_output", tmp_path / "plan" / "plan.json"
    done = run_module(
        "harness.ci.gha",
        "matrix",
        "--tier=core extended",
        "--backend=cpu cuda mps xpu",
        "--cells=torch2.6-ao0.8-cpu, torch2.6-ao0.8-cuda",
        "--enabled=",
        "--event=schedule",
        f"--plan-out={plan}",
        f"--github-output={out}",
    )
    assert done.returncode == 0, done.stderr
    got = outputs(out)
    written = json.loads(plan.read_text())
    assert written["cells"] == ["torch2.6-ao0.8-cpu"] and written["tiers"] == ["core", "extended"]
    assert json.loads(got["jobs"]) == {"include": written["jobs"]}
    assert cells_of(written["jobs"]) == ["torch2.6-ao0.8-cpu"] and got["count"] == "1"
    assert got["tiers"] == "core extended"
    assert "cuda: left out: not enabled" in done.stderr
    assert set(got) == {"jobs", "count", "tiers", "prefix", "name", "candidates", "judged"}


def test_more_jobs_than_one_matrix_expands_to_is_refused_with_the_count() -> None:
    most = limits.JOBS_PER_MATRIX.value
    gha.check_jobs([{"job": str(i)} for i in range(most)])
    with pytest.raises(gha.GhaError, match=rf"{most + 1} jobs to run: .* at most {most} jobs"):
        gha.check_jobs([{"job": str(i)} for i in range(most + 1)])


def test_payload_lists_and_strings_alike(tmp_path: Path) -> None:
    """A dispatch payload's tiers or cells as a JSON list failed the workflow's template; now
    gate.yml passes each through toJSON and the setup step reads a string, a list or null."""

    def emitted(tiers: str, cells: str) -> dict[str, str]:
        return setup_outputs(tmp_path, f"--tier={tiers}", f"--cells={cells}", "--backend=cpu")

    listed = emitted('["core", "downstream"]', '["torch2.6-ao0.8-cpu"]')
    spaced = emitted('"core downstream"', '"torch2.6-ao0.8-cpu"')
    assert listed == spaced and listed["tiers"] == "core downstream"
    assert emitted("null", "null")["tiers"] == "core"  # absent fields: the defaults
    bad = run_module("harness.ci.gha", "matrix", '--tier={"core": 1}')
    assert bad.returncode == 2 and "tiers: expected a JSON list of strings" in bad.stderr


def test_candidates_past_the_cap_are_refused_with_their_size() -> None:
    many = " ".join(["safetensors==0.8.0"] * (gha.MAX_CANDIDATES // 10))
    with pytest.raises(gha.GhaError, match=r"candidates: [\d,]+ bytes; accepted: at most 16,384"):
        gha.parse_candidates(many)


def test_a_run_with_candidates_gets_an_artifact_prefix_and_a_name(
    tmp_path: Path,
) -> None:
    def emit(*extra: str) -> dict[str, str]:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        done = run_module(
            "harness.ci.gha", "matrix", "--tier=core", "--backend=cpu", "--cells=torch2.6-ao0.8-cpu",
            "--event=workflow_call", f"--github-output={out}", *extra,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return outputs(out)

    plain = emit()
    assert (plain["name"], plain["prefix"]) == ("", "")
    assert json.loads(plain["jobs"])["include"][0]["artifact"] == "reports-torch2.6-cpu"
    one = emit('--candidates=["safetensors==0.8.0"]')
    other = emit('--candidates=["safetensors==0.4.5"]')
    assert re.fullmatch(r"gate-[0-9a-f]{10}-", one["prefix"]) and one["prefix"] != other["prefix"]
    assert json.loads(one["jobs"])["include"][0]["artifact"] == (
        f"{one['prefix']}reports-torch2.6-cpu"
    )
    # the same candidates on other cells: another call, another prefix
    wider = gha.artifact_prefix("", ["safetensors==0.8.0"], ["core", "cpu", ""])
    assert wider != one["prefix"]
    named = emit('--candidates=["x==1"]', "--artifact-prefix=safetensors-pr")
    assert named["prefix"] == "safetensors-pr-" and named["name"] == "safetensors-pr"
    dispatched = emit('--candidates=["x==1"]', '--artifact-prefix="safetensors-pr"')  # toJSON
    assert dispatched["prefix"] == "safetensors-pr-"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("-x", "artifact-prefix: '-x' is not usable"),
        ("a/b", "artifact-prefix: 'a/b' is not usable"),
        ("a" * 41, "at most 40"),
    ],
)
def test_a_bad_artifact_prefix_is_refused_with_the_value(raw: str, message: str) -> None:
    with pytest.raises(gha.GhaError, match=re.escape(message)):
        gha.artifact_prefix(raw, [], [])


@pytest.mark.parametrize("raw", ["{", '{"a": 1}', "[1]"])
def test_bad_candidates_json_is_refused_with_the_value(raw: str) -> None:
    with pytest.raises(gha.GhaError, match=re.escape("candidates: ")):
        gha.parse_candidates(raw)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--tier=core nightly"], {}, "unknown tier 'nightly'"),
        (["--tier=core prerelease"], {}, "runs with nox only 'prerelease'"),
        (["--cells=torch9.9-ao0.8-cpu"], {}, "unknown cell"),
        (["--backend=cuda", "--enabled="], {}, "no cell to run"),
        ([], {"COMPAT_MATRIX_RUNS_ON": "{"}, "COMPAT_MATRIX_RUNS_ON: not JSON"),
    ],
)
def test_the_setup_step_fails_loudly_and_writes_nothing(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    """The old step was `echo "matrix=$(python -m harness.ci.gha …)"`: a failing loader left an
    empty output and a green step. Now the module writes the output, or fails saying why."""
    out = tmp_path / "github_output"
    done = run_module("harness.ci.gha", "matrix", *args, f"--github-output={out}", env=env)
    assert done.returncode == 2
    assert message in done.stderr
    assert not out.exists()


# --- the aggregate: the report and the gate judge exactly the planned cells --------------


def write_cell(reports: Path, cell_id: str) -> None:
    """A passed cell's record as a cell job uploads it (cell.json and its reportlog)."""
    cell = next(c for c in spec.load().cells(tiers=spec.TIERS) if c.id == cell_id)
    result = new_result(cell)
    result.status = "passed"
    result.tests = {"tests/test_x.py::test_ok": "passed"}
    result.counts["passed"] = 1
    result.write(paths.cell_dir(reports, cell.id))


def planned(*cells: str) -> str:
    m = spec.load()
    return json.dumps(gha.plan(m, list(spec.TIERS), None, cells=cells))


def aggregate(reports: Path, plan_json: str, tiers: str = "core") -> tuple[int, dict[str, Any]]:
    """The aggregate job's steps: the manifest from the plan file, the report; its totals."""
    plan = reports.parent / f"{reports.name}-plan.json"
    plan.write_text(plan_json)
    done = run_module(
        "harness.ci.gha", "manifest", f"--plan={plan}", f"--reports={reports}", f"--tiers={tiers}"
    )
    if done.returncode:
        return done.returncode, {"stderr": done.stderr}
    assert report.main(["--reports", str(reports)]) == 0
    return 0, json.loads((reports / "matrix.json").read_text())


def test_an_emitted_cell_without_a_result_is_no_record_and_fails_the_run(tmp_path: Path) -> None:
    write_cell(tmp_path, "torch2.6-ao0.8-cpu")
    (tmp_path / "cells" / "torch2.5-ao0.7-cpu").mkdir()  # a folder with no cell.json: no result
    code, data = aggregate(tmp_path, planned("torch2.6-ao0.8-cpu", "torch2.5-ao0.7-cpu"))
    assert code == 0
    assert data["cells"]["torch2.5-ao0.7-cpu"]["status"] == "no-record"
    assert data["totals"]["bad_cells"] == 1 and data["totals"]["cells"] == 2
    assert "torch2.5-ao0.7-cpu: no-record" in (tmp_path / "matrix.md").read_text()


def test_the_aggregate_fails_on_an_empty_reports_folder(tmp_path: Path) -> None:
    """Every cell died before uploading: the old aggregate rendered bad_cells 0 and passed."""
    code, data = aggregate(tmp_path, planned("torch2.6-ao0.8-cpu"))
    assert code == 0 and data["totals"]["bad_cells"] == 1
    assert data["cells"]["torch2.6-ao0.8-cpu"]["status"] == "no-record"


@pytest.mark.parametrize("plan_json", ["", "not json", '{"cells": [], "jobs": []}', '{"x": 1}'])
def test_the_aggregate_fails_when_setup_planned_nothing(tmp_path: Path, plan_json: str) -> None:
    code, data = aggregate(tmp_path, plan_json)
    assert code == 2 and "plan" in data["stderr"]


def test_the_aggregate_passes_when_every_cell_came_back(tmp_path: Path) -> None:
    write_cell(tmp_path, "torch2.6-ao0.8-cpu")
    code, data = aggregate(tmp_path, planned("torch2.6-ao0.8-cpu"))
    assert code == 0 and data["totals"]["bad_cells"] == 0 and data["totals"]["cells"] == 1


def test_a_narrowed_run_is_judged_on_the_cells_it_ran(tmp_path: Path) -> None:
    """The committed baseline holds core and extended cells; a core-only (or narrowed) run was
    always red on the extended cells 'missing'. With the manifest of the emitted cells the gate
    judges exactly those, and a cell it emitted that sent nothing back is still missing."""
    baseline = ROOT / "reports" / "baseline.json"
    cells = json.loads(baseline.read_text())["cells"]
    core = [c for c, v in cells.items() if v["status"] == "passed" and v["tier"] == "core"]
    assert any(v["tier"] == "extended" for v in cells.values())  # the defect needs them
    write_cell(tmp_path, core[0])
    base = tmp_path / "baseline.json"
    only = {**json.loads(baseline.read_text())}
    only["cells"] = {core[0]: {**cells[core[0]], "tests": {"tests/test_x.py::test_ok": "passed"}}}
    only["cells"].update({c: v for c, v in cells.items() if c != core[0]})  # every other cell too
    base.write_text(json.dumps(only))
    assert aggregate(tmp_path, planned(core[0]))[0] == 0
    check = ["check", "--from", str(tmp_path), "--baseline", str(base), "--out", str(tmp_path)]
    assert gate.main(check) == 0
    assert aggregate(tmp_path, planned(core[0], core[1]))[0] == 0  # core[1] never came back
    assert gate.main(check) == 1
    rows = json.loads((tmp_path / "gate.json").read_text())["rows"]
    assert [(r["class"], r["cell"], r["after"]) for r in rows] == [
        ("missing", core[1], "no-record")
    ]


def test_the_verdict_outputs(tmp_path: Path) -> None:
    summary = {"regression": 2, "missing": 1, "fixed": 0, "flaky": 0, "new": 3}
    assert gha.verdict({"ok": False, "summary": summary}) == {
        "verdict": "fail",
        "regressions": "2",
        "missing": "1",
    }
    assert gha.verdict(None)["verdict"] == "none"
    out = tmp_path / "o"
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps({"ok": True, "summary": dict.fromkeys(summary, 0)}))
    assert (
        run_module(
            "harness.ci.gha", "verdict", f"--gate={gate}", f"--github-output={out}"
        ).returncode
        == 0
    )
    assert outputs(out) == {"verdict": "pass", "regressions": "0", "missing": "0"}


# --- the gate's trigger: candidates and the upstream pull request --------------------------


@pytest.mark.parametrize(
    ("raw", "candidates"),
    [
        ("safetensors==0.4.5", ["safetensors==0.4.5"]),
        ("safetensors==0.4.5 accelerate==1.3.0", ["safetensors==0.4.5", "accelerate==1.3.0"]),
        ("safetensors==0.4.5,accelerate==1.3.0", ["safetensors==0.4.5", "accelerate==1.3.0"]),
        ("safetensors==0.4.5\naccelerate==1.3.0\n", ["safetensors==0.4.5", "accelerate==1.3.0"]),
        ("safetensors>=0.4,<0.5", ["safetensors>=0.4,<0.5"]),
        ("safetensors >= 0.4, < 0.5 numpy<2", ["safetensors >= 0.4,< 0.5", "numpy<2"]),
        (
            "safetensors @ git+https://example.invalid/st.git@abc123",
            ["safetensors @ git+https://example.invalid/st.git@abc123"],
        ),
        ("numpy<2; python_version < '3.12'", ["numpy<2; python_version < '3.12'"]),
        (
            '["a==1", "b @ https://example.invalid/b.whl"]',
            ["a==1", "b @ https://example.invalid/b.whl"],
        ),
        ('"safetensors==0.4.5 numpy<2"', ["safetensors==0.4.5", "numpy<2"]),  # toJSON of a string
        (
            "./wheels/safetensors-0.9.0-py3-none-any.whl",
            ["./wheels/safetensors-0.9.0-py3-none-any.whl"],
        ),
    ],
)
def test_candidates_split_on_spaces_commas_and_newlines(raw: str, candidates: list[str]) -> None:
    assert trigger.split_candidates(raw) == candidates


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("--index-url=https://example.invalid/simple", "starts with '-'"),
        ("safetensors==0.4.5 -e .", "'-e' starts with '-'"),
        ('["-rrequirements.txt"]', "starts with '-'"),
        ("", "no candidate given"),
        ("null", "no candidate given"),  # toJSON of an absent payload field
        (" , \n ", "no candidate given"),
        ('["a", 1]', "JSON list of strings"),
    ],
)
def test_bad_candidates_are_refused_with_the_value(raw: str, message: str) -> None:
    with pytest.raises(trigger.TriggerError, match=message):
        trigger.split_candidates(raw)


SETUP = ("harness.ci.gha", "matrix", "--tier=core", "--backend=cpu", "--cells=torch2.6-ao0.8-cpu")


def test_the_setup_step_refuses_an_option_as_a_candidate(tmp_path: Path) -> None:
    """A candidate starting with '--' used to reach `uv pip install` as an option."""
    out = tmp_path / "o"
    done = run_module(*SETUP, "--candidates=--pre safetensors", f"--github-output={out}")
    assert done.returncode == 2 and "'--pre' starts with '-'" in done.stderr
    assert not out.exists()
    done = run_module(*SETUP, "--candidates=null", f"--github-output={out}")
    assert done.returncode == 2 and "no candidate given" in done.stderr  # an absent payload field


def test_the_setup_step_resolves_candidates_and_names_the_upstream_pull_request(
    tmp_path: Path,
) -> None:
    out = tmp_path / "o"
    done = run_module(
        *SETUP,
        '--candidates="safetensors==0.4.5 numpy<2"',  # toJSON() of a dispatch payload's string
        "--pr-repository=huggingface/safetensors",
        "--pr-number=512",
        "--pr-sha=ABCDEF0123456789",
        f"--github-output={out}",
        env={"GITHUB_SERVER_URL": "https://github.com"},
    )
    assert done.returncode == 0, done.stderr
    got = outputs(out)
    assert json.loads(got["candidates"]) == ["safetensors==0.4.5", "numpy<2"]
    assert got["judged"] == (
        "Judged: upstream pull request [huggingface/safetensors#512]"
        "(https://github.com/huggingface/safetensors/pull/512) at `abcdef012345`"
    )
    assert got["name"].startswith("numpy+safetensors ")  # what its commit status is called
    plain = tmp_path / "plain"
    assert run_module(*SETUP, f"--github-output={plain}").returncode == 0
    assert (outputs(plain)["candidates"], outputs(plain)["judged"]) == ("[]", "")
    bad = run_module(*SETUP, "--candidates=x==1", "--pr-repository=a/b", "--pr-number=0")
    assert bad.returncode == 2 and "pr.number" in bad.stderr


@pytest.mark.parametrize(
    ("repository", "number", "sha", "message"),
    [
        ("huggingface/safetensors](https://evil", "1", "", "pr.repository"),
        ("no-slash", "1", "", "pr.repository"),
        ("a/b", "12; rm", "", "pr.number"),
        ("a/b", "0", "", "pr.number"),
        ("a/b", "12345678901", "", "pr.number"),  # past 10 digits: no pull request has one
        ("a/b", "1", "xyz", "pr.sha"),
        ("", "1", "", "pr.repository"),
    ],
)
def test_a_malformed_pull_request_is_refused(
    repository: str, number: str, sha: str, message: str
) -> None:
    with pytest.raises(trigger.TriggerError, match=message):
        trigger.judged_line(repository, number, sha, "https://github.com")
