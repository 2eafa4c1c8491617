"""The workflow files, executed: each scenario runs a real workflow with `act` (see act.py) and
asserts on its jobs' results, its artifacts and its step summaries.

Run by .ci/run (`python -m pytest tests/workflows`), the scenarios (marked `act`) only when a
file they exercise changed since they last all passed (harness.ci.act_scope, reports/act.json);
not part of `nox -s tests` (one scenario runs `nox -s tests` inside act) nor of any cell's
suite (a suite of its own: each is run by its path). Every
scenario but the full-width one narrows the matrix to one or two cpu cells (of torch 2.6, and
2.5 for a second job) so that it stays within a few minutes once uv's cache holds them; the
full-width one runs the nightly's setup and aggregate at every tier on four backends, its cell
jobs stand-ins that write the cells' records.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.ci import gha
from harness.dist import wheel_cells
from harness.matrix import limits, paths, project, spec
from tests.common.workflows import act
from tests.common.workflows import act_upstream as upstream
from tests.common.workflows.act import TIMES

MATRIX = spec.load(paths.ROOT / "matrix.toml")
CELL = "torch2.6-ao0.8-cpu"
OTHER = "torch2.5-ao0.7-cpu"  # another torch group: another job
REGRESSED = "tests/compat/sharing/test_sharing.py::test_save_round_trip_is_bit_identical[cpu]"
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


def prefix(run: act.Run) -> str:
    """The call's artifact prefix: '' for ci / nightly, gate-<digest>- for a gate call."""
    return run.one("setup").set_outputs.get("prefix", "")


def cell_record(run: act.Run, cell: str) -> dict[str, object]:
    """The cell's record, from the reports artifact of the job that ran it."""
    reports = [a for a in run.artifacts() if a.startswith(f"{prefix(run)}reports-")]
    found = [run.artifact(a) / cell / "cell.json" for a in reports]
    (path,) = [p for p in found if p.is_file()]
    return dict(json.loads(path.read_text()))


# ci.yml's lint and tests jobs run `nox -s lint` and `nox -s tests`, which .ci/run's lint and
# tests stages have just run on the same tree. In the scenario's copy those two sessions are
# stand-ins that say they ran and what the job gave them (the real ones renamed, so nothing else
# changes): the scenario proves the jobs' wiring without running the sessions a second time.
STAND_INS = """

@nox.session(python=False)
def lint(session: nox.Session) -> None:
    session.log(f"stand-in: nox -s lint on Python {sys.version_info[0]}.{sys.version_info[1]}")


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    index = os.environ.get("COMPAT_MATRIX_INDEX_CPU", "")
    session.log(f"stand-in: nox -s tests on Python {sys.version_info[0]}.{sys.version_info[1]},"
                f" COMPAT_MATRIX_INDEX_CPU={index!r}")
"""


def stand_in_sessions(repo: Path) -> None:
    noxfile = repo / "noxfile.py"
    text = noxfile.read_text()
    for name in ("lint", "tests"):
        real = f"\ndef {name}(session: nox.Session) -> None:\n"
        assert text.count(real) == 1, f"noxfile.py: expected one session {name!r}"
        text = text.replace(
            real, f"\ndef {name}_as_dot_ci_run_ran_it(session: nox.Session) -> None:\n"
        )
    noxfile.write_text(text + STAND_INS)


@pytest.mark.act
def test_ci_on_push_is_green_and_the_summary_holds_the_matrix(tmp_path: Path) -> None:
    repo, work = scenario(tmp_path, "ci")
    stand_in_sessions(repo)
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
    # the jobs ran their sessions on the Python setup-python gave them (act's runner is not
    # GitHub's, so no CPU index is named)
    lint_said = "\n".join(run.one("lint").output)
    tests_said = "\n".join(run.one("tests").output)
    assert "stand-in: nox -s lint on Python 3.11" in lint_said, explain(run)
    assert "stand-in: nox -s tests on Python 3.11, COMPAT_MATRIX_INDEX_CPU=" in tests_said
    (cell,) = run.by_id("cell")
    assert cell.matrix["cells"] == CELL  # narrowed through the workflow input
    assert cell.matrix["job"] == "torch2.6-cpu"  # one job per torch group
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
    # no Actions cache: nothing a run restores can have been written by a gate's candidate
    assert not [a for a in run.actions() if a["action"].startswith("cache-")], explain(run)


