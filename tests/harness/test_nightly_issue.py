"""harness.nightly_issue: the issue text from gate.json, and its API calls against a local
server on 127.0.0.1 that plays GitHub's REST API and records every request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness import gate, nightly_issue
from tests.harness.local_http import serving

ROOT = Path(__file__).resolve().parents[2]
REPO = "owner/compat-matrix"
RUN = "https://github.com/owner/compat-matrix/actions/runs/42"
TEST = "tests/test_sharing.py::test_save_round_trip_is_bit_identical[cpu]"


def snapshot_cell(status: str, tests: dict[str, str]) -> dict[str, Any]:
    return {
        "status": status,
        "reason": "",
        "tier": "core",
        "torch": "2.6",
        "torchao": "0.8",
        "backend": "cpu",
        "installed": {},
        "candidates": [],
        "tests": tests,
        "flaky": [],
        "skips": {},
    }


def gate_result(ok: bool) -> dict[str, Any]:
    """A real gate result (harness.gate.compare): green, or one regression and one lost cell."""
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


def run_script(
    server: FakeGitHub, gate: dict[str, Any] | None, tmp: Path
) -> subprocess.CompletedProcess[str]:
    path = tmp / "gate.json"
    if gate is not None:
        path.write_text(json.dumps(gate))
    elif path.exists():
        path.unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env |= {
        "GITHUB_API_URL": f"http://127.0.0.1:{server.server_address[1]}/api",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": "token-for-the-test",
    }
    return subprocess.run(
        [sys.executable, "-m", "harness.nightly_issue", f"--gate={path}", f"--run-url={RUN}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
    done = subprocess.run(
        [sys.executable, "-m", "harness.nightly_issue", f"--run-url={RUN}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_TOKEN not set" in done.stderr
