"""The release workflow (.github/workflows/release.yml), read statically: a version tag is its
only trigger; it builds once, tests that build in the cells nox -s wheel lists, and only then
publishes by trusted publishing, with the OIDC token in the publishing job alone, behind the
protected `pypi` environment and no stored secret; the GitHub release is the one job that writes
to the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.common.harness.workflow_files import jobs, uses, workflow

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / ".github" / "workflows" / "release.yml").read_text()
DOC = workflow("release.yml")
JOBS = jobs(DOC)


def runs(job: str) -> list[str]:
    return [step.get("run", "") for step in JOBS[job]["steps"]]


def step_env(job: str, command: str) -> dict[str, Any]:
    (step,) = [s for s in JOBS[job]["steps"] if command in s.get("run", "")]
    env: dict[str, Any] = step.get("env", {})
    return env


def test_a_version_tag_is_the_only_trigger() -> None:
    assert DOC["on"] == {"push": {"tags": ["v*"]}}


def test_the_oidc_token_is_the_publishing_jobs_alone_behind_the_protected_environment() -> None:
    assert JOBS["publish"]["permissions"] == {"id-token": "write"}
    assert JOBS["publish"]["environment"] == "pypi"
    others = {name: job["permissions"] for name, job in JOBS.items() if name != "publish"}
    assert all("id-token" not in permissions for permissions in others.values()), others
    (publish,) = [s for s in JOBS["publish"]["steps"] if uses(s, "pypa/gh-action-pypi-publish")]
    assert set(publish["with"]) == {"packages-dir"}  # no password, no token: trusted publishing
    assert "secrets." not in TEXT


def test_only_the_github_release_writes_to_the_repository() -> None:
    writes = {name for name, job in JOBS.items() if "write" in job["permissions"].values()}
    assert writes == {"publish", "github-release"}
    assert JOBS["github-release"]["permissions"] == {"contents": "write"}
    (release,) = [
        s for s in JOBS["github-release"]["steps"] if uses(s, "softprops/action-gh-release")
    ]
    assert release["with"] == {"files": "dist/*", "fail_on_unmatched_files": True}


def test_it_builds_once_tests_that_build_then_publishes() -> None:
    assert JOBS["cells"]["needs"] == "build"
    assert sorted(JOBS["publish"]["needs"]) == ["build", "cells"]
    assert JOBS["github-release"]["needs"] == "publish"
    assert step_env("build", "nox -s dist")["TAG"] == "${{ github.ref_name }}"
    assert 'python -m nox -s dist -- --tag "$TAG"' in runs("build")
    assert any("harness.dist.wheel_cells --list" in r for r in runs("build"))
    matrix = JOBS["cells"]["strategy"]["matrix"]
    assert matrix["cell"] == "${{ fromJSON(needs.build.outputs.cells) }}"
    assert step_env("cells", "nox -s wheel")["CELL"] == "${{ matrix.cell }}"
    for job in ("cells", "publish", "github-release"):  # the build's files, never rebuilt
        downloads = [s for s in JOBS[job]["steps"] if uses(s, "actions/download-artifact")]
        assert [d["with"]["name"] for d in downloads] == ["dist"], job
        assert not any("nox -s dist" in r or "uv build" in r for r in runs(job)), job
