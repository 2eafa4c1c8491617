"""The nightly's example database, carried from one scheduled night to the next as artifacts.

    python -m harness.ci.example_seed --workflow nightly.yml --out seed/examples

Downloads every ``hypothesis-*`` artifact (the example database one cell job kept; not the night's
own ``hypothesis-seed``, whose entries the cell jobs replayed and dropped when stale) of the newest
completed *scheduled* run of the workflow and merges their files into ``OUT``, which the nightly's
seed job uploads as this night's ``hypothesis-seed`` for every cell job to start from. Not the
Actions cache: a gate's job runs an upstream pull request's code, which could take its run's
cache token and write any cache key a trusted run restores; an artifact belongs to the run that
uploaded it, and only scheduled nightly runs, which install no candidate, are read here.

An artifact is untrusted all the same: only regular files with a relative path of plain names
(an example database's ``<key>/<value>`` files) are written, each at most :data:`MAX_FILE`
bytes, :data:`MAX_TOTAL` in all; anything else in an archive skips that archive, named in one
line. The exit status is 0 whatever the API and the artifacts did (the seed is an extra: a night
without it starts from nothing); 2 for a bad command line or a missing ``GITHUB_*`` variable.
Standard library.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import urllib.parse
import zipfile
from pathlib import Path
from typing import Any

from harness.ci.github_api import GitHub
from harness.ci.previous_runs import UNUSABLE, completed_runs
from harness.matrix.errors import Refused

PREFIX = "hypothesis-"  # matrix.yml's `keep the example database` artifacts
SEED = "hypothesis-seed"  # what this makes: a night's seed is not read back (stale entries)
MAX_ZIP = 64 * 1024 * 1024
MAX_FILE = 1024 * 1024
MAX_TOTAL = 256 * 1024 * 1024
_PART = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def members(archive: bytes) -> dict[str, bytes]:
    """The files of one artifact's zip, by relative path; ValueError (or another of
    :data:`~harness.ci.previous_runs.UNUSABLE`) naming the first member that is not a plain
    file of a plain relative path, or a size past the limits."""
    out: dict[str, bytes] = {}
    total = 0
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            parts = info.filename.split("/")
            if not all(_PART.match(p) and p not in (".", "..") for p in parts):
                raise Refused(f"member {info.filename[:100]!r} is not a plain relative path")
            if (info.external_attr >> 16) & 0o170000 not in (0, 0o100000):
                raise Refused(f"member {info.filename!r} is not a regular file")
            if info.file_size > MAX_FILE:
                raise Refused(f"member {info.filename!r} is {info.file_size} bytes")
            total += info.file_size
            if total > MAX_TOTAL:
                raise Refused(f"its members exceed {MAX_TOTAL} bytes")
            with zf.open(info) as fh:
                data = fh.read(MAX_FILE + 1)
            if len(data) > MAX_FILE:
                raise Refused(f"member {info.filename!r} exceeds {MAX_FILE} bytes")
            out[info.filename] = data
    return out


def newest_scheduled(github: GitHub, workflow: str, skip: str | None) -> dict[str, Any] | None:
    runs = completed_runs(github, workflow, 1, skip, event="schedule")
    return runs[0] if runs else None


def artifacts(github: GitHub, run_id: int) -> list[dict[str, Any]]:
    """The run's unexpired example-database artifacts."""
    query = urllib.parse.urlencode({"per_page": 100})
    listed = github.call("GET", f"/actions/runs/{run_id}/artifacts?{query}")
    found = listed.get("artifacts") if isinstance(listed, dict) else None
    return [
        a
        for a in (found if isinstance(found, list) else [])
        if isinstance(a, dict)
        and str(a.get("name", "")).startswith(PREFIX)
        and a.get("name") != SEED
        and isinstance(a.get("id"), int)
        and not a.get("expired")
    ]


def seed(github: GitHub, workflow: str, out: Path, skip: str | None) -> list[str]:
    """Merge the newest scheduled run's example databases into ``out``; one line per artifact
    (kept, or why not), or one line saying why there is nothing. Never raises for what the API
    or an artifact did."""
    try:
        run = newest_scheduled(github, workflow, skip)
        if run is None or not isinstance(run.get("id"), int):
            return [f"no completed scheduled run of {workflow}: no seed"]
        found = artifacts(github, run["id"])
    except UNUSABLE as exc:
        return [f"warning: could not list the scheduled runs' artifacts ({exc}); no seed"]
    lines = [] if found else [f"run {run['id']}: no example database artifact; no seed"]
    for artifact in found:
        try:
            files = members(github.download(f"/actions/artifacts/{artifact['id']}/zip", MAX_ZIP))
        except UNUSABLE as exc:
            lines.append(f"{artifact['name']}: unusable ({exc}); skipped")
            continue
        for name, data in files.items():
            path = out.joinpath(*name.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        lines.append(f"{artifact['name']}: {len(files)} files of run {run['id']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.ci.example_seed")
    parser.add_argument("--workflow", required=True, help="the workflow file, e.g. nightly.yml")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    github = GitHub.from_env_or_say()
    if github is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for line in seed(github, args.workflow, args.out, os.environ.get("GITHUB_RUN_ID")):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
