"""Earlier runs' report artifacts, for the history view (:mod:`harness.report.history`).

    python -m harness.ci.previous_runs --workflow nightly.yml --artifact matrix-report --runs 7 \
        --out history

Lists the workflow's last completed runs (not this one, ``$GITHUB_RUN_ID``) and downloads each
one's report artifact into ``OUT/run-<number>/matrix.json``, oldest last; ``harness.report.pages
--history OUT/*`` and ``harness.ci.gate check --history OUT/*`` read them.

What is guaranteed: the history is an extra, so nothing here fails the caller's night. An API error
listing the runs is one ``warning:`` line (no earlier report is used); an API error on one run, a
run whose artifact expired or was never uploaded, and a bad artifact (not a zip, a corrupt or
oversize member, a ``matrix.json`` that is not JSON or not a report) each skip that run with one
line naming the run and why. An artifact is untrusted input: only its ``matrix.json`` member is read
(size-capped; no path from the archive is ever written), and it is written to ``OUT`` only if
:func:`harness.report.history.from_report` accepts it, so ``--history OUT/*`` never meets a file it
cannot read. The exit status is 0 whatever the API and the artifacts did; 2 only for a bad command
line or a missing ``GITHUB_*`` variable. Calls go through :mod:`harness.ci.github_api`. Standard
library.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import urllib.parse
import zipfile
import zlib
from pathlib import Path
from typing import Any

from harness.ci.github_api import GitHub
from harness.matrix.errors import Refused
from harness.report.history import from_report

MEMBER = "matrix.json"
MAX_ZIP = 64 * 1024 * 1024
MAX_MEMBER = 32 * 1024 * 1024
# what a failing API call or a bad archive raises: HTTPError and URLError are OSErrors, a
# non-JSON answer or report a ValueError; zipfile and zlib raise the others on corrupt data
UNUSABLE: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,  # a compression method zipfile does not have
    RuntimeError,  # an encrypted member
)


def completed_runs(
    github: GitHub, workflow: str, n: int, skip: str | None, event: str = ""
) -> list[dict[str, Any]]:
    """The workflow's last ``n`` completed runs (of ``event`` only, when given), newest first,
    without the run ``skip``; raises what the API call raises (one of :data:`UNUSABLE`),
    ValueError for an answer that is not a list of runs."""
    wanted = {"status": "completed", "per_page": min(n + 1, 100)} | (
        {"event": event} if event else {}
    )
    query = urllib.parse.urlencode(wanted)
    found = github.call("GET", f"/actions/workflows/{urllib.parse.quote(workflow)}/runs?{query}")
    runs = found.get("workflow_runs") if isinstance(found, dict) else None
    if not isinstance(runs, list):
        raise Refused(f"the API's answer holds no 'workflow_runs' list: {str(found)[:200]!r}")
    runs = [r for r in runs if isinstance(r, dict) and str(r.get("id")) != str(skip)]
    return runs[:n]


def matrix_json(archive: bytes) -> bytes:
    """The ``matrix.json`` member of an artifact's zip, checked to be a report that
    :mod:`harness.report.history` reads; ValueError (or another of :data:`UNUSABLE`) if the archive
    is not a zip, or the member is absent, too large, corrupt, not JSON or not a report."""
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        try:
            info = zf.getinfo(MEMBER)
        except KeyError:
            raise Refused(f"the artifact holds no {MEMBER}") from None
        if info.file_size > MAX_MEMBER:
            raise Refused(f"its {MEMBER} is {info.file_size} bytes (limit {MAX_MEMBER})")
        with zf.open(info) as fh:
            data = fh.read(MAX_MEMBER + 1)
    if len(data) > MAX_MEMBER:
        raise Refused(f"its {MEMBER} exceeds {MAX_MEMBER} bytes")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise Refused(f"its {MEMBER} is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise Refused(f"its {MEMBER} is a JSON {type(doc).__name__}, not a report object")
    from_report(doc, MEMBER)  # HistoryError (a ValueError) names what a report lacks
    return data


def run_label(run: dict[str, Any]) -> str:
    """``run-<number>`` of a listed run; ValueError if the API gave it no usable number or id."""
    number, ident = run.get("run_number"), run.get("id")
    if not isinstance(number, int) or not isinstance(ident, int):
        raise Refused(f"a listed run without an integer id and run_number: {str(run)[:200]!r}")
    return f"run-{number}"


def fetch_one(github: GitHub, run: dict[str, Any], artifact: str, out: Path) -> str:
    """Download one run's report into ``out/run-<number>``; the line saying what was kept, or
    which run was skipped and why. Never raises for what the API or the artifact did."""
    try:
        label = run_label(run)
    except ValueError as exc:
        return f"warning: {exc}; skipped"
    query = urllib.parse.urlencode({"name": artifact})
    try:
        listed = github.call("GET", f"/actions/runs/{run['id']}/artifacts?{query}")
    except UNUSABLE as exc:
        return f"{label}: could not list its artifacts ({exc}); skipped"
    found = listed.get("artifacts") if isinstance(listed, dict) else None
    usable = [
        a
        for a in (found if isinstance(found, list) else [])
        if isinstance(a, dict) and a.get("name") == artifact and not a.get("expired")
    ]
    if not usable or not isinstance(usable[0].get("id"), int):
        return f"{label}: no unexpired {artifact!r} artifact; skipped"
    try:
        archive = github.download(f"/actions/artifacts/{usable[0]['id']}/zip", MAX_ZIP)
        data = matrix_json(archive)
    except UNUSABLE as exc:
        return f"{label}: artifact unusable ({exc}); skipped"
    folder = out / label
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MEMBER).write_bytes(data)
    return f"{label}: {run.get('conclusion')} run of {run.get('created_at')} → {folder}"


def fetch(
    github: GitHub, workflow: str, artifact: str, n: int, out: Path, skip: str | None
) -> list[str]:
    """Download the reports; returns one line per run (what was kept, or why not), or a single
    ``warning:`` line when the runs could not be listed. Never raises for what the API did."""
    try:
        runs = completed_runs(github, workflow, n, skip)
    except UNUSABLE as exc:
        return [
            f"warning: could not list the completed runs of {workflow} ({exc});"
            " no earlier report is used"
        ]
    return [fetch_one(github, run, artifact, out) for run in runs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.ci.previous_runs")
    parser.add_argument("--workflow", required=True, help="the workflow file, e.g. nightly.yml")
    parser.add_argument("--artifact", default="matrix-report")
    parser.add_argument("--runs", type=int, default=7, help="how many earlier runs (1..50)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 50:
        parser.error(f"--runs {args.runs}: accepted 1..50")
    github = GitHub.from_env_or_say()
    if github is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    skip = os.environ.get("GITHUB_RUN_ID")
    for line in fetch(github, args.workflow, args.artifact, args.runs, args.out, skip):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
