"""harness.ci.nightly_issue: the issue text from gate.json and what the night's jobs produced, and
its API calls against a local server on 127.0.0.1 that plays GitHub's REST API and records every
request; and the nightly workflow's jobs around it (history, issue, pages, mutation), read with
yaml and their scripts run here with a stand-in `python` for what needs the runner."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.ci import gate, gha, nightly_issue
from harness.matrix import spec
from harness.mutation import runner as mutation_run
from tests.common.harness.gate_runs import RUN, TEST, snapshot_cell
from tests.common.harness.local_http import serving
from tests.common.harness.workflow_files import jobs, uses, workflow
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]
REPO = "owner/compat-matrix"


def gate_result(ok: bool) -> dict[str, Any]:
    """A real gate result (harness.ci.gate.compare): green, or one regression and one lost cell."""
    passed = {TEST: "passed"}
    baseline = {
        "schema": 2,
        "cells": {
            "torch2.6-ao0.8-cpu": snapshot_cell("passed", passed),
            "torch2.5-ao0.7-cpu": snapshot_cell("passed", passed),
        },
    }
    current = {
        "cells": {
            "torch2.6-ao0.8-cpu": snapshot_cell(
                "passed" if ok else "failed", {TEST: "passed" if ok else "failed"}
            ),
            "torch2.5-ao0.7-cpu": snapshot_cell(
                "passed" if ok else "no-record", passed if ok else {}
            ),
        }
    }
    return gate.compare(baseline, current)


def test_the_issue_text_is_the_gate_table_and_a_link_to_the_run() -> None:
    text = nightly_issue.issue_text(gate_result(False), RUN)
    assert text["title"] == nightly_issue.TITLE
    body = text["body"]
    assert body.startswith(nightly_issue.MARKER)
    assert f"[the run]({RUN})" in body
    assert "### Regression gate: ❌ the gate fails" in body
    assert f"| regression | torch2.6-ao0.8-cpu | `{TEST}` | passed | failed | yes |" in body
    assert "| missing | torch2.5-ao0.7-cpu | `*` | passed | no-record | yes |" in body
    assert text == nightly_issue.issue_text(gate_result(False), RUN)  # a pure function


def test_the_issue_text_without_a_gate_result_says_so() -> None:
    body = nightly_issue.issue_text(None, RUN)["body"]
    assert "produced no `gate.json`" in body and RUN in body


def test_a_huge_gate_table_is_cut_to_fit_an_issue() -> None:
    gate = gate_result(False)
    gate["rows"] = gate["rows"][:1] * 5000
    body = nightly_issue.issue_text(gate, RUN)["body"]
    assert len(body) <= 65_536 and "4800 more rows in gate.json" in body


class FakeGitHub(ThreadingHTTPServer):
    """Issues of one repository, in memory; every request is recorded."""

    def __init__(self, issues: list[dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.issues = issues
        self.requests: list[tuple[str, str, Any, dict[str, str]]] = []


class Handler(BaseHTTPRequestHandler):
    server: FakeGitHub

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, doc: Any) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.requests.append((self.command, self.path, body, dict(self.headers)))
        prefix = f"/api/repos/{REPO}/issues"
        path = self.path.split("?")[0]
        issues = self.server.issues
        if self.command == "GET" and path == prefix:
            self._reply(200, [i for i in issues if i["state"] == "open"])
        elif self.command == "POST" and path == prefix:
            issue = {"number": 100 + len(issues), "state": "open", **body}
            issues.append(issue)
            self._reply(201, issue)
        elif self.command == "PATCH" and path.startswith(prefix + "/"):
            number = int(path.rsplit("/", 1)[1])
            issue = next(i for i in issues if i["number"] == number)
            issue.update(body)
            self._reply(200, issue)
        elif self.command == "POST" and path.endswith("/comments"):
            self._reply(201, {"id": 1, **body})
        else:
            self._reply(404, {"message": "Not Found"})

    do_GET = do_POST = do_PATCH = _handle


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving(
        FakeGitHub([{"number": 7, "state": "open", "title": "a PR", "pull_request": {}}])
    ) as server:
        yield server


def api_env(server: FakeGitHub) -> dict[str, str]:
    """This process's environment with the GitHub variables pointing at the local server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return env | {
        "GITHUB_API_URL": f"http://127.0.0.1:{server.server_address[1]}/api",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": "token-for-the-test",
    }


