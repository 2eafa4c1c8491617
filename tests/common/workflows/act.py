"""Run the repository's real workflow files with `act`, on this host, with no network.

Jobs run on the host (``-P ubuntu-24.04=-self-hosted``, no Docker). The marketplace actions
the workflows use that need the network are replaced through ``--local-repository`` by the
composite stand-ins under ``tests/actions`` (see its README); nothing else is replaced. act's
cache server is off and its artifact server is not started (the upload/download stand-ins keep
artifacts in a folder), so no server binds any address. Each run gets a fresh copy of the work
tree committed to a throwaway git repository, so a scenario can inject a fault into its copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
STANDINS = ROOT / "tests" / "actions"
REPOSITORY = "compat-matrix/compat-matrix"  # what github.repository reads under act
TIMES: dict[str, float] = {}  # each scenario's wall time, printed by tests/workflows/conftest.py
# marketplace action repository -> its stand-in folder
REPLACED = {
    "actions/checkout": "checkout",
    "actions/setup-python": "setup-python",
    "actions/upload-artifact": "upload-artifact",
    "actions/download-artifact": "download-artifact",
    "actions/upload-pages-artifact": "upload-pages-artifact",
    "actions/deploy-pages": "deploy-pages",
    "pypa/gh-action-pypi-publish": "pypi-publish",
    "softprops/action-gh-release": "gh-release",
}
_USES = re.compile(r"uses:\s*([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@([0-9a-f]{40})")


def act_binary() -> str:
    here = Path(sys.executable).parent / "act"
    found = str(here) if here.exists() else shutil.which("act")
    assert found, "act is installed by requirements/act.txt (pip install -r requirements/act.txt)"
    return found


def local_repositories(workflows: Path) -> list[str]:
    """``--local-repository`` arguments for every pinned marketplace action the workflows use;
    an action without a stand-in fails here rather than reaching for the network."""
    pins: set[tuple[str, str]] = set()
    for path in sorted(workflows.glob("*.yml")):
        pins |= set(_USES.findall(path.read_text()))
    args = []
    for repo, sha in sorted(pins):
        assert repo in REPLACED, f"{repo} has no stand-in under tests/actions"
        args += ["--local-repository", f"{repo}@{sha}={STANDINS / REPLACED[repo]}"]
    return args


def copy_tree(dest: Path) -> Path:
    """The work tree as git sees it (tracked and untracked, not ignored), as a new repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def commit(repo: Path, message: str = "act scenario") -> str:
    git = ["git", "-C", str(repo), "-c", "user.name=act", "-c", "user.email=act@localhost"]
    if not (repo / ".git").exists():
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        url = f"https://github.com/{REPOSITORY}.git"  # read by act for github.repository only
        subprocess.run([*git, "remote", "add", "origin", url], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


@dataclass
class Job:
    name: str  # act's job name, e.g. "matrix/cell-1" or "matrix/torch2.6-ao0.8-cpu"
    job_id: str
    matrix: dict[str, Any]
    result: str = ""
    summary: str = ""
    failed_steps: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    set_outputs: dict[str, str] = field(default_factory=dict)  # every step's outputs, by name


@dataclass
class Run:
    returncode: int
    seconds: float
    jobs: dict[str, Job]
    store: Path
    log: Path

    def by_id(self, job_id: str) -> list[Job]:
        return [j for j in self.jobs.values() if j.job_id == job_id]

    def one(self, job_id: str) -> Job:
        (job,) = self.by_id(job_id)
        return job

    def artifact(self, name: str) -> Path:
        return self.store / "artifacts" / name

    def artifacts(self) -> list[str]:
        return sorted(p.name for p in (self.store / "artifacts").glob("*"))

    def actions(self) -> list[dict[str, Any]]:
        path = self.store / "log.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def parse(log: Path) -> dict[str, Job]:
    jobs: dict[str, Job] = {}
    summaries: dict[str, list[str]] = defaultdict(list)
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        name = rec.get("job")
        if not name:
            continue
        job = jobs.setdefault(name, Job(name, rec.get("jobID", ""), rec.get("matrix") or {}))
        if rec.get("command") == "summary":
            summaries[name].append(rec.get("content", ""))
        if rec.get("command") == "set-output":
            job.set_outputs[str(rec.get("name"))] = str(rec.get("arg"))
        if rec.get("stepResult") == "failure":
            job.failed_steps.append(str(rec.get("step", "")))
        if rec.get("jobResult"):
            job.result = rec["jobResult"]
        if rec.get("raw_output"):
            job.output.append(str(rec.get("msg", "")))
    for name, parts in summaries.items():
        jobs[name].summary = "".join(parts)
    return jobs


def run_act(
    repo: Path,
    work: Path,
    event: str,
    workflow: str,
    payload: dict[str, Any],
    *,
    variables: dict[str, str] | None = None,
    timeout_s: int = 1200,
    concurrent_jobs: int = 2,
) -> Run:
    """Run ``.github/workflows/<workflow>`` of ``repo`` for ``event`` with ``payload``."""
    store = work / "store"
    store.mkdir(parents=True, exist_ok=True)
    event_file = work / "event.json"
    event_file.write_text(json.dumps(payload))
    log = work / "act.jsonl"
    cmd = [
        act_binary(),
        event,
        "-C",
        str(repo),
        "-W",
        f".github/workflows/{workflow}",
        "-e",
        str(event_file),
        "-P",
        "ubuntu-24.04=-self-hosted",
        *local_repositories(repo / ".github" / "workflows"),
        "--action-offline-mode",
        "--action-cache-path",
        str(work / "act-cache"),
        "--no-cache-server",
        "--json",
        "--concurrent-jobs",
        str(concurrent_jobs),
        "--env",
        f"COMPAT_ACT_STORE={store}",
        "--env",
        f"COMPAT_ACT_SOURCE={repo}",
        "--env",
        f"COMPAT_ACT_REPOSITORY={REPOSITORY}",
    ]
    for key, value in (variables or {}).items():
        cmd += ["--var", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOX_", "GITHUB_", "RUNNER_"))}
    env.pop("VIRTUAL_ENV", None)
    env.pop("COMPAT_MATRIX_REPORTS", None)
    start = time.monotonic()
    with log.open("w") as fh:
        done = subprocess.run(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, check=False
        )
    return Run(done.returncode, time.monotonic() - start, parse(log), store, log)
