"""harness.ci.commit_status: the gate's verdict as a commit status on the upstream SHA, posted to a
local server on 127.0.0.1 that plays GitHub's REST API and records every request."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.ci import commit_status, gate, gha
from tests.common.harness.gate_runs import RUN, TEST, snapshot_cell
from tests.common.harness.local_http import serving
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = "huggingface/safetensors"
SHA = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "ghp_token-for-the-test-0000"
CELLS = ("torch2.6-ao0.8-cpu", "torch2.5-ao0.7-cpu")


def gate_result(regressed: int) -> dict[str, Any]:
    """A real gate result (harness.ci.gate.compare): green, or ``regressed`` tests failing now in
    the first cell and the second cell lost (one "missing" row)."""
    names = [f"{TEST}-{i}" for i in range(max(regressed, 1))]
    passed = dict.fromkeys(names, "passed")
    baseline = {"schema": 2, "cells": {c: snapshot_cell("passed", passed) for c in CELLS}}
    now = dict.fromkeys(names[:regressed], "failed") | dict.fromkeys(names[regressed:], "passed")
    current = {
        "cells": {
            CELLS[0]: snapshot_cell("failed" if regressed else "passed", now),
            CELLS[1]: snapshot_cell("no-record", {}) if regressed else baseline["cells"][CELLS[1]],
        }
    }
    return gate.compare(baseline, current)


class FakeGitHub(ThreadingHTTPServer):
    """Answers every request with ``answer`` (status, JSON document); records each request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.answer: tuple[int, Any] = (201, {"id": 1, "state": "success"})
        self.requests: list[dict[str, Any]] = []

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api"


class Handler(BaseHTTPRequestHandler):
    server: FakeGitHub

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers),
                "body": json.loads(raw) if raw else None,
            }
        )
        status, doc = self.server.answer
        out = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PATCH = _handle


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving(FakeGitHub()) as server:
        yield server


def write_reports(tmp: Path, result: dict[str, Any] | None, cells: int | None = 2) -> Path:
    """reports/gate.json (absent for None) and the run's manifest naming ``cells`` cells."""
    path = tmp / "reports" / "gate.json"
    path.parent.mkdir(exist_ok=True)
    if result is not None:
        path.write_text(json.dumps(result))
    if cells is not None:
        manifest = {"cells": [{"id": f"cell-{i}"} for i in range(cells)]}
        (tmp / "reports" / "run.json").write_text(json.dumps(manifest))
    return path


