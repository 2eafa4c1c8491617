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

from harness.ci import act_scope, gha
from harness.matrix import spec
from tests.common.workflow_files import jobs, load, steps, uses, workflow

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
    }


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
    "actions/cache": 5,
    "actions/upload-artifact": 6,
    "actions/download-artifact": 7,
    "actions/upload-pages-artifact": 5,
    "actions/deploy-pages": 5,
}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_release_that_runs_on_node24(path: Path) -> None:
    for line in path.read_text().splitlines():
        m = re.search(r"uses:\s*([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@[0-9a-f]{40}\s*#\s*v(\d+)", line)
        if m:
            action, major = m.group(1), int(m.group(2))
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


def test_the_aggregate_judges_the_cells_the_setup_job_emitted() -> None:
    """The aggregate passed on nothing: the report and the gate judged whatever came back."""
    aggregate = jobs(workflow("matrix.yml"))["aggregate"]
    cell_jobs = [job for job, _ in gha.CELL_JOBS]
    assert aggregate["if"] == "${{ !cancelled() }}" and aggregate["needs"] == ["setup", *cell_jobs]
    assert aggregate["env"]["EXPECTED_MATRIX"] == "${{ needs.setup.outputs.matrix }}"
    runs = [s.get("run", "") for s in aggregate["steps"]]
    manifest = next(i for i, r in enumerate(runs) if "python -m harness.ci.gha manifest" in r)
    report = next(i for i, r in enumerate(runs) if "python -m harness.report.pages" in r)
    gate = next(i for i, r in enumerate(runs) if "python -m harness.ci.gate check" in r)
    assert manifest < report and manifest < gate  # both judge exactly the emitted cells
    assert any("bad_cells" in r for r in runs[report:])


