"""harness.ci.gha and harness.ci.trigger: what the workflows' setup and aggregate steps run."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.cells.cell import new_result
from harness.ci import gate, gha, trigger
from harness.matrix import paths, spec
from harness.report import pages as report

ROOT = Path(__file__).resolve().parents[2]


def run_module(
    module: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "COMPAT_"))}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        check=False,
    )


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def setup_outputs(folder: Path, *args: str) -> dict[str, str]:
    """What the setup step (``gha matrix`` with ``args``) writes to its output file."""
    out = folder / "github_output"
    done = run_module("harness.ci.gha", "matrix", *args, f"--github-output={out}")
    assert done.returncode == 0, done.stderr
    return outputs(out)


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


def test_cpu_cells_come_first_so_gpu_cells_never_hold_every_slot() -> None:
    m = spec.load()
    emitted = gha.github_matrix(m, ["core"], ["cuda", "cpu"])["include"]
    backends = [e["backend"] for e in emitted]
    assert backends == ["cpu"] * 20 + ["cuda"] * 20  # 12 pairs + 8 Python corners each
    assert {e["python"] for e in emitted} == {"3.10", "3.11", "3.12", "3.13"}


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
    emitted = gha.github_matrix(m, ["core"], ["cuda"], labels=labels)["include"]
    assert {tuple(e["runs-on"]) for e in emitted} == {("self-hosted", "gpu-a100")}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("cuda: a100", "not JSON"),
        ('["a"]', "expected a JSON object"),
        ('{"rocm": ["x"]}', "unknown backend 'rocm'"),
        ('{"cuda": []}', "expected runner labels"),
        ('{"cuda": ["ok", "bad label"]}', "expected runner labels"),
    ],
)
def test_bad_runner_labels_are_refused_with_the_value(raw: str, message: str) -> None:
    with pytest.raises(gha.GhaError, match=message):
        gha.runner_labels(spec.load(), raw)


def test_the_matrix_narrows_to_named_cells_and_refuses_unknown_ones() -> None:
    m = spec.load()
    cells = ["torch2.6-ao0.8-cpu", "tests-torch2.5-ao0.7-cpu"]
    emitted = gha.github_matrix(m, ["core", "extended"], ["cpu"], cells=cells)["include"]
    assert [e["cell"] for e in emitted] == ["torch2.5-ao0.7-cpu", "torch2.6-ao0.8-cpu"]
    with pytest.raises(gha.GhaError, match=r"unknown cell 'torch9\.9-ao0\.8-cpu'"):
        gha.github_matrix(m, ["core"], ["cpu"], cells=["torch9.9-ao0.8-cpu"])


def test_the_first_cell_of_each_torch_makes_the_blocked_run_of_a_full_run() -> None:
    """One job per cell carries nothing; in a full run the first cell of each set of TorchAO
    cells (same Python, torch, backend, requirements) also makes the TorchAO-blocked run."""
    m = spec.load()
    emitted = gha.github_matrix(m, ["core", "extended"], ["cpu"])["include"]
    marked = {e["cell"] for e in emitted if e["carry-source"]}
    assert all(e["carry-source"] in ("", e["cell"]) for e in emitted)
    # each core torch's TorchAO 0.6 cell, and torch 2.6's extended set (0.9 with the peers)
    assert marked == {
        "torch2.3-ao0.6-cpu",
        "torch2.4-ao0.6-cpu",
        "torch2.5-ao0.6-cpu",
        "torch2.6-ao0.6-cpu",
    } | set(
        ids[0]
        for ids in _sets(m, [e["cell"] for e in emitted if e["tier"] == "extended"]).values()
        if len(ids) > 1
    )
    lone = gha.github_matrix(m, ["core"], ["cpu"], cells=["torch2.6-ao0.8-cpu"])["include"]
    assert lone[0]["carry-source"] == ""  # alone in the run: nothing to stand for


def _sets(m: spec.Matrix, ids: list[str]) -> dict[Any, list[str]]:
    from harness.cells import carry

    cells = {c.id: c for c in m.cells(tiers=spec.TIERS)}
    out: dict[Any, list[str]] = {}
    for cid in ids:
        out.setdefault(carry.key(m, cells[cid]), []).append(cid)
    return out


def test_the_setup_step_writes_its_outputs_itself(tmp_path: Path) -> None:
    out = tmp_path / "github_output"
    done = run_module(
        "harness.ci.gha",
        "matrix",
        "--tier=core extended",
        "--backend=cpu cuda mps xpu",
        "--cells=torch2.6-ao0.8-cpu, torch2.6-ao0.8-cuda",
        "--enabled=",
        "--event=schedule",
        f"--github-output={out}",
    )
    assert done.returncode == 0, done.stderr
    got = outputs(out)
    assert json.loads(got["cells"]) == ["torch2.6-ao0.8-cpu"]
    assert [e["cell"] for e in json.loads(got["matrix"])["include"]] == ["torch2.6-ao0.8-cpu"]
    assert got["tiers"] == "core extended"
    assert "cuda: left out: not enabled" in done.stderr


GITHUB_JOBS_PER_MATRIX = 256  # GitHub's documented limit: the oracle, not gha.MAX_JOBS


def _every_choice(names: Sequence[str]) -> list[list[str]]:
    return [list(c) for n in range(1, len(names) + 1) for c in itertools.combinations(names, n)]


@pytest.mark.parametrize("tiers", _every_choice(gha.WORKFLOW_TIERS), ids=" ".join)
def test_no_part_of_any_matrix_exceeds_githubs_256_jobs(tiers: list[str]) -> None:
    """At every tier and backend choice setup can be asked for, the parts hold every entry in
    order and none holds more than GitHub runs for one matrix."""
    m = spec.load()
    for backends in _every_choice(list(m.backends)):
        include = gha.github_matrix(m, tiers, backends)["include"]
        parts = gha.split(include)
        assert len(parts) == len(gha.CELL_JOBS)
        assert all(len(p["include"]) <= GITHUB_JOBS_PER_MATRIX for p in parts), (tiers, backends)
        assert [e for p in parts for e in p["include"]] == include


def test_past_256_cells_the_rest_goes_to_the_second_cell_job(tmp_path: Path) -> None:
    """Every tier on every backend is past 256 today (363: 121 per GPU backend but mps): the
    nightly with cuda and xpu enabled would not have started."""
    got = setup_outputs(
        tmp_path,
        "--tier=core extended downstream",
        "--backend=cpu cuda mps xpu",
        "--enabled=cuda mps xpu",
        "--event=schedule",
    )
    every = json.loads(got["matrix"])["include"]
    first, more = (json.loads(got[part])["include"] for _, part in gha.CELL_JOBS)
    assert len(every) > GITHUB_JOBS_PER_MATRIX and got["more"] == "true"
    assert len(first) == GITHUB_JOBS_PER_MATRIX and first + more == every
    assert first[0]["backend"] == "cpu"  # cpu first, as in one matrix


def test_a_run_within_256_cells_leaves_the_second_cell_job_out(tmp_path: Path) -> None:
    got = setup_outputs(tmp_path, "--tier=core", "--backend=cpu")
    assert got["more"] == "false" and json.loads(got["jobs-more"]) == {"include": []}
    assert json.loads(got["jobs"]) == json.loads(got["matrix"])


def test_more_cells_than_the_cell_jobs_hold_is_refused_with_the_count() -> None:
    room = gha.MAX_JOBS * len(gha.CELL_JOBS)
    assert len(gha.split([{"cell": str(i)} for i in range(room)])[-1]["include"]) == gha.MAX_JOBS
    with pytest.raises(gha.GhaError, match=rf"{room + 1} cells to run: .* at most 256 jobs"):
        gha.split([{"cell": str(i)} for i in range(room + 1)])


def test_a_run_with_candidates_is_untrusted_and_its_artifacts_get_a_prefix(
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
    assert (plain["trusted"], plain["prefix"]) == ("true", "")
    assert json.loads(plain["matrix"])["include"][0]["artifact"] == (
        "reports-tests-torch2.6-ao0.8-cpu"
    )
    one = emit('--candidates=["safetensors==0.8.0"]')
    other = emit('--candidates=["safetensors==0.4.5"]')
    assert one["trusted"] == other["trusted"] == "false"
    assert re.fullmatch(r"gate-[0-9a-f]{10}-", one["prefix"]) and one["prefix"] != other["prefix"]
    assert json.loads(one["matrix"])["include"][0]["artifact"] == (
        f"{one['prefix']}reports-tests-torch2.6-ao0.8-cpu"
    )
    # the same candidates on other cells: another call, another prefix
    wider = gha.artifact_prefix("", ["safetensors==0.8.0"], ["core", "cpu", ""])
    assert wider != one["prefix"]
    named = emit('--candidates=["x==1"]', "--artifact-prefix=safetensors-pr")
    assert named["prefix"] == "safetensors-pr-" and named["trusted"] == "false"


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


# --- the aggregate: the report and the gate judge exactly the emitted cells --------------


def write_cell(reports: Path, cell_id: str) -> None:
    """A passed cell's record as a cell job uploads it (cell.json and its reportlog)."""
    cell = next(c for c in spec.load().cells(tiers=spec.TIERS) if c.id == cell_id)
    result = new_result(cell)
    result.status = "passed"
    result.tests = {"tests/test_x.py::test_ok": "passed"}
    result.counts["passed"] = 1
    result.write(paths.cell_dir(reports, cell.id))