def post(
    server: FakeGitHub | None,
    gate_path: Path,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    token: str | None = TOKEN,
    repository: str = UPSTREAM,
    sha: str = SHA,
    environ: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    env = {"GITHUB_API_URL": server.api if server else "http://127.0.0.1:9/api"}
    if token is not None:
        env["UPSTREAM_STATUS_TOKEN"] = token
    env |= environ or {}
    argv = [f"--gate={gate_path}", f"--repository={repository}", f"--sha={sha}", f"--run-url={RUN}"]
    code = commit_status.main([*argv, *extra], environ=env)
    out, err = capsys.readouterr()
    assert TOKEN not in out + err, "the token is never printed"
    return code, out, err


def the_request(server: FakeGitHub) -> dict[str, Any]:
    """The one request made: POST of a status on the upstream SHA, with the token."""
    (request,) = server.requests
    assert request["method"] == "POST"
    assert request["path"] == f"/api/repos/{UPSTREAM}/statuses/{SHA}"
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["Accept"] == "application/vnd.github+json"
    assert request["headers"]["Content-Type"] == "application/json"
    body: dict[str, Any] = request["body"]
    assert len(body["description"]) <= 140
    return body


# --- what is posted ----------------------------------------------------------------------------


def test_a_passing_gate_posts_success(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = post(github, write_reports(tmp_path, gate_result(0)), capsys)
    assert code == 0, err
    assert the_request(github) == {
        "state": "success",
        "context": "compat-matrix / regression gate",
        "description": "no regressions in 2 cells",
        "target_url": RUN,
    }
    assert out.strip() == (
        f"commit status success posted to {UPSTREAM}@{SHA[:12]}"
        " (compat-matrix / regression gate): no regressions in 2 cells"
    )


def test_a_failing_gate_posts_failure_with_the_counts(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = post(github, write_reports(tmp_path, gate_result(3)), capsys)
    assert code == 0, err
    assert the_request(github) == {
        "state": "failure",
        "context": "compat-matrix / regression gate",
        "description": "3 regressed tests, 1 missing (2 cells judged)",
        "target_url": RUN,
    }


def test_without_a_manifest_the_description_names_no_cell_count(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    post(github, write_reports(tmp_path, gate_result(1), cells=None), capsys)
    assert the_request(github)["description"] == "1 regressed test, 1 missing"
    github.requests.clear()
    post(github, write_reports(tmp_path, gate_result(0), cells=None), capsys)
    assert the_request(github)["description"] == "no regressions against the baseline"


def test_no_gate_json_posts_error(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = post(github, write_reports(tmp_path, None), capsys)
    assert code == 0, err
    body = the_request(github)
    assert body["state"] == "error"
    assert body["description"] == "no result: the matrix produced no gate.json"


def test_an_unreadable_gate_json_posts_error_with_a_capped_description(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / ("a-long-folder-name-" * 8)
    deep.mkdir()
    path = write_reports(deep, None)
    path.write_text("{not json")
    code, _, err = post(github, path, capsys)
    assert code == 0 and err.startswith("warning: ") and "is unreadable" in err
    body = the_request(github)
    assert body["state"] == "error" and body["description"].startswith("no result: ")
    assert len(body["description"]) == 140 and body["description"].endswith("…")


def test_a_gate_json_of_another_shape_posts_error(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_reports(tmp_path, {"ok": False, "summary": [], "rows": [{"fatal": True}]})
    code, _, err = post(github, path, capsys)
    assert code == 0 and "is not a gate result" in err
    body = the_request(github)
    assert body["state"] == "error" and body["description"].startswith("no result: ")


def test_the_context_names_the_call(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two gate calls for one pull request posted one context, the last over the first."""
    post(github, write_reports(tmp_path, gate_result(0)), capsys, "--call=safetensors  1a2b3c")
    assert the_request(github)["context"] == "compat-matrix / regression gate (safetensors 1a2b3c)"


def test_the_state_follows_the_workflow_verdict() -> None:
    """The same mapping as harness.ci.gha's verdict output (pass / fail / none)."""
    for result in (gate_result(0), gate_result(2), None):
        verdict = gha.verdict(result)["verdict"]
        assert commit_status.describe(result)[0] == commit_status.STATES[verdict]


def test_only_rows_that_fail_the_gate_are_counted() -> None:
    result = {
        "ok": False,
        "summary": {"regression": 1, "now skipped": 2},
        "rows": [
            {"class": "regression", "fatal": True},
            {"class": "now skipped", "fatal": True},
            {"class": "now skipped", "fatal": False},  # an absent backend: not a failure
            {"class": "fewer tests", "fatal": True},
            {"class": "fixed", "fatal": False},
        ],
    }
    assert commit_status.describe(result, 5) == (
        "failure",
        "1 regressed test, 1 cell with fewer tests, 1 now skipped (5 cells judged)",
    )


def test_a_green_gate_names_the_downstream_impact() -> None:
    result = {"ok": True, "summary": {"downstream impact": 4}, "rows": []}
    assert commit_status.describe(result, 12) == (
        "success",
        "no regressions in 12 cells; 4 downstream scenarios changed without compat",
    )


@given(
    counts=st.dictionaries(
        st.sampled_from([*gate.CLASSES, "x" * 60, "y" * 90]), st.integers(0, 10**12)
    ),
    cells=st.none() | st.integers(0, 10**12),
    ok=st.booleans(),
)
def test_the_description_never_exceeds_140_characters(
    counts: dict[str, int], cells: int | None, ok: bool
) -> None:
    rows = [{"class": k, "fatal": True} for k, n in counts.items() for _ in range(min(n, 3))]
    result = {"ok": ok, "summary": counts, "rows": rows}
    state, description = commit_status.describe(result, cells)
    assert state == ("success" if ok else "failure")
    assert 0 < len(description) <= 140


# --- when nothing is posted ------------------------------------------------------------------


def test_without_a_token_nothing_is_posted(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for token in (None, "", "  "):
        code, out, err = post(github, write_reports(tmp_path, gate_result(0)), capsys, token=token)
        assert (code, err) == (0, "")
        assert out == (
            f"no commit status posted to {UPSTREAM}@{SHA[:12]}: $UPSTREAM_STATUS_TOKEN is not set\n"
        )
    assert github.requests == []


@pytest.mark.parametrize(
    ("repository", "sha", "absent"),
    [("", SHA, "--repository"), (UPSTREAM, "", "--sha"), ("", " ", "--repository, --sha")],
)
def test_without_an_upstream_commit_nothing_is_posted(
    github: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    repository: str,
    sha: str,
    absent: str,
) -> None:
    path = write_reports(tmp_path, gate_result(0))
    code, out, _ = post(github, path, capsys, repository=repository, sha=sha)
    assert code == 0
    assert out == f"no commit status posted: no upstream commit named ({absent} empty)\n"
    assert github.requests == []


@pytest.mark.parametrize(
    ("repository", "sha", "named"),
    [
        ("owner", SHA, "--repository: expected owner/name, got 'owner'"),
        ("owner/name/statuses", SHA, "got 'owner/name/statuses'"),
        ("../../orgs/x", SHA, "got '../../orgs/x'"),
        ("-owner/name", SHA, "got '-owner/name'"),
        ("owner/na me", SHA, "got 'owner/na me'"),
        (UPSTREAM, "0123456", "--sha: expected the full commit SHA (40 hex digits"),
        (UPSTREAM, SHA + "00", f"got '{SHA}00'"),
        (UPSTREAM, "g" * 40, "got 'gggg"),
        (UPSTREAM, SHA[:39] + "\n" + "::set-output", "got '0123"),
        (UPSTREAM, "../../../user", "got '../../../user'"),
        ("owner/name\x00", SHA, "got 'owner/name\\x00'"),
    ],
)
def test_a_malformed_repository_or_sha_is_refused_before_any_request(
    github: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    repository: str,
    sha: str,
    named: str,
) -> None:
    path = write_reports(tmp_path, gate_result(0))
    code, out, err = post(github, path, capsys, repository=repository, sha=sha)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and named in err and err.count("\n") == 1
    assert github.requests == []


def test_a_malformed_value_is_refused_even_without_a_token(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_reports(tmp_path, gate_result(0))
    code, _, err = post(github, path, capsys, token=None, sha="HEAD")
    assert code == 2 and "got 'head'" in err and github.requests == []


def test_without_the_api_address_it_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = post(
        None, write_reports(tmp_path, gate_result(0)), capsys, environ={"GITHUB_API_URL": ""}
    )
    assert code == 2 and err == "error: GITHUB_API_URL not set (GitHub Actions sets it)\n"


# --- when the API says no ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "answer", "message"),
    [
        (
            422,
            {
                "message": "Validation Failed",
                "errors": [
                    {
                        "resource": "Status",
                        "code": "custom",
                        "message": f"No commit found for SHA: {SHA}",
                    }
                ],
            },
            f"Validation Failed (No commit found for SHA: {SHA})",
        ),
        (
            403,
            {"message": "Resource not accessible by personal access token"},
            "Resource not accessible by personal access token",
        ),
    ],
)
def test_an_api_error_is_one_line_with_the_status_and_the_message(
    github: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    status: int,
    answer: dict[str, Any],
    message: str,
) -> None:
    github.answer = (status, answer)
    code, out, err = post(github, write_reports(tmp_path, gate_result(1)), capsys)
    assert code == 1 and out == ""
    assert err == (
        f"error: GitHub answered {status} to POST /repos/{UPSTREAM}/statuses/{SHA}: {message}\n"
    )
    assert the_request(github)["state"] == "failure"  # it did ask


def test_on_github_actions_the_error_is_an_annotation_and_the_token_is_cut_out(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github.answer = (401, {"message": f"Bad credentials: {TOKEN}\n100% wrong"})
    path = write_reports(tmp_path, gate_result(0))
    code, out, err = post(github, path, capsys, environ={"GITHUB_ACTIONS": "true"})
    assert code == 1 and err == ""
    assert out == (
        "::error title=commit status::GitHub answered 401 to POST"
        f" /repos/{UPSTREAM}/statuses/{SHA}: Bad credentials: *** 100%25 wrong\n"
    )


def test_an_api_that_cannot_be_reached_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as free:  # a port nobody listens on once this closes
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    code, _, err = post(
        None,
        write_reports(tmp_path, gate_result(0)),
        capsys,
        environ={"GITHUB_API_URL": f"http://127.0.0.1:{port}/api"},
    )
    assert code == 1
    assert err.startswith(f"error: could not reach the GitHub API for POST /repos/{UPSTREAM}/")


# --- the command line, as the workflow runs it --------------------------------------------------


def test_the_command_runs_on_a_bare_interpreter(github: FakeGitHub, tmp_path: Path) -> None:
    """python -m harness.ci.commit_status with no site-packages (-S): the runner's python3."""
    path = write_reports(tmp_path, gate_result(3))
    done = run_module(
        "harness.ci.commit_status",
        *["--gate", str(path), "--repository", UPSTREAM, "--sha", SHA.upper(), "--run-url", RUN],
        flags=["-S", "-E"],
        env={"GITHUB_API_URL": github.api, "UPSTREAM_STATUS_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout + done.stderr
    assert the_request(github)["description"] == "3 regressed tests, 1 missing (2 cells judged)"
