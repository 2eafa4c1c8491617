"""Earlier runs' report artifacts, for the history view (:mod:`harness.history`).

    python -m harness.previous_runs --workflow nightly.yml --artifact matrix-report --runs 7 \
        --out history

Lists the workflow's last completed runs (not this one, ``$GITHUB_RUN_ID``) and downloads each
one's report artifact into ``OUT/run-<number>/matrix.json``, oldest last; ``harness.report
--history OUT/*`` and ``harness.gate check --history OUT/*`` read them. A run whose artifact
expired or was never uploaded is skipped and said. An artifact is untrusted input: only its
``matrix.json`` member is read (size-capped; no path from the archive is ever written), and
it must parse as JSON. Calls go through :mod:`harness.github_api`. Standard library.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import urllib.parse
import zipfile
from pathlib import Path
from typing import Any

from harness.github_api import GitHub

MEMBER = "matrix.json"
MAX_ZIP = 64 * 1024 * 1024
MAX_MEMBER = 32 * 1024 * 1024


def completed_runs(github: GitHub, workflow: str, n: int, skip: str | None) -> list[dict[str, Any]]:
    """The workflow's last ``n`` completed runs, newest first, without the run ``skip``."""
    query = urllib.parse.urlencode({"status": "completed", "per_page": min(n + 1, 100)})
    found = github.call("GET", f"/actions/workflows/{urllib.parse.quote(workflow)}/runs?{query}")
    runs = [r for r in (found or {}).get("workflow_runs", []) if str(r.get("id")) != str(skip)]
    return runs[:n]


def matrix_json(archive: bytes) -> bytes:
    """The ``matrix.json`` member of an artifact's zip; ValueError if absent, too large or not
    JSON."""
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        try:
            info = zf.getinfo(MEMBER)
        except KeyError:
            raise ValueError(f"the artifact holds no {MEMBER}") from None
        if info.file_size > MAX_MEMBER:
            raise ValueError(f"its {MEMBER} is {info.file_size} bytes (limit {MAX_MEMBER})")
        with zf.open(info) as fh:
            data = fh.read(MAX_MEMBER + 1)
    if len(data) > MAX_MEMBER:
        raise ValueError(f"its {MEMBER} exceeds {MAX_MEMBER} bytes")
    json.loads(data)  # raises ValueError: a file that is not JSON is not a report
    return data


def fetch(
    github: GitHub, workflow: str, artifact: str, n: int, out: Path, skip: str | None
) -> list[str]:
    """Download the reports; returns one line per run (what was kept, or why not)."""
    said = []
    for run in completed_runs(github, workflow, n, skip):
        label = f"run-{int(run['run_number'])}"
        query = urllib.parse.urlencode({"name": artifact})
        listed = github.call("GET", f"/actions/runs/{int(run['id'])}/artifacts?{query}") or {}
        usable = [a for a in listed.get("artifacts", []) if a.get("name") == artifact]
        usable = [a for a in usable if not a.get("expired")]
        if not usable:
            said.append(f"{label}: no unexpired {artifact!r} artifact; skipped")
            continue
        try:
            archive = github.download(f"/actions/artifacts/{int(usable[0]['id'])}/zip", MAX_ZIP)
            data = matrix_json(archive)
        except (ValueError, zipfile.BadZipFile, OSError) as exc:
            said.append(f"{label}: artifact unusable ({exc}); skipped")
            continue
        folder = out / label
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MEMBER).write_bytes(data)
        said.append(f"{label}: {run.get('conclusion')} run of {run.get('created_at')} → {folder}")
    return said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.previous_runs")
    parser.add_argument("--workflow", required=True, help="the workflow file, e.g. nightly.yml")
    parser.add_argument("--artifact", default="matrix-report")
    parser.add_argument("--runs", type=int, default=7, help="how many earlier runs (1..50)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 50:
        parser.error(f"--runs {args.runs}: accepted 1..50")
    try:
        github = GitHub.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    skip = os.environ.get("GITHUB_RUN_ID")
    for line in fetch(github, args.workflow, args.artifact, args.runs, args.out, skip):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