def run_script(
    server: FakeGitHub, gate: dict[str, Any] | None, tmp: Path, *facts: str
) -> subprocess.CompletedProcess[str]:
    path = tmp / "gate.json"
    if gate is not None:
        path.write_text(json.dumps(gate))
    elif path.exists():
        path.unlink()
    env = api_env(server)
    args = [f"--gate={path}", f"--run-url={RUN}", *facts]
    return run_module("harness.ci.nightly_issue", *args, env=env, timeout=60)


def calls(server: FakeGitHub) -> list[tuple[str, str]]:
    return [
        (method, path.split("?")[0].removeprefix(f"/api/repos/{REPO}"))
        for method, path, _, _ in server.requests
    ]


def test_red_opens_then_updates_one_issue_and_green_closes_it(
    github: FakeGitHub, tmp_path: Path
) -> None:
    done = run_script(github, gate_result(False), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "opened #101"
    assert calls(github) == [("GET", "/issues"), ("POST", "/issues")]
    _, query, created, headers = (
        github.requests[0][0],
        github.requests[0][1],
        github.requests[1][2],
        github.requests[1][3],
    )
    assert "labels=nightly-regression" in query and "state=open" in query
    assert created["labels"] == ["nightly-regression"] and TEST in created["body"]
    assert headers["Authorization"] == "Bearer token-for-the-test"

    github.requests.clear()
    done = run_script(github, gate_result(False), tmp_path)  # still red the next night
    assert done.stdout.strip() == "updated #101"
    assert calls(github) == [
        ("GET", "/issues"),
        ("PATCH", "/issues/101"),
        ("POST", "/issues/101/comments"),
    ]
    assert "Still red: regression: 1 · missing: 1" in github.requests[2][2]["body"]
    assert len([i for i in github.issues if "pull_request" not in i]) == 1  # one issue, not two

    github.requests.clear()
    done = run_script(github, gate_result(True), tmp_path)  # green again
    assert done.stdout.strip() == "closed #101"
    assert calls(github) == [
        ("GET", "/issues"),
        ("POST", "/issues/101/comments"),
        ("PATCH", "/issues/101"),
    ]
    assert github.requests[2][2] == {"state": "closed", "state_reason": "completed"}
    assert "green again" in github.requests[1][2]["body"]

    github.requests.clear()
    done = run_script(github, gate_result(True), tmp_path)  # green, nothing open: only a look
    assert done.stdout.strip() == "green" and calls(github) == [("GET", "/issues")]


def test_a_nightly_without_a_gate_result_opens_the_issue_too(
    github: FakeGitHub, tmp_path: Path
) -> None:
    done = run_script(github, None, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "produced no `gate.json`" in github.requests[1][2]["body"]


def test_the_script_needs_what_github_actions_sets(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    done = run_module("harness.ci.nightly_issue", f"--run-url={RUN}", env=env)
    assert done.returncode == 2
    assert "GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_TOKEN not set" in done.stderr


# --- what produced nothing: the issue on every red night ----------------------------------


Facts = tuple[tuple[Any, ...], dict[str, Any]]
SETUP_FAILED: Facts = (
    ("failure", "success"),
    {"cells": 0, "report": False, "aggregate_gate": False},
)
NO_CELL: Facts = (("failure", "success"), {"cells": 0, "report": True, "aggregate_gate": False})
NO_REPORT: Facts = (("failure", "success"), {"cells": 3, "report": False, "aggregate_gate": False})
NO_GATE: Facts = (("failure", "success"), {"cells": 3, "report": True, "aggregate_gate": False})
HISTORY_FAILED: Facts = (("failure", "failure"), {"matrix_verdict": "fail"})
EVERYTHING: Facts = (("success", "success"), {"cells": 3, "report": True, "aggregate_gate": True})


def night(facts: Facts) -> nightly_issue.Night:
    """The facts as a Night, built when a test runs: a module without it fails each test,
    not the collection."""
    return nightly_issue.Night(*facts[0], **facts[1])


@pytest.mark.parametrize(
    ("facts", "named"),
    [
        (SETUP_FAILED, "**the matrix's setup job failed** (or emitted no cell): no cell uploaded"),
        (NO_CELL, "**no cell uploaded results**: every cell the setup job emitted died"),
        (NO_REPORT, "**the aggregate job uploaded no `matrix-report`** although 3 cell(s)"),
        (NO_GATE, "**the aggregate job produced no `gate.json`**: its regression gate step"),
        (HISTORY_FAILED, "**the history job failed**: no `matrix-report-history`"),
    ],
    ids=["setup-failed", "no-cell", "no-report", "no-gate", "history-failed"],
)
def test_a_night_without_results_names_the_job_that_produced_nothing(
    facts: Facts, named: str
) -> None:
    """The issue said only "no gate.json" (or was never written): now it names the job."""
    body = nightly_issue.issue_text(None, RUN, night(facts))["body"]
    assert body.startswith(nightly_issue.MARKER) and f"[the run]({RUN})" in body
    assert "### What produced nothing\n\n- " + named in body
    assert len(nightly_issue.missing_parts(night(facts), False)) == 1  # one job named, once
    assert nightly_issue.is_red(None, night(facts))


def test_a_failed_history_job_says_what_the_aggregate_gate_said() -> None:
    (part,) = nightly_issue.missing_parts(night(HISTORY_FAILED), False)
    assert "the aggregate job's gate, without the history, said `fail`" in part
    assert "the matrix's result was `failure`; whether its cells" in part
    (part,) = nightly_issue.missing_parts(
        nightly_issue.Night("failure", "skipped", matrix_verdict="none"), False
    )
    assert part.startswith("**the history job was skipped**: no `matrix-report-history`")
    assert "(the aggregate job's gate wrote no result either)" in part
    cancelled = nightly_issue.Night("success", "cancelled", 2, True, True)
    (part,) = nightly_issue.missing_parts(cancelled, True)
    assert part.startswith("**the history job was cancelled**: the gate below is what its")


def test_a_green_gate_with_a_failed_history_job_is_red_and_names_it() -> None:
    """Decided: the gate it judged from lacks the history across runs (or is not there)."""
    failed = nightly_issue.Night("success", "failure", cells=3, report=True, aggregate_gate=True)
    assert nightly_issue.is_red(gate_result(True), failed)
    body = nightly_issue.issue_text(gate_result(True), RUN, failed)["body"]
    assert "**the history job failed**: the gate below is what its" in body
    assert "### Regression gate: ✅ no regressions" in body
    assert not nightly_issue.is_red(gate_result(True), night(EVERYTHING))
    assert nightly_issue.missing_parts(night(EVERYTHING), True) == []
    # a failed matrix whose gate passes (a cell failing in the baseline too) stays green
    assert not nightly_issue.is_red(
        gate_result(True), nightly_issue.Night("failure", "success", 3, True, True)
    )


def test_the_still_red_comment_names_what_produced_nothing() -> None:
    comment = nightly_issue.still_red_comment(None, RUN, night(SETUP_FAILED))
    assert comment.startswith("Still red: the matrix's setup job failed (or emitted no cell)")
    assert comment.endswith(f"([run]({RUN})).")
    both = nightly_issue.Night("failure", "failure", cells=0, report=True, aggregate_gate=False)
    assert "(and 1 more, above)" in nightly_issue.still_red_comment(None, RUN, both)


def test_with_every_fact_given_red_and_green_nights_open_and_close(
    github: FakeGitHub, tmp_path: Path
) -> None:
    facts = ["--matrix-result=failure", "--history-result=success", "--cells=0"]
    done = run_script(github, None, tmp_path, *facts, "--report=false", "--aggregate-gate=false")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "opened #101"
    assert "missing: **the matrix's setup job failed**" in done.stdout
    assert "**the matrix's setup job failed**" in github.requests[1][2]["body"]

    github.requests.clear()  # the gate is green, the history job failed: red, named
    facts = ["--matrix-result=success", "--history-result=failure", "--matrix-verdict=pass"]
    done = run_script(github, gate_result(True), tmp_path, *facts)
    assert done.stdout.splitlines()[-1] == "updated #101", done.stderr
    assert "Still red: the history job failed" in github.requests[2][2]["body"]

    github.requests.clear()  # everything there, the gate green: closed
    facts = ["--matrix-result=success", "--history-result=success", "--cells=3", "--report=true"]
    done = run_script(github, gate_result(True), tmp_path, *facts, "--aggregate-gate=true")
    assert done.stdout.strip() == "closed #101", done.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "not JSON"),
        ('{"ok": true}', "not a gate result (accepted: harness.ci.gate's object with ok (bool),"),
    ],
    ids=["not-json", "not-a-gate-result"],
)
def test_an_unreadable_gate_json_opens_the_issue_naming_it(
    github: FakeGitHub, tmp_path: Path, text: str, said: str
) -> None:
    """It crashed the script (a traceback): no issue that night."""
    (tmp_path / "gate.json").write_text(text)
    done = run_module(
        "harness.ci.nightly_issue",
        *[f"--gate={tmp_path / 'gate.json'}", f"--run-url={RUN}", "--history-result=success"],
        env=api_env(github),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "opened #101"
    body = github.requests[1][2]["body"]
    assert "**the `gate.json` given is unreadable**:" in body and said in body


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("--history-result=bogus", "--history-result 'bogus': accepted success, failure,"),
        ("--matrix-result=Success", "--matrix-result 'Success': accepted success, failure,"),
        ("--cells=-1", "--cells '-1': accepted a whole number >= 0, or empty (not known)"),
        ("--report=yes", "--report 'yes': accepted true, false, or empty"),
        ("--matrix-verdict=red", "--matrix-verdict 'red': accepted pass, fail, none, or empty"),
    ],
    ids=lambda v: v if v.startswith("--") and "=" in v and " " not in v else "",
)
def test_a_bad_fact_is_refused_naming_the_value_and_what_is_accepted(
    github: FakeGitHub, tmp_path: Path, flag: str, said: str
) -> None:
    done = run_script(github, gate_result(True), tmp_path, flag)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert github.requests == []