@pytest.mark.act
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
        "setup": "success",
        "cell": "success",
        "aggregate": "success",
    }, explain(run)
    assert cell_record(run, CELL)["candidates"] == ["safetensors==0.8.0"]
    summary = run.one("aggregate").summary
    assert "# Regression gate: ✅ no regressions" in summary
    assert "Candidates: `safetensors==0.8.0`" in summary
    url = f"https://github.com/{PR['repository']}/pull/{PR['number']}"
    assert f"Judged: upstream pull request [{PR['repository']}#{PR['number']}]({url})" in summary
    assert prefix(run).startswith("gate-")  # a call with candidates: its own artifact names
    stored = run.artifact(f"{prefix(run)}matrix-report")
    assert json.loads((stored / "gate.json").read_text())["ok"] is True
    assert (stored / "gate.md").read_text() in summary
    assert "Gate verdict: **pass**, 0 regressed tests, 0 missing" in summary
    # the candidate ran in the cell: no Actions cache is read or written by any job
    caches = [a["action"] for a in run.actions() if a["action"].startswith("cache-")]
    assert caches == [], caches
    # the call's name (its candidates' package and a digest) names its commit status
    assert run.one("setup").set_outputs["name"].startswith("safetensors ")
    # no token for the upstream repository here: the aggregate says it posted no status
    said = "\n".join(run.one("aggregate").output)
    assert "no commit status posted" in said and "UPSTREAM_STATUS_TOKEN is not set" in said, said


CALLER = """\
name: upstream-caller
on: workflow_dispatch
permissions: {}
jobs:
  gate:
    permissions:
      contents: read
    uses: ./.github/workflows/matrix.yml
    with:
      gate: true
      candidates: "%s"
      cells: %s
      pr-repository: huggingface/safetensors
      pr-number: "77"
"""


def call_gate(tmp_path: Path, name: str, candidate: str) -> act.Run:
    """matrix.yml as the gate, called from a workflow of the copy (as an upstream project's CI
    would call it)."""
    repo, work = scenario(tmp_path, name)
    (repo / ".github" / "workflows" / "upstream-caller.yml").write_text(CALLER % (candidate, CELL))
    act.commit(repo)
    return act.run_act(repo, work, "workflow_dispatch", "upstream-caller.yml", {"inputs": {}})


@pytest.mark.act
def test_gate_called_with_a_breaking_candidate_is_red_and_names_the_test(tmp_path: Path) -> None:
    run = call_gate(tmp_path, "gate-red", "safetensors==0.4.5")
    report(run, "matrix.yml as the gate by workflow_call, safetensors==0.4.5")
    assert run.returncode != 0
    results = {j.job_id: j.result for j in run.jobs.values()}
    assert results["cell"] == "failure" and results["aggregate"] == "failure", explain(run)
    summary = run.one("aggregate").summary
    assert "Judged: upstream pull request [huggingface/safetensors#77]" in summary
    assert "# Regression gate: ❌ the gate fails" in summary
    assert f"| regression | {CELL} | `{REGRESSED}` | passed | failed | yes |" in summary
    gate = json.loads((run.artifact(f"{prefix(run)}matrix-report") / "gate.json").read_text())
    regressed = {r["test"] for r in gate["rows"] if r["class"] == "regression"}
    assert REGRESSED in regressed
    # act ends a run at a failed called workflow, so the caller's next job never starts here;
    # the outputs it would read are the aggregate's (the green call below reads them through)
    outputs = run.one("aggregate").set_outputs
    assert (outputs["verdict"], outputs["regressions"]) == ("fail", str(len(regressed)))


# --- an upstream project calls the gate: the README's caller workflow -------------------------

DS_CELL = "torch2.6-ao0.8-ds2026.11-cpu"  # installs accelerate: the downstream tier's cell
OFFLOAD = "tests/downstream/test_accelerate.py::test_cpu_offload_of_torchao_weights_{}"
HOOK = "tests/downstream/test_accelerate.py::test_offload_hook_without_weights_map_{}"


def readme_caller() -> str:
    return upstream.caller_example(upstream.README.read_text())


def test_readme_caller_workflow_is_complete_and_lints_clean() -> None:
    """What GitHub needs of the caller, checked on the README's block (act checks neither the
    permissions nor the inputs' types), then zizmor and GitHub's workflow schema."""
    example = readme_caller()
    assert upstream.problems(example) == []
    assert upstream.linted(example) == []


