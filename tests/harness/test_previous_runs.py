"""harness.ci.previous_runs: earlier nightlies' report artifacts, fetched from a local server on
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
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.ci import previous_runs
from harness.ci.github_api import GitHub
from harness.report import history
from tests.common.local_http import QuietHandler, serving

ROOT = Path(__file__).resolve().parents[2]
REPO = "owner/compat-matrix"
REPORT = {"generated": "2026-11-30T03:40:00+00:00", "cells": {"c": {"status": "passed"}}}


def archive(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def corrupt_archive() -> bytes:
    """A zip whose matrix.json is deflated and then damaged: zlib, not zipfile, raises."""
    buf = io.BytesIO()
    cells = {f"c{i}": {"status": "passed"} for i in range(200)}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("matrix.json", json.dumps({"generated": "g", "cells": cells}))
    data = bytearray(buf.getvalue())
    start = 30 + len("matrix.json")  # the local header, then the member's compressed bytes
    for i in range(start + 2, start + 40):
        data[i] ^= 0xFF
    return bytes(data)


# run id -> (run number, artifacts: (artifact id, expired, zip bytes))
Runs = dict[int, tuple[int, list[tuple[int, bool, bytes]]]]


def default_runs() -> Runs:
    good = json.dumps(REPORT).encode()
    return {
        500: (50, [(1, False, archive({"matrix.json": b"{}"}))]),  # the current run: skipped
        400: (40, [(2, False, archive({"matrix.json": good, "../evil.txt": b"x"}))]),
        300: (30, [(3, True, archive({"matrix.json": good}))]),  # expired
        200: (20, [(4, False, archive({"drift.json": b"{}"}))]),  # no matrix.json
        100: (10, [(5, False, archive({"matrix.json": b"not json"}))]),
    }


class FakeGitHub(ThreadingHTTPServer):
    """The Actions API of one repository; ``broken`` holds the request paths (without the
    query) it answers with HTTP 500, as GitHub does on a bad day."""

    def __init__(self, runs: Runs | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.runs: Runs = default_runs() if runs is None else runs
        self.broken: set[str] = set()


class Handler(QuietHandler):
    server: FakeGitHub

    def do_GET(self) -> None:
        self.server.requests.append((self.path, dict(self.headers)))
        path = self.path.split("?")[0]
        base = f"/api/repos/{REPO}/actions"
        runs = self.server.runs
        if path in self.server.broken:
            self.send(500, b'{"message": "Server Error"}')
        elif path == f"{base}/workflows/nightly.yml/runs":
            doc = {
                "workflow_runs": [
                    {"id": i, "run_number": n, "conclusion": "success", "created_at": f"day {n}"}
                    for i, (n, _) in sorted(runs.items(), reverse=True)
                ]
            }
            self.send(200, json.dumps(doc).encode())
        elif path.startswith(f"{base}/runs/") and path.endswith("/artifacts"):
            run = int(path.split("/")[-2])
            arts = [
                {"id": a, "name": "matrix-report", "expired": exp} for a, exp, _ in runs[run][1]
            ]
            self.send(200, json.dumps({"artifacts": arts}).encode())
        elif path.startswith(f"{base}/artifacts/") and path.endswith("/zip"):
            art = int(path.split("/")[-2])  # GitHub answers with a redirect to signed storage
            port = self.server.server_address[1]
            self.send(302, b"", {"Location": f"http://127.0.0.1:{port}/blob/{art}"})
        elif path.startswith("/blob/"):
            art = int(path.rsplit("/", 1)[1])
            data = next(z for _, arts in runs.values() for a, _, z in arts if a == art)
            self.send(200, data)
        else:
            self.send(404, b"{}")


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
    cmd = [sys.executable, "-m", "harness.ci.previous_runs", "--workflow=nightly.yml"]
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


RUNS_PATH = f"/api/repos/{REPO}/actions/workflows/nightly.yml/runs"


def test_an_api_error_listing_the_runs_is_a_warning_and_no_failure(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """It failed the history job (a traceback, exit 1), and with it the night's report."""
    github.broken.add(RUNS_PATH)
    out = tmp_path / "history"
    done = fetch(github, out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "warning: could not list the completed runs of nightly.yml"
        " (HTTP Error 500: Internal Server Error); no earlier report is used"
    ]
    assert list(out.iterdir()) == []


