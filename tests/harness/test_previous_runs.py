"""harness.ci.previous_runs: earlier nightlies' report artifacts, fetched from a local server on
127.0.0.1 that plays GitHub's REST API (runs, artifacts, the archive's redirect) and records
every request."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.ci import previous_runs
from harness.ci.github_api import GitHub
from harness.report import history
from tests.common.harness.fake_actions import (
    ACTIONS,
    REPO,
    Artifact,
    FakeActions,
    Run,
    Runs,
    archive,
)
from tests.common.harness.local_http import serving
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]
REPORT = {"generated": "2026-11-30T03:40:00+00:00", "cells": {"c": {"status": "passed"}}}


def corrupt_archive() -> bytes:
    """A zip whose matrix.json is deflated and then damaged: zlib, not zipfile, raises."""
    cells = {f"c{i}": {"status": "passed"} for i in range(200)}
    data = bytearray(
        archive(
            {"matrix.json": json.dumps({"generated": "g", "cells": cells}).encode()}, deflate=True
        )
    )
    start = 30 + len("matrix.json")  # the local header, then the member's compressed bytes
    for i in range(start + 2, start + 40):
        data[i] ^= 0xFF
    return bytes(data)


def report_run(number: int, artifact: int, data: bytes, expired: bool = False) -> Run:
    return Run(number, "schedule", [Artifact(artifact, "matrix-report", data, expired)])


def default_runs() -> Runs:
    good = json.dumps(REPORT).encode()
    return {
        500: report_run(50, 1, archive({"matrix.json": b"{}"})),  # the current run: skipped
        400: report_run(40, 2, archive({"matrix.json": good, "../evil.txt": b"x"})),
        300: report_run(30, 3, archive({"matrix.json": good}), expired=True),
        200: report_run(20, 4, archive({"drift.json": b"{}"})),  # no matrix.json
        100: report_run(10, 5, archive({"matrix.json": b"not json"})),
    }


@pytest.fixture
def github() -> Iterator[FakeActions]:
    with serving(FakeActions(default_runs())) as server:
        yield server


def fetch(server: FakeActions, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    clean |= {
        "GITHUB_API_URL": server.api_url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": "token-for-the-test",
        "GITHUB_RUN_ID": "500",
        **env,
    }
    args = ["--workflow=nightly.yml", "--runs=5", f"--out={out}"]
    return run_module("harness.ci.previous_runs", *args, env=clean, timeout=60)


def test_earlier_reports_are_fetched_and_unusable_ones_skipped(
    github: FakeActions, tmp_path: Path
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


def test_it_needs_what_github_actions_sets(tmp_path: Path, github: FakeActions) -> None:
    done = fetch(github, tmp_path / "h", GITHUB_TOKEN="")
    assert done.returncode == 2 and "GITHUB_TOKEN not set" in done.stderr
    assert github.requests == []


def test_an_api_error_listing_the_runs_is_a_warning_and_no_failure(
    github: FakeActions, tmp_path: Path
) -> None:
    """It failed the history job (a traceback, exit 1), and with it the night's report."""
    github.broken.add(github.runs_path)
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
    runs: Runs = {400: report_run(40, 2, good), 300: report_run(30, 3, good)}
    with serving(FakeActions(runs)) as github:
        github.broken.add(f"{ACTIONS}/runs/400/artifacts")
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
    runs: Runs = {400: report_run(40, 2, bad), 300: report_run(30, 3, good)}
    with serving(FakeActions(runs)) as github:
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


def test_a_run_listing_without_runs_is_a_warning(github: FakeActions, tmp_path: Path) -> None:
    github.runs = {}
    gh = GitHub(github.api_url, REPO, "t")
    assert previous_runs.fetch(gh, "nightly.yml", "matrix-report", 3, tmp_path, None) == []
    lines = previous_runs.fetch(gh, "other.yml", "matrix-report", 3, tmp_path, None)
    assert lines == [
        "warning: could not list the completed runs of other.yml"
        " (HTTP Error 404: Not Found); no earlier report is used"
    ]
