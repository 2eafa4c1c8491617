"""harness.previous_runs: earlier nightlies' report artifacts, fetched from a local server on
127.0.0.1 that plays GitHub's REST API (runs, artifacts, the archive's redirect) and records
every request."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness import history
from tests.harness.local_http import serving

ROOT = Path(__file__).resolve().parents[2]
REPO = "owner/compat-matrix"
REPORT = {"generated": "2026-11-30T03:40:00+00:00", "cells": {"c": {"status": "passed"}}}


def archive(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


class FakeGitHub(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, dict[str, str]]] = []
        good = json.dumps(REPORT).encode()
        # run id -> (run number, artifacts: (artifact id, expired, zip bytes))
        self.runs: dict[int, tuple[int, list[tuple[int, bool, bytes]]]] = {
            500: (50, [(1, False, archive({"matrix.json": b"{}"}))]),  # the current run: skipped
            400: (40, [(2, False, archive({"matrix.json": good, "../evil.txt": b"x"}))]),
            300: (30, [(3, True, archive({"matrix.json": good}))]),  # expired
            200: (20, [(4, False, archive({"drift.json": b"{}"}))]),  # no matrix.json
            100: (10, [(5, False, archive({"matrix.json": b"not json"}))]),
        }


class Handler(BaseHTTPRequestHandler):
    server: FakeGitHub

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.requests.append((self.path, dict(self.headers)))
        path = self.path.split("?")[0]
        base = f"/api/repos/{REPO}/actions"
        runs = self.server.runs
        if path == f"{base}/workflows/nightly.yml/runs":
            doc = {
                "workflow_runs": [
                    {"id": i, "run_number": n, "conclusion": "success", "created_at": f"day {n}"}
                    for i, (n, _) in sorted(runs.items(), reverse=True)
                ]
            }
            self._send(200, json.dumps(doc).encode())
        elif path.startswith(f"{base}/runs/") and path.endswith("/artifacts"):
            run = int(path.split("/")[-2])
            arts = [
                {"id": a, "name": "matrix-report", "expired": exp} for a, exp, _ in runs[run][1]
            ]
            self._send(200, json.dumps({"artifacts": arts}).encode())
        elif path.startswith(f"{base}/artifacts/") and path.endswith("/zip"):
            art = int(path.split("/")[-2])  # GitHub answers with a redirect to signed storage
            port = self.server.server_address[1]
            self._send(302, b"", {"Location": f"http://127.0.0.1:{port}/blob/{art}"})
        elif path.startswith("/blob/"):
            art = int(path.rsplit("/", 1)[1])
            data = next(z for _, arts in runs.values() for a, _, z in arts if a == art)
            self._send(200, data)
        else:
            self._send(404, b"{}")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving(FakeGitHub()) as server:
        yield server


def fetch(server: FakeGitHub, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    clean |= {
        "GITHUB_API_URL": f"http://127.0.0.1:{server.server_address[1]}/api",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": "token-for-the-test",
        "GITHUB_RUN_ID": "500",
        **env,
    }
    cmd = [sys.executable, "-m", "harness.previous_runs", "--workflow=nightly.yml"]
    return subprocess.run(
        [*cmd, "--runs=5", f"--out={out}"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_earlier_reports_are_fetched_and_unusable_ones_skipped(
    github: FakeGitHub, tmp_path: Path
) -> None:
    out = tmp_path / "history"
    done = fetch(github, out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "run-40",
        "run-40/matrix.json",
    ]  # nothing from the archive but its matrix.json, never a path of its own
    assert not (tmp_path / "evil.txt").exists()
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run-40: success run of day 40 →")
    assert "run-30: no unexpired 'matrix-report' artifact; skipped" in lines
    assert any(
        line.startswith("run-20: artifact unusable (the artifact holds no") for line in lines
    )
    assert any(line.startswith("run-10: artifact unusable") for line in lines)
    assert not any("run-50" in line for line in lines)  # this run itself
    # the token goes to the API only, never to the signed storage address
    for path, headers in github.requests:
        assert ("Authorization" in headers) == path.startswith("/api/")
    runs = history.load([out / "run-40"])
    assert [r.label for r in runs] == ["run-40"] and runs[0].cells["c"]["status"] == "passed"


def test_it_needs_what_github_actions_sets(tmp_path: Path, github: FakeGitHub) -> None:
    done = fetch(github, tmp_path / "h", GITHUB_TOKEN="")
    assert done.returncode == 2 and "GITHUB_TOKEN not set" in done.stderr
    assert github.requests == []
