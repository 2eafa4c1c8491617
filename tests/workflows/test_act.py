"""The workflow files, executed: each scenario runs a real workflow with `act` (see act.py) and
asserts on its jobs' results, its artifacts and its step summaries.

Run by .ci/run (`python -m pytest tests/workflows`); not part of `nox -s tests` (one scenario
runs `nox -s tests` inside act) nor of the cells' suite (pyproject's norecursedirs). Every
scenario narrows the matrix to one or two cpu cells of torch 2.6 so that it stays within a few
minutes once uv's cache holds torch 2.6.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.workflows import act
from tests.workflows.conftest import TIMES

CELL = "torch2.6-ao0.8-cpu"
OTHER = "torch2.6-ao0.7-cpu"
REGRESSED = "tests/test_sharing.py::test_save_round_trip_is_bit_identical[cpu]"
PR = {
    "repository": "huggingface/safetensors",
    "number": 1234,
    "sha": "0123456789abcdef" * 2 + "01234567",
}


def scenario(tmp_path: Path, name: str) -> tuple[Path, Path]:
    work = tmp_path / name
    repo = act.copy_tree(work / "repo")
    return repo, work


def report(run: act.Run, name: str) -> None:
    """Keep how long the scenario took, printed at the end of the run (the README quotes it)."""
    TIMES[name] = run.seconds


def explain(run: act.Run) -> str:
    rows = [f"{j.name}: {j.result or '?'} failed steps {j.failed_steps}" for j in run.jobs.values()]
    return "\n".join([*rows, "--- log tail", run.tail()])


def cell_record(run: act.Run, cell: str) -> dict[str, object]:
    path = run.artifact(f"reports-tests-{cell}") / cell / "cell.json"
    return dict(json.loads(path.read_text()))


def test_ci_on_push_is_green_and_the_summary_holds_the_matrix(tmp_path: Path) -> None:
    repo, work = scenario(tmp_path, "ci")
    sha = act.commit(repo)
    run = act.run_act(
        repo,
        work,
        "push",
        "ci.yml",
        {"ref": "refs/heads/main", "after": sha},
        variables={"COMPAT_MATRIX_CELLS": CELL},
    )
    report(run, "ci.yml on push")
    assert run.returncode == 0, explain(run)
    results = {j.job_id: j.result for j in run.jobs.values()}
    assert results == {
        "lint": "success",
        "tests": "success",
        "setup": "success",
        "cell": "success",
        "aggregate": "success",
    }, explain(run)
    (cell,) = run.by_id("cell")
    assert cell.matrix["cell"] == CELL  # narrowed through the workflow input
    summary = run.one("aggregate").summary
    assert "# compat-matrix — 1 cells" in summary and "| **2.6** |" in summary
    # judged against the run's manifest (the cells the setup job emitted): 1 cell, and it passed
    assert "Cells that should have run: the run's manifest (run.json)." in summary
    assert "# compat-matrix — 1 cells\n\n1 passed · " in summary
    assert cell_record(run, CELL)["status"] == "passed"
    assert {"matrix.html", "matrix.md", "matrix.json"} <= {
        p.name for p in run.artifact("matrix-report").iterdir()
    }
    checkouts = [a for a in run.actions() if a["action"] == "checkout"]
    assert checkouts and all(a["ref"] == sha for a in checkouts)
    assert all(a["persist-credentials"] == "false" for a in checkouts)
    assert all(a.get("overwrite") == "true" for a in run.actions() if a["action"] == "upload")


def test_gate_by_repository_dispatch_judges_a_harmless_candidate_green(tmp_path: Path) -> None:
    repo, work = scenario(tmp_path, "gate-green")
    act.commit(repo)
    payload = {
        "action": "upstream-pr",
        "client_payload": {"candidates": "safetensors==0.8.0", "cells": CELL, "pr": PR},
    }
    run = act.run_act(repo, work, "repository_dispatch", "gate.yml", payload)
    report(run, "gate.yml by repository_dispatch, harmless candidate")
    assert run.returncode == 0, explain(run)
    assert {j.job_id: j.result for j in run.jobs.values()} == {
        "resolve": "success",
        "setup": "success",
        "cell": "success",
        "aggregate": "success",
        "verdict": "success",
    }, explain(run)
    assert cell_record(run, CELL)["candidates"] == ["safetensors==0.8.0"]
    summary = run.one("aggregate").summary
    assert "# Regression gate: ✅ no regressions" in summary
    assert "Candidates: `safetensors==0.8.0`" in summary
    url = f"https://github.com/{PR['repository']}/pull/{PR['number']}"
    assert f"Judged: upstream pull request [{PR['repository']}#{PR['number']}]({url})" in summary
    stored = run.artifact("matrix-report")
    assert json.loads((stored / "gate.json").read_text())["ok"] is True
    assert (stored / "gate.md").read_text() in summary
    verdict = run.one("verdict").summary  # gate.yml's own summary names the PR again
    assert f"[{PR['repository']}#{PR['number']}]" in verdict and "Gate verdict: **pass**" in verdict


CALLER = """\
name: upstream-caller
on: workflow_dispatch
permissions: {}
jobs:
  gate:
    permissions:
      contents: read
    uses: ./.github/workflows/gate.yml
    with:
      candidates: "%s"
      cells: %s
      pr-repository: huggingface/safetensors
      pr-number: "77"
  outputs:
    needs: gate
    if: ${{ !cancelled() }}
    runs-on: ubuntu-24.04
    permissions: {}
    steps:
      - env:
          VERDICT: ${{ needs.gate.outputs.verdict }}
          REGRESSIONS: ${{ needs.gate.outputs.regressions }}
          ARTIFACT: ${{ needs.gate.outputs.artifact }}
        run: echo "verdict=$VERDICT regressions=$REGRESSIONS artifact=$ARTIFACT" >> "$GITHUB_STEP_SUMMARY"