# each is what a caller written from the README's earlier one-line description got wrong
BROKEN = {
    "no subdirectory": ("#subdirectory=bindings/python", "", "candidates: expected"),
    "no contents: read": ("    permissions:\n      contents: read\n", "", "`contents: read`"),
    "number not a string": (
        "${{ format('{0}', github.event.pull_request.number) }}",
        "${{ github.event.pull_request.number }}",
        "pr-number: ${{ github.event.pull_request.number }} is a number",
    ),
    "outputs skipped after a red gate": ("    if: ${{ !cancelled() }}\n", "", "!cancelled()"),
    "no gate: true": ("      gate: true\n", "", "`gate: true` is not given"),
    "run: with an unquoted colon": (
        "run: |\n          echo",
        "run: echo",
        "not valid YAML",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_caller_checks_name_what_a_broken_caller_lacks(case: str) -> None:
    before, after, named = BROKEN[case]
    example = readme_caller()
    assert example.count(before) == 1
    found = upstream.problems(example.replace(before, after))
    assert any(named in p for p in found), found


def call_from_upstream(tmp_path: Path, name: str, candidate: str, number: int, sha: str) -> act.Run:
    """The README's caller workflow in the copy, triggered by a pull request of ``number`` whose
    head is ``sha``; only the lines a local run must change are changed."""
    repo, work = scenario(tmp_path, name)
    text, diff = upstream.for_act(readme_caller(), candidate=candidate, cells=DS_CELL)
    assert diff == [
        "-    uses: OWNER/compat-matrix/.github/workflows/matrix.yml@<sha>",
        "+    uses: ./.github/workflows/matrix.yml",
        f'-      candidates: "{upstream.CANDIDATE}"',
        f'+      candidates: "{candidate}"',
        f"+      cells: {DS_CELL}",
    ]
    (repo / ".github" / "workflows" / "compat-matrix.yml").write_text(text)
    act.commit(repo)
    pr = {"number": number, "head": {"sha": sha, "ref": "pr"}, "base": {"ref": "main"}}
    payload = {"action": "synchronize", "number": number, "pull_request": pr}
    return act.run_act(repo, work, "pull_request", "compat-matrix.yml", payload)


@pytest.mark.act
def test_upstream_caller_gates_a_regressed_source_tree_red_and_its_wheel_green(
    tmp_path: Path,
) -> None:
    """An upstream repository whose package is in a subdirectory (accelerate's source in
    python/): its pull request with one regression is red naming the test it breaks; the same
    repository untouched, as a wheel built from it, is green and the caller reads the outputs."""
    source, base = upstream.accelerate_repository(tmp_path / "upstream")
    wheel = upstream.build_wheel(source, base, tmp_path / "dist")
    head = upstream.regress(source)
    pr_head = "${{ github.event.pull_request.head.sha }}"
    from_source = f"accelerate @ git+file://{source}@{pr_head}#subdirectory=python"
    installed = f"accelerate @ git+file://{source}@{head}#subdirectory=python"

    red = call_from_upstream(tmp_path, "upstream-red", from_source, 4242, head)
    report(red, "README caller on pull_request: accelerate source tree with a regression")
    assert red.returncode != 0
    results = {j.job_id: j.result for j in red.jobs.values()}
    assert results["cell"] == "failure" and results["aggregate"] == "failure", explain(red)
    (cell,) = red.by_id("cell")
    assert cell.matrix["cells"] == DS_CELL
    red_prefix = prefix(red)
    assert red_prefix.startswith("gate-")  # a call with candidates: its own artifact names
    record = cell_record(red, DS_CELL)
    assert record["candidates"] == [installed]  # the payload's head sha, through the expression
    assert record["installed"]["accelerate"] == upstream.VERSION  # over the pinned 1.15.0
    summary = red.one("aggregate").summary
    assert f"[{act.REPOSITORY}#4242]" in summary and f"at `{head[:12]}`" in summary
    assert "# Regression gate: ❌ the gate fails" in summary
    assert (
        f"| regression | {DS_CELL} | `{OFFLOAD.format('through_compat')}` | passed | failed | yes |"
        in summary
    )
    gate = json.loads((red.artifact(f"{red_prefix}matrix-report") / "gate.json").read_text())
    # the two offload scenarios break through compat and alone alike; accelerate's own suite
    # (the tests of 1.15.0, the newest release below the candidate) breaks plain and patched
    # alike, so its diff holds no regression
    assert {r["test"] for r in gate["rows"] if r["class"] == "regression"} == {
        OFFLOAD.format("through_compat"),
        HOOK.format("through_compat"),
    }
    assert {r["test"] for r in gate["rows"] if r["class"] == "downstream impact"} == {
        OFFLOAD.format("alone"),
        HOOK.format("alone"),
    }
    # act ends a run at a failed called workflow, so the caller's summary job does not start
    # here (on GitHub it does: `if: !cancelled()`); the outputs it would read are the
    # aggregate's (the green call reads them through)
    outputs = red.one("aggregate").set_outputs
    assert (outputs["verdict"], outputs["regressions"]) == ("fail", "2")
    for caller in red.by_id("summary"):  # should act start it one day
        assert "compat-matrix gate: fail, 2 regressed tests" in caller.summary, explain(red)

    green = call_from_upstream(tmp_path, "upstream-green", str(wheel), 4243, base)
    report(green, "README caller on pull_request: the untouched copy as a wheel")
    assert green.returncode == 0, explain(green)
    assert {j.job_id: j.result for j in green.jobs.values()} == {
        "setup": "success",
        "cell": "success",
        "aggregate": "success",
        "summary": "success",
    }, explain(green)
    green_prefix = prefix(green)
    assert green_prefix.startswith("gate-") and green_prefix != red_prefix  # other candidates
    record = cell_record(green, DS_CELL)
    assert record["candidates"] == [str(wheel)]
    assert record["installed"]["accelerate"] == upstream.VERSION
    peer = record["peers"]["accelerate"]  # type: ignore[index]
    assert peer["ok"] and peer["sdist"] == "accelerate-1.15.0.tar.gz", peer
    assert peer["note"].startswith(f"installed from file://{wheel}"), peer
    assert "# Regression gate: ✅ no regressions" in green.one("aggregate").summary
    # the called workflow's outputs, every count the gate gives (the caller below reads them)
    outputs = green.one("aggregate").set_outputs
    assert (outputs["verdict"], outputs["regressions"], outputs["missing"]) == ("pass", "0", "0")
    said = "Gate verdict: **pass**, 0 regressed tests, 0 missing"
    assert said in green.one("aggregate").summary, explain(green)
    caller = green.one("summary")
    assert caller.result == "success", explain(green)
    artifact = f"{green_prefix}matrix-report"
    assert (
        f"compat-matrix gate: pass, 0 regressed tests; tables in the artifact {artifact}"
        in caller.summary
    ), explain(green)
    assert json.loads((green.artifact(artifact) / "gate.json").read_text())["ok"] is True
    # every artifact of a call carries the call's prefix: two calls never share one
    for run, name in ((red, red_prefix), (green, green_prefix)):
        assert run.artifacts() and all(a.startswith(name) for a in run.artifacts())


FAULTS = """

# --- injected by tests/workflows/test_act.py: one cell crashes, one dies without a result ---
def _inject_fault() -> None:
    import json
    import os
    import shutil
    import signal
    from pathlib import Path

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


@pytest.mark.act
def test_nightly_fails_on_a_crashed_cell_and_names_the_one_without_results(
    tmp_path: Path,
) -> None:
    repo, work = scenario(tmp_path, "faults")
    conftest = repo / "tests" / "compat" / "conftest.py"
    conftest.write_text(conftest.read_text() + FAULTS % (CELL, OTHER))
    act.commit(repo)
    inputs = {"cells": f"{CELL} {OTHER}", "hypothesis-profile": "ci"}
    run = act.run_act(repo, work, "workflow_dispatch", "nightly.yml", {"inputs": inputs})
    report(run, "nightly.yml with a crashed cell and a silent one")
    assert run.returncode != 0
    jobs = {j.matrix["cells"]: j.result for j in run.by_id("cell")}
    assert jobs == {CELL: "failure", OTHER: "failure"}, explain(run)  # two torch groups
    assert cell_record(run, CELL)["status"] == "crashed"
    assert "reports-torch2.5-cpu" not in run.artifacts()
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


@pytest.mark.act
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
    # the regression issue and the nightly's own act run are for scheduled nights only
    assert not [j for j in run.by_id("issue") if j.result]
    assert not [j for j in run.by_id("workflows") if j.result]


# The full-width scenario's cell jobs run every real step but the cells: `nox -s matrix` is a
# stand-in (the real session renamed, nothing else changed) writing each --cell's record as
# reports/baseline.json has it (status and tests; one passed test for a cell it lacks), so the
# setup, the 60 jobs' wiring, the plan artifact, the aggregate and the gate meet the limits at
# full width for real, in minutes.
FULL_WIDTH_STAND_IN = """

@nox.session(python=False)
def matrix(session: nox.Session) -> None:
    import json as _json

    from harness.cells.cell import new_result

    posargs = list(session.posargs)
    wanted = [posargs[i + 1] for i, a in enumerate(posargs[:-1]) if a == "--cell"]
    base = _json.loads((paths.ROOT / "reports" / "baseline.json").read_text())["cells"]
    known = {c.id: c for c in MATRIX.cells(tiers=spec.TIERS)}
    for cid in wanted:
        result, was = new_result(known[cid]), base.get(cid, {})
        result.status, result.reason = was.get("status", "passed"), was.get("reason", "")
        result.tests = dict(was.get("tests") or {"tests/stand_in.py::test_ran": "passed"})
        for outcome in result.tests.values():
            result.counts[outcome] = result.counts.get(outcome, 0) + 1
        result.write(paths.cell_dir(REPORTS, cid))
    session.log(f"stand-in: {len(wanted)} cell records, {' '.join(posargs)}")
"""


# act cannot evaluate an expression in `max-parallel` (it logs "Failed to parse 'max-parallel'"
# and runs the matrix one job at a time): the copy gives it the number GitHub would read
ACT_PARALLEL = ("max-parallel: ${{ inputs.max-parallel }}", "max-parallel: 6")


def stand_in_matrix_session(repo: Path) -> None:
    noxfile = repo / "noxfile.py"
    text = noxfile.read_text()
    real = "\ndef matrix(session: nox.Session) -> None:\n"
    assert text.count(real) == 1, "noxfile.py: expected one session 'matrix'"
    text = text.replace(real, "\ndef matrix_as_run_elsewhere(session: nox.Session) -> None:\n")
    noxfile.write_text(text + FULL_WIDTH_STAND_IN)
    pipeline = repo / ".github" / "workflows" / "matrix.yml"
    text = pipeline.read_text()
    assert text.count(ACT_PARALLEL[0]) == 1
    pipeline.write_text(text.replace(*ACT_PARALLEL))


@pytest.mark.act
def test_the_nightly_at_full_width_stays_within_every_limit(tmp_path: Path) -> None:
    """Every tier on four backends, every backend enabled: 512 cells. Before the plan travelled
    as a file, the aggregate job put 165 KB of matrix JSON into one environment variable, which
    Linux refuses past 128 KiB: the job could not start a step. Here every step of every job
    starts, on this machine's kernel, and the report and the gate judge all 512 cells."""
    repo, work = scenario(tmp_path, "full-width")
    stand_in_matrix_session(repo)
    act.commit(repo)
    others = [b for b in spec.load().backends if b != "cpu"]
    here = json.dumps({b: ["ubuntu-24.04"] for b in others})  # act's one platform
    inputs = {"hypothesis-profile": "ci"}  # tiers and backends: the defaults, every one
    variables = {"COMPAT_MATRIX_BACKENDS": " ".join(others), "COMPAT_MATRIX_RUNS_ON": here}
    run = act.run_act(
        repo, work, "workflow_dispatch", "nightly.yml", {"inputs": inputs},
        variables=variables, concurrent_jobs=6, timeout_s=2400,
    )  # fmt: skip
    report(run, "nightly.yml at full width (stand-in cells)")
    assert run.returncode == 0, explain(run)
    planned = gha.plan(spec.load(), list(gha.WORKFLOW_TIERS))
    jobs = run.by_id("cell")
    assert sorted(j.matrix["job"] for j in jobs) == sorted(e["job"] for e in planned["jobs"])
    assert len(jobs) <= limits.JOBS_PER_MATRIX.room and {j.result for j in jobs} == {"success"}
    assert run.one("setup").set_outputs["count"] == str(len(planned["cells"])) == "512"
    plan = json.loads((run.artifact("plan") / "plan.json").read_text())
    assert plan["cells"] == planned["cells"]
    aggregate = run.one("aggregate")
    assert aggregate.result == "success", explain(run)
    assert "# compat-matrix — 512 cells" in aggregate.summary
    assert len(aggregate.summary.encode()) <= limits.STEP_SUMMARY.room
    gate = json.loads((run.artifact("matrix-report") / "gate.json").read_text())
    assert gate["ok"] is True and gate["summary"]["missing"] == 0
    assert json.loads((run.artifact("matrix-report") / "run.json").read_text())["cells"]
    assert run.one("history").result == "success", explain(run)


@pytest.fixture(autouse=True)
def _act_is_installed() -> None:
    act.act_binary()


def release(tmp_path: Path, name: str, tag: str) -> act.Run:
    """release.yml on a push of ``tag``, its cells narrowed to the oldest (the repository
    variable the workflow reads); the local index and the releases are in the run's store."""
    repo, work = scenario(tmp_path, name)
    sha = act.commit(repo)
    return act.run_act(
        repo,
        work,
        "push",
        "release.yml",
        {"ref": f"refs/tags/{tag}", "after": sha},
        variables={"COMPAT_MATRIX_RELEASE_CELLS": wheel_cells.chosen(MATRIX)[0].id},
    )


@pytest.mark.act
def test_a_release_builds_once_tests_the_wheel_publishes_it_and_it_installs(
    tmp_path: Path,
) -> None:
    version = project.written_version(act.ROOT)
    tag, oldest = f"v{version}", wheel_cells.chosen(MATRIX)[0].id
    run = release(tmp_path, "release", tag)
    report(run, "release.yml on a version tag")
    assert run.returncode == 0, explain(run)
    results = {j.job_id: j.result for j in run.jobs.values()}
    assert results == dict.fromkeys(["build", "cells", "publish", "github-release"], "success")
    names = [f"compat_matrix-{version}-py3-none-any.whl", f"compat_matrix-{version}.tar.gz"]
    index = run.store / "index"
    assert sorted(p.name for p in index.iterdir()) == names, explain(run)
    for name in names:  # published and attached: the build's own bytes, never a rebuild
        built = (run.artifact("dist") / name).read_bytes()
        assert (index / name).read_bytes() == built
        assert (run.store / "releases" / tag / name).read_bytes() == built
    cells = json.loads((run.artifact(f"wheel-{oldest}") / "wheel.json").read_text())
    (cell,) = cells["cells"]
    assert (cell["id"], cell["status"]) == (oldest, "passed"), cell["reason"]
    assert cell["compat_source"]["from_distribution"] is True
    assert cell["candidates"] == [cells["requirement"]] and names[0] in cells["requirement"]
    # a fresh venv installs the release from the local index, with its extra, and imports it
    venv = tmp_path / "user"
    uv = wheel_cells.uv_bin()
    subprocess.run([uv, "venv", "-q", "--python", "3.11", str(venv)], check=True)
    pins = [r for r in wheel_cells.chosen(MATRIX)[0].requirements() if r.startswith("torch==")]
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
         "--find-links", str(index), "compat-matrix[safetensors]", *pins],
        check=True,
    )  # fmt: skip
    said = subprocess.run(
        [str(venv / "bin" / "python"), "-c", IMPORTED],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.split()  # fmt: skip
    assert said[:2] == [version, version] and said[2].startswith(str(venv)), said
    assert said[3] == "True"  # the extra brought safetensors


IMPORTED = """
import importlib.metadata as m, importlib.util as u, compat
print(compat.__version__, m.version("compat-matrix"), compat.__file__,
      u.find_spec("safetensors") is not None)
"""


@pytest.mark.act
def test_a_tag_that_is_not_the_written_version_publishes_nothing(tmp_path: Path) -> None:
    run = release(tmp_path, "release-bad-tag", "v0.0.0-not-the-version")
    report(run, "release.yml on a wrong tag")
    assert run.returncode != 0
    assert run.one("build").result == "failure", explain(run)
    assert "is not v" in "\n".join(run.one("build").output), explain(run)
    assert not run.by_id("publish") or run.one("publish").result != "success"
    assert not (run.store / "index").exists() and not (run.store / "releases").exists()