def emitted(*cells: str) -> str:
    m = spec.load()
    return json.dumps(gha.github_matrix(m, list(spec.TIERS), None, cells=cells))


def aggregate(reports: Path, matrix_json: str, tiers: str = "core") -> tuple[int, dict[str, Any]]:
    """The aggregate job's steps: the manifest, the report; the report's totals."""
    done = run_module(
        "harness.ci.gha",
        "manifest",
        f"--reports={reports}",
        f"--tiers={tiers}",
        env={"EXPECTED_MATRIX": matrix_json},
    )
    if done.returncode:
        return done.returncode, {"stderr": done.stderr}
    assert report.main(["--reports", str(reports)]) == 0
    return 0, json.loads((reports / "matrix.json").read_text())


def test_an_emitted_cell_without_a_result_is_no_record_and_fails_the_run(tmp_path: Path) -> None:
    write_cell(tmp_path, "torch2.6-ao0.8-cpu")
    (tmp_path / "cells" / "torch2.5-ao0.7-cpu").mkdir()  # a folder with no cell.json: no result
    code, data = aggregate(tmp_path, emitted("torch2.6-ao0.8-cpu", "torch2.5-ao0.7-cpu"))
    assert code == 0
    assert data["cells"]["torch2.5-ao0.7-cpu"]["status"] == "no-record"
    assert data["totals"]["bad_cells"] == 1 and data["totals"]["cells"] == 2
    assert "torch2.5-ao0.7-cpu: no-record" in (tmp_path / "matrix.md").read_text()