"""


def call_gate(tmp_path: Path, name: str, candidate: str) -> act.Run:
    """gate.yml as a reusable workflow, called from a workflow of the copy (as an upstream
    project's CI would call it)."""
    repo, work = scenario(tmp_path, name)
    (repo / ".github" / "workflows" / "upstream-caller.yml").write_text(CALLER % (candidate, CELL))
    act.commit(repo)
    return act.run_act(repo, work, "workflow_dispatch", "upstream-caller.yml", {"inputs": {}})


def test_gate_called_with_a_breaking_candidate_is_red_and_names_the_test(tmp_path: Path) -> None:
    run = call_gate(tmp_path, "gate-red", "safetensors==0.4.5")
    report(run, "gate.yml by workflow_call, safetensors==0.4.5")
    assert run.returncode != 0
    results = {j.job_id: j.result for j in run.jobs.values()}
    assert results["cell"] == "failure" and results["aggregate"] == "failure", explain(run)
    summary = run.one("aggregate").summary
    assert "Judged: upstream pull request [huggingface/safetensors#77]" in summary
    assert "# Regression gate: ❌ the gate fails" in summary
    assert f"| regression | {CELL} | `{REGRESSED}` | passed | failed | yes |" in summary
    gate = json.loads((run.artifact("matrix-report") / "gate.json").read_text())
    regressed = {r["test"] for r in gate["rows"] if r["class"] == "regression"}
    assert REGRESSED in regressed
    # act ends a run at a failed called workflow, so the caller's next job never starts here;
    # the outputs it would read are the aggregate's (the green call below reads them through)
    outputs = run.one("aggregate").set_outputs
    assert (outputs["verdict"], outputs["regressions"]) == ("fail", str(len(regressed)))


def test_gate_called_as_a_reusable_workflow_hands_its_outputs_to_the_caller(
    tmp_path: Path,
) -> None:
    run = call_gate(tmp_path, "gate-outputs", "safetensors==0.8.0")
    report(run, "gate.yml by workflow_call, harmless candidate")
    assert run.returncode == 0, explain(run)
    caller = run.one("outputs")
    assert caller.result == "success", explain(run)
    assert "verdict=pass regressions=0 artifact=matrix-report" in caller.summary
    assert "Gate verdict: **pass**, 0 regressed tests" in run.one("verdict").summary


FAULTS = """

# --- injected by tests/workflows/test_act.py: one cell crashes, one dies without a result ---
def _inject_fault() -> None:
    import shutil
    import signal

    spec = os.environ.get("COMPAT_MATRIX_CELL")
    if not spec:
        return
    cell = json.loads(Path(spec).read_text())["id"]
    if cell == %r:
        os.abort()  # the interpreter dies: the harness records `crashed` and uploads it
    if cell == %r:
        shutil.rmtree(Path(spec).parent.parent)  # reports/cells: nothing left to upload
        os.kill(os.getppid(), signal.SIGKILL)  # and nox itself dies, writing no cell.json
        os._exit(1)


_inject_fault()
"""


def test_nightly_fails_on_a_crashed_cell_and_names_the_one_without_results(
    tmp_path: Path,
) -> None:
    repo, work = scenario(tmp_path, "faults")
    conftest = repo / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + FAULTS % (CELL, OTHER))
    act.commit(repo)
    inputs = {"cells": f"{CELL} {OTHER}", "hypothesis-profile": "ci"}
    run = act.run_act(repo, work, "workflow_dispatch", "nightly.yml", {"inputs": inputs})
    report(run, "nightly.yml with a crashed cell and a silent one")
    assert run.returncode != 0
    cells = {j.matrix["cell"]: j.result for j in run.by_id("cell")}
    assert cells == {CELL: "failure", OTHER: "failure"}, explain(run)
    assert cell_record(run, CELL)["status"] == "crashed"
    assert f"reports-tests-{OTHER}" not in run.artifacts()
    aggregate = run.one("aggregate")
    assert aggregate.result == "failure"
    assert f"### {OTHER}: no-record" in aggregate.summary  # named in "What went wrong"
    assert f"### {CELL}: crashed" in aggregate.summary
    assert "fail if a cell failed" in " ".join(aggregate.failed_steps)
    gate = json.loads((run.artifact("matrix-report") / "gate.json").read_text())
    assert gate["ok"] is False
    assert {(r["cell"], r["after"]) for r in gate["rows"] if r["test"] == "*"} == {
        (CELL, "crashed"),
        (OTHER, "no-record"),
    }