# --- the workflow: nightly.yml, read with yaml; its scripts run with a stand-in python ------

NIGHTLY = jobs(workflow("nightly.yml"))
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def render(value: str, context: Mapping[str, str]) -> str:
    """``value`` with each ``${{ expr }}`` replaced by ``context[expr]`` (KeyError: an
    expression the test does not know, so a renamed output fails here, not on GitHub)."""
    return EXPRESSION.sub(lambda m: context[m.group(1)], value)


def condition(expr: str, context: Mapping[str, str]) -> bool:
    """A job's or step's ``if:`` of ``&&``-joined terms (``!cancelled()``, ``X == 'v'``), as
    GitHub evaluates it on a run that was not cancelled."""
    inner = EXPRESSION.fullmatch(expr.strip())
    assert inner, f"not one expression: {expr!r}"
    assert "||" not in inner.group(1) and "(" not in inner.group(1).replace("cancelled()", "")
    result = True
    for term in (t.strip() for t in inner.group(1).split("&&")):
        if term == "!cancelled()":
            continue
        m = re.fullmatch(r"([\w.-]+) == '([^']*)'", term)
        assert m, f"a term this test does not evaluate: {term!r}"
        result = result and context[m.group(1)] == m.group(2)
    return result


def stand_in_python(tmp: Path) -> Path:
    """A folder for PATH whose ``python`` installs nothing (``-m pip``), plays ``-m nox`` as
    $NOX_STUB says (``fail``: exit 1 writing nothing; ``write``: write reports/mutation.json),
    and runs everything else with this interpreter."""
    bin_dir = tmp / "stand-in-bin"
    bin_dir.mkdir()
    script = bin_dir / "python"
    script.write_text(
        f"""#!{shutil.which("bash")}
if [ "$1 $2" = "-m pip" ]; then exit 0; fi
if [ "$1 $2" = "-m nox" ]; then
  if [ "$NOX_STUB" = write ]; then mkdir -p reports; echo '{{"new": 1}}' > reports/mutation.json; exit 0; fi
  exit 1
fi
exec {sys.executable} "$@"
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def run_step(
    step: dict[str, Any], cwd: Path, tmp: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``step``'s run script as GitHub runs it (``bash -e``), the harness importable from
    ``cwd``, ``python`` the stand-in, $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY files in ``tmp``."""
    bin_dir = tmp / "stand-in-bin"
    if not bin_dir.exists():
        stand_in_python(tmp)
    full = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")} | {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "GITHUB_OUTPUT": str(tmp / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary"),
        **env,
    }
    return subprocess.run(
        [shutil.which("bash") or "bash", "-e", "-c", step["run"]],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def step_named(job: str, name: str) -> dict[str, Any]:
    (step,) = [s for s in NIGHTLY[job]["steps"] if s.get("name") == name]
    return dict(step)


def test_the_issue_job_opens_the_issue_when_the_matrix_produced_nothing(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """Its download failed on the missing matrix-report-history before the script ran, and the
    script was told nothing of the jobs: no issue on the nights with no result at all."""
    issue = NIGHTLY["issue"]
    assert issue["needs"] == ["matrix", "history", "prerelease", "bisect"]
    (download,) = [
        s
        for s in issue["steps"]
        if uses(s, "actions/download-artifact") and s["with"]["name"] == "matrix-report-history"
    ]
    assert download["continue-on-error"] is True
    assert download["with"]["path"] == "nightly"  # nothing of the checkout passes for a result
    (script,) = [s for s in issue["steps"] if "harness.ci.nightly_issue" in s.get("run", "")]
    assert "continue-on-error" not in script  # a failing API call fails the job: it is seen
    context = {  # the setup job failed: no cell ran, the aggregate uploaded nothing
        "needs.matrix.result": "failure",
        "needs.matrix.outputs.verdict": "none",
        "needs.history.result": "success",
        "needs.history.outputs.cells": "0",
        "needs.history.outputs.report": "false",
        "needs.history.outputs.aggregate-gate": "false",
        "github.token": "token-for-the-test",
        "github.server_url": "https://github.com",
        "github.repository": REPO,
        "github.run_id": "42",
    }
    env = {k: render(v, context) for k, v in script["env"].items()}
    assert env["RUN_URL"] == RUN
    env |= {k: v for k, v in api_env(github).items() if k.startswith("GITHUB_")}
    (tmp_path / "work").mkdir()  # no nightly/: the download found no artifact
    done = run_step(script, tmp_path / "work", tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "opened #101"
    body = github.requests[1][2]["body"]
    assert "**the matrix's setup job failed** (or emitted no cell)" in body

    github.requests.clear()  # the history job failed: its outputs are empty
    context |= {f"needs.history.outputs.{k}": "" for k in ("cells", "report", "aggregate-gate")}
    context |= {"needs.history.result": "failure", "needs.matrix.outputs.verdict": "fail"}
    env |= {k: render(v, context) for k, v in script["env"].items() if k != "GITHUB_TOKEN"}
    done = run_step(script, tmp_path / "work", tmp_path, env)
    assert done.stdout.splitlines()[-1] == "updated #101", done.stdout + done.stderr
    assert "**the history job failed**" in github.requests[1][2]["body"]
    assert "said `fail`" in github.requests[1][2]["body"]


def produced(tmp: Path, reports: Path) -> dict[str, str]:
    """The outputs the history job's "what this run produced" step writes for ``reports``."""
    out = tmp / "output"
    out.unlink(missing_ok=True)
    done = run_step(step_named("history", "what this run produced"), reports.parent, tmp, {})
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(line.split("=", 1) for line in out.read_text().splitlines())


def aggregate_report(reports: Path, cells: int) -> None:
    """What the aggregate job uploads when the setup job planned the core cpu cells and
    ``cells`` of them uploaded results (empty cell.json stand-ins: no-record all the same)."""
    planned = gha.plan(spec.load(), ["core"], ["cpu"])
    plan = reports.parent / "plan.json"
    plan.write_text(json.dumps(planned))
    manifest = ["harness.ci.gha", "manifest", "--plan", str(plan), "--tiers", "core"]
    for module, *args in (manifest, ["harness.report.pages"]):
        run_module(module, *args, "--reports", reports, check=True, timeout=120, text=False)
    for cell in planned["cells"][:cells]:
        (reports / "cells" / cell).mkdir(parents=True)
        (reports / "cells" / cell / "cell.json").write_text("{}")


def test_the_history_job_says_what_this_run_produced_and_tolerates_its_absence(
    tmp_path: Path,
) -> None:
    """Its downloads failed on a night without results, so it uploaded nothing and said
    nothing: now each download may fail and its outputs say what came."""
    history = NIGHTLY["history"]
    downloads = [s for s in history["steps"] if uses(s, "actions/download-artifact")]
    assert [d["with"].get("name", d["with"].get("pattern")) for d in downloads] == [
        "reports-*",
        "matrix-report",
    ]
    assert all(d["continue-on-error"] is True for d in downloads)
    assert history["outputs"] == {
        k: f"${{{{ steps.found.outputs.{k} }}}}" for k in ("cells", "report", "aggregate-gate")
    }
    issue_env = step_named("issue", "open, update or close the regression issue")["env"]
    for name, output in [("CELLS", "cells"), ("REPORT", "report")]:
        assert issue_env[name] == f"${{{{ needs.history.outputs.{output} }}}}"
    assert issue_env["AGGREGATE_GATE"] == "${{ needs.history.outputs.aggregate-gate }}"
    assert issue_env["MATRIX_RESULT"] == "${{ needs.matrix.result }}"
    assert issue_env["HISTORY_RESULT"] == "${{ needs.history.result }}"

    reports = tmp_path / "work" / "reports"
    reports.mkdir(parents=True)  # the checkout's reports/: baseline.json only
    assert produced(tmp_path, reports) == {
        "cells": "0",
        "report": "false",
        "aggregate-gate": "false",
    }
    aggregate_report(reports, cells=2)
    (reports / "gate.json").write_text("{}")
    assert produced(tmp_path, reports) == {"cells": "2", "report": "true", "aggregate-gate": "true"}
    # every step that reads the report runs only with it; the upload also after a failed step
    found_at = history["steps"].index(step_named("history", "what this run produced"))
    for step in history["steps"][found_at + 1 :]:
        text = json.dumps(step)
        if "reports/matrix" in text and "Pages" not in step.get("name", ""):
            assert "steps.found.outputs.report == 'true'" in step["if"], step.get("name")
    upload = step_named("history", "upload the report with its history")
    assert upload["if"] == "${{ !cancelled() && steps.found.outputs.report == 'true' }}"


def test_the_history_job_renders_a_report_whose_cells_all_died(tmp_path: Path) -> None:
    """No cell.json: the gate writes no gate.md, and `cat reports/gate.md` failed the job."""
    work = tmp_path / "work"
    reports = work / "reports"
    reports.mkdir(parents=True)
    shutil.copy(ROOT / "reports" / "baseline.json", reports / "baseline.json")
    aggregate_report(reports, cells=0)
    step = step_named("history", "the report and the gate with the history")
    done = run_step(step, work, tmp_path, {})
    assert done.returncode == 0, done.stdout + done.stderr
    summary = (tmp_path / "summary").read_text()
    assert "History across 0 earlier nightlies; the gate with it exited 2." in summary
    assert "No `gate.json`: the gate had no cell results to judge." in summary
    assert (reports / "matrix.html").is_file() and not (reports / "gate.json").exists()


@pytest.mark.parametrize(
    ("history", "report", "matrix", "deploys"),
    [
        ("success", "true", "success", True),
        ("success", "true", "failure", True),  # a red night still gets its page
        ("failure", "true", "failure", False),  # the history job failed: nothing deployed
        ("failure", "", "success", False),
        ("skipped", "", "failure", False),
        ("success", "false", "failure", False),  # no report this night: the last page stays
    ],
)
def test_pages_deploys_only_after_a_successful_history_job(
    history: str, report: str, matrix: str, deploys: bool
) -> None:
    """`!cancelled() && vars…` deployed after a failed history job."""
    pages = NIGHTLY["pages"]
    assert pages["needs"] == "history"
    context = {
        "needs.history.result": history,
        "needs.history.outputs.report": report,
        "needs.matrix.result": matrix,
        "vars.COMPAT_MATRIX_PAGES": "true",
    }
    assert condition(pages["if"], context) is deploys
    assert condition(pages["if"], context | {"vars.COMPAT_MATRIX_PAGES": ""}) is False


def test_the_mutation_job_gets_the_cpu_index_with_the_cell_jobs_default() -> None:
    """It had no package-index variable at all: the cell jobs' cpu index never reached it."""
    name = spec.load().backends["cpu"].index_env
    (run,) = [s for s in NIGHTLY["mutation"]["steps"] if s.get("name") == "nox -s mutation"]
    value = run["env"][name]
    assert re.fullmatch(rf"\$\{{\{{ vars\.{name} \|\| .*'https://[^'\s]+'.* \}}\}}", value), value
    (cell,) = [
        s
        for s in jobs(workflow("matrix.yml"))["cell"]["steps"]
        if s.get("name", "").startswith("nox -s matrix -- --cell")
    ]
    assert cell["env"][name] == value  # the cell jobs' default, the same


@pytest.mark.parametrize("stub", ["fail", "write"])
def test_a_failed_mutation_run_never_uploads_the_committed_report(
    tmp_path: Path, stub: str
) -> None:
    """The committed reports/mutation.json was uploaded as the result of a run that wrote none."""
    mutation = NIGHTLY["mutation"]
    work = tmp_path / "work"
    (work / "reports").mkdir(parents=True)
    committed = work / "reports" / "mutation.json"
    committed.write_text('{"committed": 1}')
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-C", str(work)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "committed report"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=60)
    done = run_step(step_named("mutation", "nox -s mutation"), work, tmp_path, {"NOX_STUB": stub})
    assert (done.returncode == 0) is (stub == "write"), done.stdout + done.stderr
    mutation_run.check_clean(work)  # the removed report does not make the run refuse
    said = step_named("mutation", "what the mutation run wrote")
    assert said["if"] == "${{ !cancelled() }}"
    assert run_step(said, work, tmp_path, {}).returncode == 0
    summary = (tmp_path / "summary").read_text()
    if stub == "fail":
        assert not committed.exists()
        assert "The mutation run wrote no `reports/mutation.json`" in summary
    else:
        assert json.loads(committed.read_text()) == {"new": 1}
        assert "This run wrote `reports/mutation.json`" in summary
    (upload,) = [s for s in mutation["steps"] if uses(s, "actions/upload-artifact")]
    assert upload["with"]["path"] == "reports/mutation.json"
    assert upload["with"]["if-no-files-found"] == "error"  # so a run that wrote none says so
    names = [s.get("name") for s in mutation["steps"]]
    assert names.index("what the mutation run wrote") < names.index("upload the mutation report")


# --- new releases seen: the report's lines in the issue ---------------------------------------


def produced_night(
    github: FakeGitHub, *, matrix: str, verdict: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The issue job's script step and its environment on a night whose matrix (``matrix``: its
    result, ``verdict``: its gate's) and history jobs produced everything, against the fake API."""
    (script,) = [
        s for s in NIGHTLY["issue"]["steps"] if "harness.ci.nightly_issue" in s.get("run", "")
    ]
    context = {
        "needs.matrix.result": matrix,
        "needs.matrix.outputs.verdict": verdict,
        "needs.history.result": "success",
        "needs.history.outputs.cells": "3",
        "needs.history.outputs.report": "true",
        "needs.history.outputs.aggregate-gate": "true",
        "github.token": "token-for-the-test",
        "github.server_url": "https://github.com",
        "github.repository": REPO,
        "github.run_id": "42",
    }
    env = {k: render(v, context) for k, v in script["env"].items()}
    env |= {k: v for k, v in api_env(github).items() if k.startswith("GITHUB_")}
    return script, env


SEEN = (
    "new release seen: safetensors 0.9.0rc1, not in matrix.toml (highest pin: 0.8.0; "
    "installed by torchlatest-aolatest-pre-cpu)"
)


def test_the_issue_names_the_new_releases_the_report_saw_before_the_table() -> None:
    night = nightly_issue.Night(new_releases=(SEEN,))
    body = nightly_issue.issue_text(gate_result(False), RUN, night)["body"]
    assert f"### New releases seen\n\n- {SEEN}\n" in body
    assert body.index("New releases seen") < body.index("Regression gate")
    assert "New releases seen" not in nightly_issue.issue_text(gate_result(False), RUN)["body"]


def test_the_issue_job_reads_the_new_releases_from_the_nights_report(
    github: FakeGitHub, tmp_path: Path
) -> None:
    # a red night that produced everything: the gate found a regression
    script, env = produced_night(github, matrix="failure", verdict="fail")
    work = tmp_path / "work"
    (work / "nightly").mkdir(parents=True)
    (work / "nightly" / "gate.json").write_text(json.dumps(gate_result(False)))
    report = {"new_releases": [{"dist": "safetensors", "line": SEEN}]}
    (work / "nightly" / "matrix.json").write_text(json.dumps(report))
    torch = "new release seen: torch 2.16.0, not in matrix.toml (highest pin: 2.15.0; ...)"
    (work / "prerelease").mkdir()  # the prerelease tier's report: the same line, and another
    both = {"new_releases": [{"line": SEEN}, {"line": torch}]}
    (work / "prerelease" / "matrix.json").write_text(json.dumps(both))
    done = run_step(script, work, tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"### New releases seen\n\n- {SEEN}\n- {torch}\n" in github.requests[1][2]["body"]
    for broken in ("{not json", '{"new_releases": [{"no line": 1}]}', "[]"):
        (work / "nightly" / "matrix.json").write_text(broken)  # an unreadable report: no lines
        assert nightly_issue.load_new_releases(work / "nightly" / "matrix.json") == ()
    assert nightly_issue.load_new_releases(work / "absent.json") == ()


# --- the bisect step's findings: the first bad release in the issue --------------------------

BROKE = (
    "**safetensors 0.9.0rc1** broke `tests/t.py::test_x` (passed → failed) in "
    "`torchlatest-aolatest-pre-cpu`: the first release after 0.8.0 (the highest pin) ..."
)
CLEARED = "torch 2.15.0 → 2.16.0 in `torchlatest-aolatest-pre-cpu`: cleared, both ends fail alike"


def test_the_issue_job_opens_the_issue_on_a_green_gate_when_a_new_release_broke_tests(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """issue 42 item 5: the gate does not judge the prerelease tier, so a green gate with a
    bisected break is a red night: the issue opens and names the first bad release; a finding
    that only cleared a release (or none at all) leaves the night green."""
    # a night that produced everything, and a green gate
    script, env = produced_night(github, matrix="success", verdict="pass")
    work = tmp_path / "work"
    (work / "nightly").mkdir(parents=True)
    (work / "nightly" / "gate.json").write_text(json.dumps(gate_result(True)))
    (work / "bisect").mkdir()
    findings = [{"line": BROKE, "broke": True}, {"line": CLEARED, "broke": False}]
    (work / "bisect" / "nightly-bisect.json").write_text(json.dumps({"findings": findings}))
    done = run_step(script, work, tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "opened #101"
    body = github.requests[1][2]["body"]
    assert f"### New releases bisected\n\n- {BROKE}\n- {CLEARED}\n" in body

    github.requests.clear()
    (work / "bisect" / "nightly-bisect.json").write_text(json.dumps({"findings": findings[1:]}))
    done = run_step(script, work, tmp_path, env)
    assert done.stdout.splitlines()[-1].startswith("closed"), done.stdout + done.stderr
    for broken in ("{not json", '{"findings": [{"no line": 1}]}', "[]"):
        (work / "bisect" / "nightly-bisect.json").write_text(broken)
        assert nightly_issue.load_bisected(work / "bisect" / "nightly-bisect.json") == ((), 0)