def test_the_aggregate_fails_on_an_empty_reports_folder(tmp_path: Path) -> None:
    """Every cell died before uploading: the old aggregate rendered bad_cells 0 and passed."""
    code, data = aggregate(tmp_path, emitted("torch2.6-ao0.8-cpu"))
    assert code == 0 and data["totals"]["bad_cells"] == 1
    assert data["cells"]["torch2.6-ao0.8-cpu"]["status"] == "no-record"


@pytest.mark.parametrize("matrix_json", ["", "not json", '{"include": []}', '{"x": 1}'])
def test_the_aggregate_fails_when_setup_emitted_nothing(tmp_path: Path, matrix_json: str) -> None:
    code, data = aggregate(tmp_path, matrix_json)
    assert code == 2 and "EXPECTED_MATRIX" in data["stderr"]


def test_the_aggregate_passes_when_every_cell_came_back(tmp_path: Path) -> None:
    write_cell(tmp_path, "torch2.6-ao0.8-cpu")
    code, data = aggregate(tmp_path, emitted("torch2.6-ao0.8-cpu"))
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
    assert aggregate(tmp_path, emitted(core[0]))[0] == 0
    check = ["check", "--from", str(tmp_path), "--baseline", str(base), "--out", str(tmp_path)]
    assert gate.main(check) == 0
    assert aggregate(tmp_path, emitted(core[0], core[1]))[0] == 0  # core[1] never came back
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
    assert got["trusted"] == "false"
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
        ("a/b", "1", "xyz", "pr.sha"),
        ("", "1", "", "pr.repository"),
    ],
)
def test_a_malformed_pull_request_is_refused(
    repository: str, number: str, sha: str, message: str
) -> None:
    with pytest.raises(trigger.TriggerError, match=message):
        trigger.judged_line(repository, number, sha, "https://github.com")
