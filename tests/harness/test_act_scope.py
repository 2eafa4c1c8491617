"""harness.ci.act_scope: which changes make .ci/run run the act scenarios again. Each case is a
real git repository with the record of a green run, then one change."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.ci import act_scope
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    "compat/params.py": "x = 1\n",
    "tests/compat/params/test_moves.py": "def test_x(): pass\n",
    "tests/workflows/test_act.py": "def test_ci(): pass\n",
    ".github/workflows/ci.yml": "name: ci\n",
    "harness/ci/gate.py": "GATE = 1\n",
    "harness/mutation/runner.py": "RUN = 1\n",
    "reports/baseline.json": "{}\n",
    "reports/mutation.json": "{}\n",
    "docs/github-actions.md": "caller\n",
    "docs/design.md": "house\n",
    "README.md": "readme\n",
}


def git(repo: Path, *args: str) -> str:
    run = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost", *args]
    return subprocess.run(run, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose act scenarios last passed on its first commit."""
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "base")
    act_scope.record(tmp_path, tmp_path / act_scope.RECORD, ["s1", "s2"], {"ci": 3.0})
    return tmp_path


def covered(repo: Path, env: dict[str, str] | None = None) -> tuple[bool, str]:
    return act_scope.verdict(repo, repo / act_scope.RECORD, env or {})


def test_the_record_covers_the_tree_it_was_written_on(repo: Path) -> None:
    ok, line = covered(repo)
    assert ok, line
    assert "not run: 5 files they exercise" in line and "all 2 passed" in line
    doc = json.loads((repo / act_scope.RECORD).read_text())
    assert doc["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert set(doc["files"]) == {
        "tests/workflows/test_act.py",
        ".github/workflows/ci.yml",
        "harness/ci/gate.py",
        "reports/baseline.json",
        "docs/github-actions.md",
    }


@pytest.mark.parametrize(
    "rel",
    [
        "compat/params.py",
        "tests/compat/params/test_moves.py",
        "harness/mutation/runner.py",
        "reports/mutation.json",
        "docs/design.md",
        "README.md",
    ],
)
def test_a_change_the_scenarios_do_not_exercise_leaves_them_out(repo: Path, rel: str) -> None:
    (repo / rel).write_text("changed\n")
    git(repo, "commit", "-q", "-am", "change")
    assert covered(repo)[0]


@pytest.mark.parametrize(
    "rel",
    [
        ".github/workflows/ci.yml",
        "tests/workflows/test_act.py",
        "harness/ci/gate.py",
        "reports/baseline.json",
        "docs/github-actions.md",
    ],
)
def test_a_change_to_what_they_exercise_runs_them_naming_it(repo: Path, rel: str) -> None:
    (repo / rel).write_text("changed\n")
    ok, line = covered(repo)  # uncommitted: the work tree is what counts
    assert not ok and line.endswith(f"changed since their last green run: {rel}"), line
    git(repo, "commit", "-q", "-am", "change")
    assert not covered(repo)[0]


def test_an_added_and_a_removed_file_are_named(repo: Path) -> None:
    (repo / ".github" / "workflows" / "new.yml").write_text("name: new\n")  # untracked counts
    (repo / "harness" / "ci" / "gate.py").unlink()
    ok, line = covered(repo)
    assert not ok and line.endswith(": .github/workflows/new.yml, harness/ci/gate.py"), line


def test_the_same_contents_on_another_clone_are_covered(repo: Path, tmp_path: Path) -> None:
    (repo / "harness" / "ci" / "gate.py").write_text("GATE = 2\n")
    git(repo, "commit", "-q", "-am", "gate 2")
    (repo / "harness" / "ci" / "gate.py").write_text("GATE = 1\n")  # back as it was recorded
    git(repo, "commit", "-q", "-am", "gate 1")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    (clone / act_scope.RECORD).write_text((repo / act_scope.RECORD).read_text())
    assert covered(clone)[0]


def test_no_record_an_unreadable_one_and_always_run_them(repo: Path) -> None:
    assert covered(repo, {act_scope.ALWAYS: "always"}) == (
        False,
        "act scenarios: run: COMPAT_MATRIX_ACT=always",
    )
    (repo / act_scope.RECORD).write_text('{"schema": 0, "files": {}}')
    ok, line = covered(repo)
    assert not ok and "unreadable" in line and "schema 0" in line
    (repo / act_scope.RECORD).unlink()
    ok, line = covered(repo)
    assert not ok and "no record of a green run" in line


def test_the_command_exits_1_when_they_must_run(repo: Path) -> None:
    def command() -> subprocess.CompletedProcess[str]:
        return run_module("harness.ci.act_scope", "covered", "--root", repo)

    assert command().returncode == 0
    (repo / "harness" / "ci" / "gate.py").write_text("GATE = 3\n")
    run = command()
    assert run.returncode == 1 and "harness/ci/gate.py" in run.stdout


def test_this_repository_s_scenarios_exercise_the_workflows_not_compat() -> None:
    files = act_scope.fingerprint(ROOT)
    workflows = {str(p.relative_to(ROOT)) for p in (ROOT / ".github" / "workflows").glob("*.yml")}
    assert workflows and workflows <= set(files)
    assert {"tests/workflows/test_act.py", "reports/baseline.json", "noxfile.py"} <= set(files)
    assert not [f for f in files if f.startswith(("compat/", "harness/mutation/", "reports/act"))]