def test_nightly_with_no_gpu_backend_enabled_creates_no_gpu_job(tmp_path: Path) -> None:
    repo, work = scenario(tmp_path, "nightly")
    act.commit(repo)
    asked = " ".join(f"torch2.6-ao0.8-{b}" for b in ("cpu", "cuda", "xpu", "mps"))
    inputs = {"cells": asked, "hypothesis-profile": "ci"}  # backends: the default, all four
    run = act.run_act(
        repo,
        work,
        "workflow_dispatch",
        "nightly.yml",
        {"inputs": inputs},
        variables={"COMPAT_MATRIX_PAGES": "true"},
    )
    report(run, "nightly.yml, no GPU backend enabled")
    assert run.returncode == 0, explain(run)
    assert [j.matrix.get("backend") for j in run.by_id("cell")] == ["cpu"], explain(run)
    assert not [n for n in run.jobs if any(b in n for b in ("cuda", "xpu", "mps"))]
    setup = "".join(run.one("setup").output)
    for backend in ("cuda", "xpu", "mps"):
        assert f"{backend}: left out: not enabled" in setup
    assert run.one("aggregate").result == "success", explain(run)
    assert "# Regression gate: ✅ no regressions" in run.one("aggregate").summary
    # the history job renders the page and the gate again (no earlier nightlies are fetched
    # off the schedule) and publishes the page: the Pages variable is set for this run
    history = run.one("history")
    assert history.result == "success", explain(run)
    assert "History across 0 earlier nightlies; the gate with it exited 0." in history.summary
    assert "previous_runs" not in "".join(history.output)  # the API is read on schedule only
    assert (run.artifact("matrix-report-history") / "matrix.html").is_file()
    with tarfile.open(run.artifact("github-pages") / "artifact.tar") as tar:
        assert "./index.html" in tar.getnames()
    assert run.one("pages").result == "success", explain(run)
    assert (work / "store" / "deployed-pages").read_text().strip() == "github-pages"
    # the regression issue is for scheduled nights only
    assert not [j for j in run.by_id("issue") if j.result]


@pytest.fixture(autouse=True)
def _act_is_installed() -> None:
    act.act_binary()