def test_an_api_error_on_one_run_skips_that_run_only(tmp_path: Path) -> None:
    good = archive({"matrix.json": json.dumps(REPORT).encode()})
    runs: Runs = {400: (40, [(2, False, good)]), 300: (30, [(3, False, good)])}
    with serving(FakeGitHub(runs)) as github:
        github.broken.add(f"/api/repos/{REPO}/actions/runs/400/artifacts")
        out = tmp_path / "history"
        done = fetch(github, out)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "run-40: could not list its artifacts (HTTP Error 500: Internal Server Error); skipped"
    )
    assert lines[1].startswith("run-30: success run of day 30 →")
    assert [p.name for p in out.iterdir()] == ["run-30"]


BAD_ARTIFACTS = {
    "corrupt-deflate": (corrupt_archive(), "Error -3 while decompressing data"),
    "not-a-zip": (b"PK\x03\x04 truncated", "File is not a zip file"),
    "empty-object": (archive({"matrix.json": b"{}"}), "not a matrix.json (no 'cells' table"),
    "json-list": (archive({"matrix.json": b"[]"}), "its matrix.json is a JSON list, not a report"),
    "cell-without-status": (
        archive({"matrix.json": json.dumps({"generated": "g", "cells": {"c": {}}}).encode()}),
        "cell 'c' has no status",
    ),
    "not-json": (archive({"matrix.json": b"\xff not json"}), "its matrix.json is not JSON"),
}


@pytest.mark.parametrize("kind", sorted(BAD_ARTIFACTS))
def test_a_bad_earlier_artifact_is_skipped_naming_the_run_and_why(
    kind: str, tmp_path: Path
) -> None:
    """A corrupt zip crashed the script; a matrix.json that is JSON but no report was kept, and
    `harness.report.pages --history` then failed on it: either way the history job failed."""
    bad, why = BAD_ARTIFACTS[kind]
    good = archive({"matrix.json": json.dumps(REPORT).encode()})
    runs: Runs = {400: (40, [(2, False, bad)]), 300: (30, [(3, False, good)])}
    with serving(FakeGitHub(runs)) as github:
        out = tmp_path / "history"
        done = fetch(github, out)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run-40: artifact unusable (") and lines[0].endswith("); skipped")
    assert why in lines[0], lines[0]
    assert lines[1].startswith("run-30: success run of day 30 →")
    kept = sorted(out.iterdir())
    assert [p.name for p in kept] == ["run-30"]
    assert [r.label for r in history.load(kept)] == ["run-30"]  # what --history reads, readable


def test_an_oversize_member_is_refused_naming_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(previous_runs, "MAX_MEMBER", 16)
    with pytest.raises(ValueError, match=r"its matrix.json is \d+ bytes \(limit 16\)"):
        previous_runs.matrix_json(archive({"matrix.json": json.dumps(REPORT).encode()}))


def test_a_run_listing_without_runs_is_a_warning(github: FakeGitHub, tmp_path: Path) -> None:
    github.runs = {}
    gh = GitHub(f"http://127.0.0.1:{github.server_address[1]}/api", REPO, "t")
    assert previous_runs.fetch(gh, "nightly.yml", "matrix-report", 3, tmp_path, None) == []
    lines = previous_runs.fetch(gh, "other.yml", "matrix-report", 3, tmp_path, None)
    assert lines == [
        "warning: could not list the completed runs of other.yml"
        " (HTTP Error 404: Not Found); no earlier report is used"
    ]
