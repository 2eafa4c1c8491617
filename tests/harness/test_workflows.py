"""The GitHub workflows: offline validators, hardening rules, what breaks on GitHub, and one
source for the matrix. tests/workflows/test_act.py executes them."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.ci import act_scope, commit_status, example_seed, gha
from harness.matrix import spec
from tests.common.harness.expressions import render
from tests.common.harness.workflow_files import jobs, load, steps, uses, workflow
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
REUSABLE = ("matrix.yml",)  # called by workflow_call, possibly from another repository


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is installed by requirements/harness.txt"
    return found


def test_the_expected_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} == {
        "ci.yml",
        "nightly.yml",
        "gate.yml",
        "matrix.yml",
        "baseline.yml",
        "release.yml",
    }


def test_zizmor_offline_is_clean() -> None:
    """Every audit, the auditor persona's too (informational findings included); a finding left
    is ignored in a comment that says why."""
    done = subprocess.run(
        [tool("zizmor"), "--offline", "--persona=auditor", str(ROOT / ".github" / "workflows")],
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
        if m and m.group(1).startswith("./"):
            continue
        if m:
            # `$/…` is read neither by act nor by GitHub Enterprise Server
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m.group(1)), line
            assert re.search(r"#\s*v\d+(\.\d+)*\s*$", line), f"version comment missing: {line}"
    for name, job in jobs(doc).items():
        if "uses" in job:  # a call of a reusable workflow: its jobs carry the limits
            assert job.get("permissions") is not None, name
            continue
        assert "timeout-minutes" in job, f"{path.name}:{name} has no timeout-minutes"
        assert "permissions" in job, f"{path.name}:{name} does not state its permissions"
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), (
                f"{path.name}:{name}: expression in a run script"
            )
            if uses(step, "actions/checkout"):
                assert step["with"]["persist-credentials"] is False


# The first major release of each action whose action.yml says `using: node24` (for the
# composite upload-pages-artifact: whose upload-artifact does), read from each action's tagged
# action.yml on 2026-12-05. GitHub's runners are retiring Node 20: an older pin stops running.
NODE24_FROM = {
    "actions/checkout": 5,
    "actions/setup-python": 6,
    "actions/upload-artifact": 6,
    "actions/download-artifact": 7,
    "actions/upload-pages-artifact": 5,
    "actions/deploy-pages": 5,
    "softprops/action-gh-release": 3,  # v2.6.2: node20; v3.0.0: node24 (read 2026-12-07)
}


# actions that run no Node (their action.yml's `using`, read at the pinned commit on 2026-12-07)
NOT_NODE = {"pypa/gh-action-pypi-publish": "docker"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_release_that_runs_on_node24(path: Path) -> None:
    for line in path.read_text().splitlines():
        m = re.search(r"uses:\s*([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@[0-9a-f]{40}\s*#\s*v(\d+)", line)
        if m:
            action, major = m.group(1), int(m.group(2))
            if action in NOT_NODE:
                continue
            assert action in NODE24_FROM, f"{path.name}: {action}: its Node runtime is unknown"
            assert major >= NODE24_FROM[action], f"{path.name}: {line.strip()} runs on Node 20"


# --- fixes for what breaks on GitHub ------------------------------------------------------


@pytest.mark.parametrize("name", REUSABLE)
def test_a_call_from_another_repository_checks_out_this_one_at_the_called_commit(
    name: str,
) -> None:
    """Without repository/ref, actions/checkout in a called workflow checks out the caller."""
    checkouts = [s for _, s in steps(workflow(name)) if uses(s, "actions/checkout")]
    assert checkouts
    for step in checkouts:
        assert step["with"]["repository"] == "${{ job.workflow_repository || github.repository }}"
        assert step["with"]["ref"] == "${{ job.workflow_sha || github.sha }}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_nothing_runs_on_a_cancelled_run_and_every_upload_overwrites(path: Path) -> None:
    """always() ran the aggregate on cancelled runs; a re-run failed on an existing artifact."""
    assert "always()" not in path.read_text()
    for name, step in steps(load(path)):
        if uses(step, "actions/upload-artifact"):
            assert step["with"].get("overwrite") is True, f"{path.name}:{name}: {step['name']}"


def test_the_aggregate_judges_the_cells_the_setup_job_planned() -> None:
    """The aggregate passed on nothing: the report and the gate judged whatever came back. The
    plan travels as a file (the setup job's artifact), never through env: or an output: at full
    width the matrix JSON in EXPECTED_MATRIX was 165 KB, over Linux's 128 KiB for one string."""
    doc = workflow("matrix.yml")
    setup, aggregate = jobs(doc)["setup"], jobs(doc)["aggregate"]
    assert aggregate["if"] == "${{ !cancelled() }}" and aggregate["needs"] == ["setup", "cell"]
    assert "env" not in aggregate and "plan" not in setup["outputs"]
    (emit,) = [s for s in setup["steps"] if s.get("id") == "emit"]
    assert "--plan-out=plan/plan.json" in emit["run"]
    (upload,) = [s for s in setup["steps"] if uses(s, "actions/upload-artifact")]
    assert upload["with"]["name"] == "${{ steps.emit.outputs.prefix }}plan"
    assert upload["with"]["path"] == f"plan/{gha.PLAN_FILE}"
    assert upload["with"]["if-no-files-found"] == "error"
    (fetch,) = [s for s in aggregate["steps"] if s.get("name") == "the run's plan"]
    assert fetch["with"] == {"name": "${{ needs.setup.outputs.prefix }}plan", "path": "plan"}
    runs = [s.get("run", "") for s in aggregate["steps"]]
    manifest = next(i for i, r in enumerate(runs) if "python -m harness.ci.gha manifest" in r)
    assert "--plan plan/plan.json" in runs[manifest]
    report = next(i for i, r in enumerate(runs) if "python -m harness.report.pages" in r)
    gate = next(i for i, r in enumerate(runs) if "python -m harness.ci.gate check" in r)
    assert manifest < report and manifest < gate  # both judge exactly the emitted cells
    assert any("bad_cells" in r for r in runs[report:])


def test_the_gate_gets_the_run_tiers_and_its_result_is_uploaded() -> None:
    """gate.json/gate.md were written after the upload step; the gate never got the tiers."""
    aggregate = jobs(workflow("matrix.yml"))["aggregate"]
    names = [s.get("name", "") for s in aggregate["steps"]]
    manifest = aggregate["steps"][
        names.index("the run's manifest, from the cells the setup job planned")
    ]
    assert manifest["env"]["TIERS"] == "${{ needs.setup.outputs.tiers }}"
    assert '--tiers "$TIERS"' in manifest["run"]
    gate_at = names.index("regression gate against reports/baseline.json")
    upload_at = names.index("upload the report and the gate's result")
    assert upload_at > gate_at
    paths = aggregate["steps"][upload_at]["with"]["path"].split()
    assert {"reports/gate.json", "reports/gate.md", "reports/matrix.html"} <= set(paths)


def test_gpu_backends_are_opt_in_per_repository_and_maintainer_started() -> None:
    setup = jobs(workflow("matrix.yml"))["setup"]
    (emit,) = [s for s in setup["steps"] if s.get("id") == "emit"]
    assert emit["env"]["ENABLED"] == "${{ vars.COMPAT_MATRIX_BACKENDS }}"
    assert emit["env"]["COMPAT_MATRIX_RUNS_ON"] == "${{ vars.COMPAT_MATRIX_RUNS_ON }}"
    assert emit["env"]["EVENT"] == "${{ github.event_name }}"
    assert emit["env"]["REF_PROTECTED"] == "${{ github.ref_protected }}"
    for flag in ("--enabled=", "--event=", "--ref-protected=", "--backend=", "--github-output="):
        assert flag in emit["run"]
    assert "$(" not in emit["run"], "a command substitution hides the loader's failure"
    # pull requests run the ci workflow: cpu only, whatever the variables say
    assert jobs(workflow("ci.yml"))["matrix"]["with"]["backends"] == "cpu"


def test_ci_concurrency_cannot_collide_across_forks() -> None:
    """A bare head_ref grouped every fork's `main` PR together: they cancelled each other."""
    group = workflow("ci.yml")["concurrency"]["group"]
    assert "github.event.pull_request.number" in group and "head_ref" not in group
    assert workflow("nightly.yml")["concurrency"]["cancel-in-progress"] is False


def test_two_gates_of_one_run_never_share_a_group_and_a_newer_push_supersedes_by_name() -> None:
    """matrix.yml had one group per upstream pull request: two calls in one caller run (two
    candidate sets) cancelled each other. It declares no group now (superseding is the caller's);
    gate.yml groups a dispatch by its name and pull request, or by run when it names none."""
    matrix = workflow("matrix.yml")
    assert "concurrency" not in matrix
    assert all("concurrency" not in job for job in jobs(matrix).values())
    gate = workflow("gate.yml")
    assert gate["concurrency"]["cancel-in-progress"] is True
    group = gate["concurrency"]["group"]

    def grouped(payload: dict[str, Any] | None, run_id: int = 1) -> str:
        event = {"client_payload": payload} if payload is not None else {}
        return render(group, {"github": {"event": event, "run_id": run_id}})

    pr = {"repository": "huggingface/safetensors", "number": 7, "sha": "0" * 40}
    source = grouped({"name": "safetensors-source", "pr": pr})
    assert grouped({"name": "safetensors-source", "pr": pr}, run_id=2) == source  # a newer push
    assert grouped({"name": "safetensors-wheel", "pr": pr}) != source  # the other candidate set
    assert grouped({"pr": pr}, 1) != grouped({"pr": pr}, 2)  # no name: never cancelled
    assert grouped(None, 1) != grouped(None, 2)  # by hand
    assert all(len(g) < 200 for g in (source, grouped({"pr": pr}, 10**12)))
    call = jobs(gate)["matrix"]["with"]
    assert call["artifact-prefix"] == (
        "${{ inputs.name || toJSON(github.event.client_payload.name) }}"
    )
    assert call["pr-repository"] == "${{ github.event.client_payload.pr.repository }}"
    assert "github.event.client_payload.pr.number" in call["pr-number"]


def test_two_gates_of_one_run_post_two_commit_statuses() -> None:
    """Both calls posted `compat-matrix / regression gate`: the last writer won. The context
    carries the call's name (the setup job's `name` output), stable across pushes."""
    aggregate = jobs(workflow("matrix.yml"))["aggregate"]
    (post,) = [s for s in aggregate["steps"] if "harness.ci.commit_status" in s.get("run", "")]
    assert post["env"]["CALL"] == "${{ needs.setup.outputs.name }}"
    assert '--call "$CALL"' in post["run"]
    m = spec.load()

    def named(candidates: str, **other: str) -> str:
        request = gha.Request(cells="torch2.6-ao0.8-cpu", candidates=candidates, **other)
        return gha.setup(m, request).outputs["name"]

    at = "safetensors @ git+https://github.com/huggingface/safetensors@{}#subdirectory=bindings/python"
    built = "./dist/safetensors-0.9.0-py3-none-any.whl"
    source, wheel = named(at.format("a" * 40)), named(built)
    assert source == named(at.format("b" * 40))  # the next push: the same status, replaced
    assert source != wheel and source.startswith("safetensors ")
    assert named(built, artifact_prefix="st-wheel") == "st-wheel"
    contexts = {commit_status.context(n) for n in (source, wheel)}
    assert len(contexts) == 2 and all(c.startswith(commit_status.CONTEXT + " (") for c in contexts)
    assert named("") == "" and commit_status.context("") == commit_status.CONTEXT


def test_no_workflow_another_repository_calls_calls_a_local_workflow() -> None:
    """Inside a workflow called from another repository, `uses: ./…` is looked up in the
    caller's repository ("workflow was not found"), and act, which runs the caller's `uses:`
    as a local path, cannot show it. So a workflow with workflow_call calls no `./` workflow
    or action; the ones started here (gate.yml, ci.yml, nightly.yml, baseline.yml) may."""
    for path in WORKFLOWS:
        doc = load(path)
        local = [n for n, j in jobs(doc).items() if str(j.get("uses", "")).startswith("./")]
        local += [n for n, st in steps(doc) if str(st.get("uses", "")).startswith("./")]
        if "workflow_call" in doc["on"]:
            assert path.name in REUSABLE and local == [], (path.name, local)
        else:
            assert path.name not in REUSABLE


def test_the_nightly_uses_the_nightly_profile_and_carries_its_database_as_artifacts() -> None:
    """The example database travelled through the Actions cache, which a gate's candidate could
    write (below): now each cell job keeps it as an artifact, and the nightly's seed job merges
    the last scheduled night's into this run's `hypothesis-seed`, which each cell job starts
    from."""
    nightly = jobs(workflow("nightly.yml"))
    call = nightly["matrix"]["with"]
    assert call["hypothesis-profile"] == "${{ inputs.hypothesis-profile || 'nightly' }}"
    assert call["hypothesis-seed"] == "${{ needs.seed.outputs.artifact }}"
    assert nightly["matrix"]["needs"] == "seed" and nightly["matrix"]["if"] == "${{ !cancelled() }}"
    seed = nightly["seed"]
    assert seed["permissions"] == {"contents": "read", "actions": "read"}
    (merge,) = [s for s in seed["steps"] if "harness.ci.example_seed" in s.get("run", "")]
    assert "--workflow nightly.yml" in merge["run"] and merge["continue-on-error"] is True
    (upload,) = [s for s in seed["steps"] if uses(s, "actions/upload-artifact")]
    assert upload["with"]["name"] == example_seed.SEED and upload["with"]["include-hidden-files"]
    cell = jobs(workflow("matrix.yml"))["cell"]
    assert cell["env"]["HYPOTHESIS_PROFILE"] == "${{ inputs.hypothesis-profile }}"
    on_db = [s for s in cell["steps"] if s.get("with", {}).get("path") == ".hypothesis/examples"]
    download, keep = on_db
    assert uses(download, "actions/download-artifact") and download["continue-on-error"] is True
    assert download["with"]["name"] == "${{ inputs.hypothesis-seed }}"
    assert download["if"] == "${{ inputs.hypothesis-seed != '' }}"
    assert uses(keep, "actions/upload-artifact") and keep["with"]["include-hidden-files"] is True
    assert keep["with"]["name"] == "${{ needs.setup.outputs.prefix }}hypothesis-${{ matrix.job }}"


def test_no_job_restores_what_a_candidate_job_could_write() -> None:
    """A gate's job installs and runs an upstream pull request's code, which can read its run's
    cache token and save any key of the default branch's cache scope (a repository_dispatch runs
    there): the uv cache's restore-keys then handed it to the nightly and CI. No workflow uses
    the Actions cache any more, nor setup-python's; what runs carry across (the example database)
    travels as artifacts of scheduled nightly runs, which install no candidate."""
    for path in WORKFLOWS:
        for name, step in steps(load(path)):
            assert not uses(step, "actions/cache"), (path.name, name)
            assert not uses(step, "actions/cache/restore") and not uses(step, "actions/cache/save")
            if uses(step, "actions/setup-python"):
                assert "cache" not in step.get("with", {}), (path.name, name)
    assert "cache" not in jobs(workflow("matrix.yml"))["setup"]["outputs"]
    granted_actions = granted("actions", "read")
    assert ("nightly.yml", "seed") in granted_actions


CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's own CPU wheel index
# on GitHub's hosted runners only: a self-hosted runner (act's jobs on this host too) keeps the
# machine's configured index
CPU_DEFAULT = f"(runner.environment == 'github-hosted' && '{CPU_INDEX}' || '')"


RUN_CELLS = "nox -s matrix -- --cell … (this job's torch group)"


def cell_step(name: str) -> dict[str, Any]:
    (step,) = [s for s in jobs(workflow("matrix.yml"))["cell"]["steps"] if s.get("name") == name]
    return step


def test_each_backend_index_comes_from_a_repository_variable() -> None:
    """cpu cells on GitHub's hosted runners default to the CPU wheel index (the variable still
    overrides it); the other backends have no default."""
    env = cell_step(RUN_CELLS)["env"]
    for backend in spec.load().backends.values():
        assert backend.index_env, backend.name
        default = f" || {CPU_DEFAULT}" if backend.name == "cpu" else ""
        assert env[backend.index_env] == f"${{{{ vars.{backend.index_env}{default} }}}}"
    # the README's test command runs the default cell (cpu) in ci.yml's tests job, and the
    # nightly's mutation job installs the cpu cells: the same index
    (run_tests,) = [
        s for s in jobs(workflow("ci.yml"))["tests"]["steps"] if "nox -s tests" in s.get("run", "")
    ]
    assert run_tests["env"]["COMPAT_MATRIX_INDEX_CPU"] == env["COMPAT_MATRIX_INDEX_CPU"]
    (mutation,) = [
        s
        for s in jobs(workflow("nightly.yml"))["mutation"]["steps"]
        if s.get("name") == "nox -s mutation"
    ]
    assert mutation["env"]["COMPAT_MATRIX_INDEX_CPU"] == env["COMPAT_MATRIX_INDEX_CPU"]
    # locally no index is assumed: the machine's configured one
    assert spec.load().backends["cpu"].index_url({}) is None


def test_a_dispatched_gate_runs_on_cpu_unless_a_maintainer_names_backends_on_a_protected_ref() -> (
    None
):
    """gate.yml asked for every backend: a maintainer's dispatch (trusted as an event) put an
    unreviewed candidate on every enabled GPU runner, which keeps its caches between jobs."""
    gate = workflow("gate.yml")
    asked = gate["on"]["workflow_dispatch"]["inputs"]["backends"]
    assert asked["default"] == "cpu" and asked["type"] == "string"
    assert jobs(gate)["matrix"]["with"]["backends"] == "${{ inputs.backends || 'cpu' }}"
    known = spec.load().backends
    run = gha.select_backends  # the setup step's rule
    on = ["cuda", "xpu"]
    assert run(["cpu"], on, "workflow_dispatch", known, untrusted=True)[0] == ["cpu"]
    chosen, dropped = run(["cpu", "cuda"], on, "workflow_dispatch", known, untrusted=True)
    assert chosen == ["cpu"] and "protected ref" in dropped["cuda"]
    chosen, _ = run(["cpu", "cuda"], on, "workflow_dispatch", known, untrusted=True, protected=True)
    assert chosen == ["cpu", "cuda"]
    for event in ("repository_dispatch", "pull_request"):  # never, protected or not
        assert run(["cpu", "cuda"], on, event, known, untrusted=True, protected=True)[0] == ["cpu"]


def test_every_artifact_of_a_call_carries_the_calls_prefix() -> None:
    """Two gate calls in one caller run: neither overwrites nor merges the other's artifacts."""
    doc = workflow("matrix.yml")
    prefixed = "${{ needs.setup.outputs.prefix }}"
    made = "${{ steps.emit.outputs.prefix }}"  # the setup job's own upload
    for job_name, step in steps(doc):
        if uses(step, "actions/upload-artifact"):
            name = step["with"]["name"]
            assert name == "${{ matrix.artifact }}" or name.startswith((prefixed, made)), name
        if uses(step, "actions/download-artifact"):
            got = step["with"].get("pattern") or step["with"]["name"]
            seed = got == "${{ inputs.hypothesis-seed }}"  # the caller's artifact, named by it
            assert got.startswith(prefixed) or seed, (job_name, got)
    assert jobs(doc)["aggregate"]["outputs"]["artifact"] == f"{prefixed}matrix-report"
    assert doc["on"]["workflow_call"]["outputs"]["prefix"]["value"] == (
        "${{ jobs.setup.outputs.prefix }}"
    )
    (emit,) = [s for s in jobs(doc)["setup"]["steps"] if s.get("id") == "emit"]
    assert '--artifact-prefix="$PREFIX"' in emit["run"]
    assert emit["env"]["PREFIX"] == "${{ inputs.artifact-prefix }}"


def granted(scope: str, level: str) -> list[tuple[str, str]]:
    """(workflow, job) of every job whose permissions grant ``scope: level``."""
    return [
        (path.name, name)
        for path in WORKFLOWS
        for name, job in jobs(load(path)).items()
        if (job.get("permissions") or {}).get(scope) == level
    ]


def test_only_the_nightly_issue_job_may_write_issues() -> None:
    assert granted("issues", "write") == [("nightly.yml", "issue")]
    issue = jobs(workflow("nightly.yml"))["issue"]
    assert issue["if"] == "${{ !cancelled() && github.event_name == 'schedule' }}"
    assert any("harness.ci.nightly_issue" in s.get("run", "") for s in issue["steps"])


def test_gate_entry_points_and_outputs() -> None:
    """gate.yml: the dispatch form and the upstream's repository_dispatch; matrix.yml: the
    workflow an upstream CI calls, whose outputs come from its aggregate job in one hop (act
    passes no outputs through two levels of workflow_call)."""
    doc = workflow("gate.yml")
    assert set(doc["on"]) == {"workflow_dispatch", "repository_dispatch"}
    assert doc["on"]["repository_dispatch"]["types"] == ["upstream-pr"]
    described = doc["on"]["workflow_dispatch"]["inputs"]["candidates"]["description"]
    assert "spaces" in described and "commas" in described and "one per line" not in described
    call = jobs(doc)["matrix"]
    assert call["uses"].startswith("./.github/workflows/matrix.yml")
    assert call["with"]["gate"] is True
    assert call["with"]["candidates"] == (
        "${{ inputs.candidates || toJSON(github.event.client_payload.candidates) }}"
    )
    matrix = workflow("matrix.yml")
    outputs = matrix["on"]["workflow_call"]["outputs"]
    for k in ("verdict", "regressions", "missing", "artifact"):
        assert outputs[k]["value"] == f"${{{{ jobs.aggregate.outputs.{k} }}}}"
    inputs = matrix["on"]["workflow_call"]["inputs"]
    assert {"candidates", "pr-repository", "pr-number", "pr-sha", "gate"} <= set(inputs)
    assert "judged" not in inputs  # setup writes it from the pr-* inputs
    setup = jobs(matrix)["setup"]
    (emit,) = [s for s in setup["steps"] if s.get("id") == "emit"]
    assert {"CANDIDATES", "PR_REPOSITORY", "PR_NUMBER", "PR_SHA"} <= set(emit["env"])
    for out in ("candidates", "judged"):
        assert setup["outputs"][out] == f"${{{{ steps.emit.outputs.{out} }}}}"
    # every cell installs the candidates setup resolved, never the raw input
    cell_run = cell_step(RUN_CELLS)
    assert cell_run["env"]["COMPAT_MATRIX_CANDIDATES"] == "${{ needs.setup.outputs.candidates }}"


def test_the_gate_reports_to_the_upstream_commit_with_a_secret_never_the_payload() -> None:
    matrix = workflow("matrix.yml")
    assert matrix["on"]["workflow_call"]["secrets"]["status-token"]["required"] is False
    aggregate = jobs(matrix)["aggregate"]
    assert aggregate["permissions"] == {"contents": "read"}
    names = [s.get("name", "") for s in aggregate["steps"]]
    (post,) = [s for s in aggregate["steps"] if "harness.ci.commit_status" in s.get("run", "")]
    assert post["env"]["UPSTREAM_STATUS_TOKEN"] == "${{ secrets.status-token }}"
    assert post["continue-on-error"] is True
    assert post["if"] == "${{ !cancelled() && inputs.pr-sha != '' }}"
    # after the outputs and the uploads, which a failed post must never hold back
    at = names.index(post["name"])
    assert at > names.index("the gate's verdict as outputs")
    assert at > names.index("upload the report and the gate's result")
    gate = jobs(workflow("gate.yml"))["matrix"]
    assert gate["secrets"] == {"status-token": "${{ secrets.COMPAT_MATRIX_STATUS_TOKEN }}"}
    for path in WORKFLOWS:
        text = path.read_text()
        assert not re.search(r"TOKEN[^\n]*client_payload", text), path.name


def test_the_baseline_workflow_records_and_uploads_a_baseline() -> None:
    doc = workflow("baseline.yml")
    assert set(doc["on"]) == {"workflow_dispatch"}
    assert jobs(doc)["matrix"]["with"]["record-baseline"] is True
    aggregate = jobs(workflow("matrix.yml"))["aggregate"]
    named = "${{ needs.setup.outputs.prefix }}baseline"  # "baseline" in baseline.yml's one call
    upload = [s for s in aggregate["steps"] if s.get("with", {}).get("name") == named]
    assert upload and upload[0]["with"]["path"] == "reports/baseline.json"


def test_the_report_is_a_pages_artifact_deployed_when_a_variable_says_so() -> None:
    aggregate = jobs(workflow("matrix.yml"))["aggregate"]
    pages = [s for s in aggregate["steps"] if uses(s, "actions/upload-pages-artifact")]
    assert pages and pages[0]["if"] == "${{ !cancelled() && inputs.pages }}"
    nightly = jobs(workflow("nightly.yml"))
    # the nightly publishes the page with its history: from the history job, not the aggregate
    assert nightly["matrix"]["with"]["pages"] is False
    published = [s for s in nightly["history"]["steps"] if uses(s, "actions/upload-pages-artifact")]
    assert published and published[0]["if"] == "${{ vars.COMPAT_MATRIX_PAGES == 'true' }}"
    deploy = nightly["pages"]
    assert deploy["needs"] == "history"
    assert "vars.COMPAT_MATRIX_PAGES == 'true'" in deploy["if"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


def test_the_nightly_judges_with_the_history_of_earlier_nightlies() -> None:
    """issue 15: the nightly downloads the previous nightlies' reports for the history view and
    the gate (a regression flaky across runs is flaky); only that job may read Actions."""
    nightly = jobs(workflow("nightly.yml"))
    history = nightly["history"]
    assert history["needs"] == "matrix" and history["if"] == "${{ !cancelled() }}"
    assert history["permissions"] == {"contents": "read", "actions": "read"}
    assert granted("actions", "read") == [("nightly.yml", "seed"), ("nightly.yml", "history")]
    runs = {step.get("name", ""): step for step in history["steps"]}
    fetch = runs["earlier nightlies' reports"]
    assert fetch["if"] == "${{ github.event_name == 'schedule' }}"  # never under act
    assert "python -m harness.ci.previous_runs --workflow nightly.yml" in fetch["run"]
    judged = runs["the report and the gate with the history"]["run"]
    assert "python -m harness.report.pages --reports reports" in judged and '"${hist[@]}"' in judged
    assert "python -m harness.ci.gate check" in judged
    assert runs["upload the report with its history"]["with"]["name"] == "matrix-report-history"
    issue = nightly["issue"]
    assert issue["needs"] == ["matrix", "history", "prerelease", "bisect"]
    downloads = [s for s in issue["steps"] if uses(s, "actions/download-artifact")]
    assert [d["with"]["name"] for d in downloads] == [
        "matrix-report-history",
        "prerelease-report",
        "nightly-bisect",
    ]
    aggregate = jobs(workflow("matrix.yml"))["aggregate"]
    upload = next(
        s for s in aggregate["steps"] if s.get("name") == "upload the report and the gate's result"
    )
    assert "reports/run.json" in upload["with"]["path"].split()  # the manifest travels with it


def test_the_nightly_runs_mutation_testing_as_its_own_job_on_the_schedule() -> None:
    """issue 14: nox -s mutation in its own job, reports/mutation.json uploaded; only on the
    schedule or when a dispatch asks for it, so a dispatched scenario (act) never starts it."""
    doc = workflow("nightly.yml")
    mutation = jobs(doc)["mutation"]
    assert mutation["if"] == "${{ github.event_name == 'schedule' || inputs.mutation }}"
    asked = doc["on"]["workflow_dispatch"]["inputs"]["mutation"]
    assert asked["type"] == "boolean" and asked["default"] is False
    assert "needs" not in mutation  # its own job: it waits for no cell and no cell waits for it
    assert mutation["permissions"] == {"contents": "read"}
    assert mutation["timeout-minutes"] <= 360  # a hosted runner's limit
    commands = [
        line.strip() for step in mutation["steps"] for line in step.get("run", "").splitlines()
    ]
    assert "python -m nox -s mutation" in commands
    (upload,) = [s for s in mutation["steps"] if uses(s, "actions/upload-artifact")]
    assert upload["with"]["path"] == "reports/mutation.json"
    assert upload["with"]["if-no-files-found"] == "error"
    assert upload["if"] == "${{ !cancelled() }}"


def test_the_nightly_runs_every_act_scenario_whatever_changed() -> None:
    """issue 43: .ci/run leaves the act scenarios out while nothing they exercise changed
    (harness/ci/act_scope.py); the nightly runs them all, on the schedule or when asked, in a job
    of its own, so a dispatched scenario (act) never starts act inside act."""
    doc = workflow("nightly.yml")
    job = jobs(doc)["workflows"]
    assert job["if"] == "${{ github.event_name == 'schedule' || inputs.workflows }}"
    asked = doc["on"]["workflow_dispatch"]["inputs"]["workflows"]
    assert asked["type"] == "boolean" and asked["default"] is False
    assert "needs" not in job and job["permissions"] == {"contents": "read"}
    # more than .ci/run gives the same scenarios (a hosted runner may be slower than this machine)
    act_limit = re.search(r"\[act\]=(\d+)", (ROOT / ".ci" / "stages").read_text())
    assert act_limit is not None and job["timeout-minutes"] * 60 > int(act_limit.group(1))
    (step,) = [s for s in job["steps"] if "tests/workflows" in s.get("run", "")]
    assert step["env"][act_scope.ALWAYS] == "always"
    (pytest_line,) = [line for line in step["run"].splitlines() if "pytest tests/workflows" in line]
    narrowing = {"-m", "-k", "--deselect"} & set(pytest_line.split()[3:])  # past `python -m pytest`
    assert not narrowing, pytest_line  # every scenario runs
    cell_env = cell_step(RUN_CELLS)["env"]
    assert step["env"]["COMPAT_MATRIX_INDEX_CPU"] == cell_env["COMPAT_MATRIX_INDEX_CPU"]
    installed = step["run"].split()
    assert "requirements/act.txt" in installed and "requirements/harness.txt" in installed


def test_the_nightly_runs_the_prerelease_tier_and_never_fails_on_it() -> None:
    """issue 42: the prerelease tier runs on the schedule (or when asked) in a job of its own,
    whose failure does not fail the night; its report reaches the regression issue."""
    doc = workflow("nightly.yml")
    job = jobs(doc)["prerelease"]
    assert job["if"] == "${{ github.event_name == 'schedule' || inputs.prerelease }}"
    asked = doc["on"]["workflow_dispatch"]["inputs"]["prerelease"]
    assert asked["type"] == "boolean" and asked["default"] is False  # never in a scenario
    assert job["continue-on-error"] is True and job["permissions"] == {"contents": "read"}
    (step,) = [s for s in job["steps"] if "nox -s matrix" in s.get("run", "")]
    assert "--tier prerelease --backend cpu" in step["run"]
    assert (
        step["env"]["COMPAT_MATRIX_INDEX_CPU"]
        == cell_step(RUN_CELLS)["env"]["COMPAT_MATRIX_INDEX_CPU"]
    )
    (upload,) = [s for s in job["steps"] if "upload-artifact" in s.get("uses", "")]
    assert upload["with"]["name"] == "prerelease-report" and upload["if"] == "${{ !cancelled() }}"
    issue = jobs(doc)["issue"]
    (download,) = [
        s for s in issue["steps"] if s.get("with", {}).get("name") == "prerelease-report"
    ]
    assert download["continue-on-error"] is True
    (script,) = [s for s in issue["steps"] if "harness.ci.nightly_issue" in s.get("run", "")]
    assert f"--matrix-json {download['with']['path']}/matrix.json" in script["run"]


def test_the_nightly_bisects_a_new_release_that_turned_a_cell_red() -> None:
    """issue 42 item 5: after the matrix's report (with its history) and the prerelease tier, a
    job of its own runs the bisect step on both reports, never fatal; its findings reach the
    regression issue, whose script reads them from where they were downloaded."""
    doc = workflow("nightly.yml")
    job = jobs(doc)["bisect"]
    assert job["needs"] == ["history", "prerelease"]
    assert (
        job["if"] == "${{ !cancelled() && (github.event_name == 'schedule' || inputs.prerelease) }}"
    )
    assert job["continue-on-error"] is True and job["permissions"] == {"contents": "read"}
    downloads = {
        s["with"]["name"]: s["with"]["path"]
        for s in job["steps"]
        if uses(s, "actions/download-artifact")
    }
    assert set(downloads) == {"matrix-report-history", "prerelease-report"}
    (step,) = [s for s in job["steps"] if "nox -s bisect_nightly" in s.get("run", "")]
    command = step["run"].replace("\\\n", " ")
    for path in downloads.values():
        assert f"--matrix-json {path}/matrix.json" in command
    assert (
        step["env"]["COMPAT_MATRIX_INDEX_CPU"]
        == cell_step(RUN_CELLS)["env"]["COMPAT_MATRIX_INDEX_CPU"]
    )
    (upload,) = [s for s in job["steps"] if uses(s, "actions/upload-artifact")]
    assert upload["with"]["name"] == "nightly-bisect" and upload["if"] == "${{ !cancelled() }}"
    assert "reports/nightly-bisect.json" in upload["with"]["path"].split()
    issue = jobs(doc)["issue"]
    (download,) = [s for s in issue["steps"] if s.get("with", {}).get("name") == "nightly-bisect"]
    assert download["continue-on-error"] is True
    (script,) = [s for s in issue["steps"] if "harness.ci.nightly_issue" in s.get("run", "")]
    assert f"--bisect-json {download['with']['path']}/nightly-bisect.json" in script["run"]


def test_nightly_schedule_and_inputs() -> None:
    doc = workflow("nightly.yml")
    (cron,) = [entry["cron"] for entry in doc["on"]["schedule"]]
    assert cron.split()[0] != "0", "not at minute 0"
    defaults = doc["on"]["workflow_dispatch"]["inputs"]
    assert set(defaults["backends"]["default"].split()) == set(spec.load().backends)
    assert set(defaults["tiers"]["default"].split()) == set(gha.WORKFLOW_TIERS)
    call = jobs(doc)["matrix"]["with"]
    assert (
        call["gate"] is True
        and call["tiers"] == "${{ inputs.tiers || 'core extended downstream' }}"
    )


def test_matrix_pipeline_shape() -> None:
    doc = workflow("matrix.yml")
    setup, cell, aggregate = (jobs(doc)[k] for k in ("setup", "cell", "aggregate"))
    assert any("python -m harness.ci.gha matrix" in s.get("run", "") for s in setup["steps"])
    strategy = cell["strategy"]
    assert strategy["fail-fast"] is False and "max-parallel" in strategy
    assert strategy["matrix"] == "${{ fromJSON(needs.setup.outputs.jobs) }}"
    upload = [s for s in cell["steps"] if uses(s, "actions/upload-artifact")]
    assert upload[0]["with"]["name"] == "${{ matrix.artifact }}"
    assert upload[0]["if"] == "${{ !cancelled() }}"
    download = [s for s in aggregate["steps"] if uses(s, "actions/download-artifact")]
    assert download[0]["with"]["name"] == "${{ needs.setup.outputs.prefix }}plan"
    assert download[1]["with"]["pattern"] == "${{ needs.setup.outputs.prefix }}reports-*"
    assert download[1]["with"]["merge-multiple"] is True
    assert any("GITHUB_STEP_SUMMARY" in s.get("run", "") for s in aggregate["steps"])


def test_a_cell_job_runs_its_torch_group_as_nox_s_matrix_does() -> None:
    """One job per torch group (harness/ci/fanout.py), running `nox -s matrix -- --cell …` on
    its cells: the unit a local run has, carried verdicts included, `--full` when asked."""
    doc = jobs(workflow("matrix.yml"))
    assert {k for k, j in doc.items() if "matrix" in j.get("strategy", {})} == {"cell"}
    cell = doc["cell"]
    assert cell["name"] == "${{ matrix.job }}" and cell["runs-on"] == "${{ matrix.runs-on }}"
    assert cell["timeout-minutes"] == "${{ matrix.timeout-minutes }}"
    assert cell["strategy"]["matrix"] == "${{ fromJSON(needs.setup.outputs.jobs) }}"
    (python,) = [s for s in cell["steps"] if uses(s, "actions/setup-python")]
    assert python["with"]["python-version"] == "${{ matrix.pythons }}"
    step = cell_step(RUN_CELLS)
    assert step["env"]["CELLS"] == "${{ matrix.cells }}"
    assert step["env"]["TIERS"] == "${{ matrix.tiers }}"
    assert step["env"]["FULL"] == "${{ inputs.full }}"
    assert 'args+=(--cell "$cell")' in step["run"] and "args+=(--full)" in step["run"]
    assert step["run"].rstrip().endswith('python -m nox -s matrix -- "${args[@]}"')
    aggregate = doc["aggregate"]
    (check,) = [s for s in aggregate["steps"] if "harness.cells.carry" in s.get("run", "")]
    assert check["if"] == "${{ inputs.full }}"  # across jobs too: a group cut in two


def test_the_plan_holds_the_cells_nox_lists_each_in_one_job() -> None:
    m = spec.load()
    planned = gha.plan(m, list(spec.TIERS))
    artifacts = [e["artifact"] for e in planned["jobs"]]
    assert len(artifacts) == len(set(artifacts)), "artifact names must be unique per run"
    done = run_module("nox", "-l", "--json", "-t", "cell", check=True)
    listed = {
        s["name"].removeprefix("tests-") for s in json.loads(done.stdout) if "cell" in s["tags"]
    }
    assert set(planned["cells"]) == listed
    in_jobs = [c for e in planned["jobs"] for c in e["cells"].split()]
    assert sorted(in_jobs) == sorted(listed)  # each cell in exactly one job
    runners = {e["backend"]: e["runs-on"] for e in planned["jobs"]}
    assert runners["cpu"] == ["ubuntu-24.04"] and runners["mps"] == ["macos-14"]
    ci = gha.plan(m, ["core"], ["cpu"])
    assert len(ci["cells"]) == 20  # 12 pairs + 8 corners
    assert [e["job"] for e in ci["jobs"]] == [f"torch2.{n}-cpu" for n in (3, 4, 5, 6)]


# --- the browser step, executed with stand-in apt tools ------------------------------------


def browser_step() -> str:
    (step,) = [
        s
        for s in jobs(workflow("ci.yml"))["tests"]["steps"]
        if "browser" in str(s.get("name", "")).lower()
    ]
    return str(step["run"])


def fake_bin(tmp: Path, chrome: bool, candidate: str) -> Path:
    """A PATH with the shell tools the step needs, recording apt-get / sudo calls in calls.log."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in ("bash", "sh", "id", "grep", "cat", "env", "dirname"):
        found = shutil.which(name)
        assert found, name
        (bin_dir / name).symlink_to(found)
    log = tmp / "calls.log"
    scripts = {
        "apt-get": f'echo "apt-get $*" >> {log}',
        "sudo": f'echo "sudo $*" >> {log}; exec "$@"',
        "apt-cache": f'printf "chromium:\\n  Installed: (none)\\n  Candidate: {candidate}\\n"',
    }
    if chrome:
        scripts["google-chrome"] = "exit 0"
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!{shutil.which('bash')}\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


@pytest.mark.parametrize(
    ("chrome", "candidate", "installs"),
    [
        (True, "1:130.0-1", False),  # GitHub's ubuntu-24.04: its own Chrome, no apt at all
        (False, "(none)", False),  # Ubuntu: `chromium` has no installation candidate
        (False, "1:130.0-1", True),  # Debian: install its chromium
    ],
)
def test_the_browser_step_uses_the_runner_chrome_first(
    tmp_path: Path, chrome: bool, candidate: str, installs: bool
) -> None:
    bin_dir = fake_bin(tmp_path, chrome, candidate)
    done = subprocess.run(
        [str(bin_dir / "bash"), "-e", "-c", browser_step()],
        cwd=ROOT,
        env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/tmp")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = tmp_path / "calls.log"
    calls = log.read_text() if log.exists() else ""
    assert ("apt-get install -y -qq chromium" in calls) is installs, calls
    if chrome:
        assert calls == ""