def test_the_gate_gets_the_run_tiers_and_its_result_is_uploaded() -> None:
    """gate.json/gate.md were written after the upload step; the gate never got the tiers."""
    aggregate = jobs(workflow("matrix.yml"))["aggregate"]
    names = [s.get("name", "") for s in aggregate["steps"]]
    manifest = aggregate["steps"][
        names.index("the run's manifest, from the cells the setup job emitted")
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
    for flag in ("--enabled=", "--event=", "--backend=", "--github-output="):
        assert flag in emit["run"]
    assert "$(" not in emit["run"], "a command substitution hides the loader's failure"
    # pull requests run the ci workflow: cpu only, whatever the variables say
    assert jobs(workflow("ci.yml"))["matrix"]["with"]["backends"] == "cpu"


def test_ci_concurrency_cannot_collide_across_forks() -> None:
    """A bare head_ref grouped every fork's `main` PR together: they cancelled each other."""
    group = workflow("ci.yml")["concurrency"]["group"]
    assert "github.event.pull_request.number" in group and "head_ref" not in group
    assert workflow("nightly.yml")["concurrency"]["cancel-in-progress"] is False


def test_a_newer_push_to_an_upstream_pr_cancels_its_older_gate() -> None:
    """matrix.yml: one group per upstream pull request (its repository and number, from the
    inputs, which gate.yml fills from the dispatch payload), cancelled in progress; a call naming
    no pull request is its own group; the prefix keeps it apart from a caller's own group."""
    concurrency = workflow("matrix.yml")["concurrency"]
    assert concurrency["cancel-in-progress"] is True
    group = concurrency["group"]
    assert group.startswith("compat-matrix-gate-${{")
    assert "inputs.pr-number" in group and "inputs.pr-repository" in group
    assert "github.run_id" in group and "inputs.candidates" in group
    call = jobs(workflow("gate.yml"))["matrix"]["with"]
    assert call["pr-repository"] == "${{ github.event.client_payload.pr.repository }}"
    assert "github.event.client_payload.pr.number" in call["pr-number"]
    assert "concurrency" not in workflow("gate.yml")  # the same group around the call: a deadlock


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


def test_the_nightly_uses_the_nightly_profile_and_keeps_its_database() -> None:
    call = jobs(workflow("nightly.yml"))["matrix"]["with"]
    assert call["hypothesis-profile"] == "${{ inputs.hypothesis-profile || 'nightly' }}"
    cell = jobs(workflow("matrix.yml"))["cell"]
    assert cell["env"]["HYPOTHESIS_PROFILE"] == "${{ inputs.hypothesis-profile }}"
    on_db = [s for s in cell["steps"] if s.get("with", {}).get("path") == ".hypothesis/examples"]
    kinds = sorted(s["uses"].split("@")[0] for s in on_db)
    assert kinds == ["actions/cache/restore", "actions/cache/save", "actions/upload-artifact"]
    restore = next(s for s in on_db if "restore" in s["uses"])
    assert restore["with"]["restore-keys"].strip() == "hypothesis-${{ matrix.cell }}-"
    upload = next(s for s in on_db if "upload" in s["uses"])
    assert upload["with"]["include-hidden-files"] is True


def test_uv_cache_persists_keyed_on_the_pins() -> None:
    cell = jobs(workflow("matrix.yml"))["cell"]
    on_uv = [
        s
        for s in cell["steps"]
        if str(s.get("with", {}).get("path", "")).split() == ["~/.cache/uv", "~/Library/Caches/uv"]
    ]  # uv's cache folder on Linux and on macOS
    restore, save = on_uv
    assert uses(restore, "actions/cache/restore") and uses(save, "actions/cache/save")
    key = restore["with"]["key"]
    assert "${{ matrix.torch }}" in key and "hashFiles('matrix.toml', 'requirements/*.txt')" in key
    # the Pythons of one torch install different wheels: one entry each, restored by its own
    assert "-py${{ matrix.python }}-" in key
    assert "-py${{ matrix.python }}-" in restore["with"]["restore-keys"]
    assert save["with"]["key"] == "${{ steps.uv-cache.outputs.cache-primary-key }}"


CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's own CPU wheel index
# on GitHub's hosted runners only: a self-hosted runner (act's jobs on this host too) keeps the
# machine's configured index
CPU_DEFAULT = f"(runner.environment == 'github-hosted' && '{CPU_INDEX}' || '')"


def cell_step(name: str) -> dict[str, Any]:
    (step,) = [s for s in jobs(workflow("matrix.yml"))["cell"]["steps"] if s.get("name") == name]
    return step


def test_each_backend_index_comes_from_a_repository_variable() -> None:
    """cpu cells on GitHub's hosted runners default to the CPU wheel index (the variable still
    overrides it); the other backends have no default."""
    env = cell_step("run the cell")["env"]
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


def test_candidate_runs_never_save_a_cache_that_other_runs_restore() -> None:
    """A gate cell installs an upstream pull request's code and then runs: every cache save in
    the cell job is for trusted runs (no candidate) only; the setup job decides which."""
    doc = workflow("matrix.yml")
    cell = jobs(doc)["cell"]
    saves = [s for s in cell["steps"] if uses(s, "actions/cache/save")]
    assert len(saves) == 2  # uv's cache and the hypothesis example database
    for step in saves:
        assert "needs.setup.outputs.trusted == 'true'" in step["if"], step["name"]
    assert jobs(doc)["setup"]["outputs"]["trusted"] == "${{ steps.emit.outputs.trusted }}"
    (emit,) = [s for s in jobs(doc)["setup"]["steps"] if s.get("id") == "emit"]
    assert emit["env"]["CANDIDATES"] == "${{ inputs.candidates }}"
    assert '--candidates="$CANDIDATES"' in emit["run"]
    # uv's cache is pruned for CI right before it is saved, on GitHub's own runners only
    names = [s.get("name", "") for s in cell["steps"]]
    prune = cell["steps"][names.index("prune uv's cache for CI before it is saved")]
    assert names.index("save uv's cache") == names.index(prune["name"]) + 1
    assert prune["run"] == "python -m uv cache prune --ci"
    assert "runner.environment == 'github-hosted'" in prune["if"]
    assert "needs.setup.outputs.trusted == 'true'" in prune["if"]


def test_every_artifact_of_a_call_carries_the_calls_prefix() -> None:
    """Two gate calls in one caller run: neither overwrites nor merges the other's artifacts."""
    doc = workflow("matrix.yml")
    prefixed = "${{ needs.setup.outputs.prefix }}"
    for job_name, step in steps(doc):
        if uses(step, "actions/upload-artifact"):
            name = step["with"]["name"]
            assert name == "${{ matrix.artifact }}" or name.startswith(prefixed), (job_name, name)
        if uses(step, "actions/download-artifact"):
            assert step["with"]["pattern"].startswith(prefixed), job_name
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
    for job, _ in gha.CELL_JOBS:
        (cell_run,) = [s for s in jobs(matrix)[job]["steps"] if s.get("name") == "run the cell"]
        assert (
            cell_run["env"]["COMPAT_MATRIX_CANDIDATES"] == "${{ needs.setup.outputs.candidates }}"
        )


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
    assert granted("actions", "read") == [("nightly.yml", "history")]
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
    cell_env = cell_step("run the cell")["env"]
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
        == cell_step("run the cell")["env"]["COMPAT_MATRIX_INDEX_CPU"]
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
        == cell_step("run the cell")["env"]["COMPAT_MATRIX_INDEX_CPU"]
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
    assert download[0]["with"]["pattern"] == "${{ needs.setup.outputs.prefix }}reports-*"
    assert download[0]["with"]["merge-multiple"] is True
    assert any("GITHUB_STEP_SUMMARY" in s.get("run", "") for s in aggregate["steps"])


def test_each_cell_job_runs_one_part_of_the_matrix_with_the_same_steps() -> None:
    """GitHub starts no run whose matrix would make more than 256 jobs: setup splits the cells
    over matrix.yml's cell jobs (harness.ci.gha.CELL_JOBS), alike but for their part and their
    condition; a later one runs only when setup says there is more."""
    doc = jobs(workflow("matrix.yml"))
    first, *later = gha.CELL_JOBS
    with_matrix = {k for k, j in doc.items() if "matrix" in j.get("strategy", {})}
    assert with_matrix == {job for job, _ in gha.CELL_JOBS}
    for job, part in gha.CELL_JOBS:
        assert doc[job]["strategy"]["matrix"] == f"${{{{ fromJSON(needs.setup.outputs.{part}) }}}}"
        assert doc["setup"]["outputs"][part] == f"${{{{ steps.emit.outputs.{part} }}}}"
        same = {k: v for k, v in doc[job].items() if k not in ("if", "strategy")}
        assert same == {k: v for k, v in doc[first[0]].items() if k not in ("if", "strategy")}
        assert {k: v for k, v in doc[job]["strategy"].items() if k != "matrix"} == {
            k: v for k, v in doc[first[0]]["strategy"].items() if k != "matrix"
        }
    assert "if" not in doc[first[0]]
    for job, _ in later:
        assert doc[job]["if"] == "${{ needs.setup.outputs.more == 'true' }}"


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
    assert len(ci) == 20 and {e["backend"] for e in ci} == {"cpu"}  # 12 pairs + 8 corners


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
