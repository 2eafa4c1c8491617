"""tests/common/python_module.py: ``run_module`` runs ``python -m`` in this interpreter, from the
repository root unless told otherwise, with the environment given, and is the only place under
tests/ that spells ``sys.executable, "-m"`` by hand (a few argv builders aside, named below)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

import pytest

from tests.common.python_module import run_module

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
HELPER = TESTS / "common" / "python_module.py"
# argv lists built by hand, each for a reason run_module cannot serve: (file, function) -> why
BUILT_BY_HAND = {
    ("tests/harness/test_prerelease.py", "test_its_install_adds_the_newest_releases_step_after_the_pins"):
        "the argv the harness itself builds, as the test expects it (nothing runs)",
    ("tests/common/harness/faultproject.py", "argv"):
        "one argv for both nox run to its end (nox) and nox in the background (Popen, start_nox)",
    ("tests/common/peers/run.py", "command"):
        "written into the run's log and run with its output streamed to that log",
}  # fmt: skip
PROBE = """\
import json, os, sys
print(json.dumps({
    "executable": sys.executable,
    "cwd": os.getcwd(),
    "argv": sys.argv[1:],
    "env": {k: os.environ.get(k) for k in ("PROBE", "ONLY_IN_THE_PARENT")},
    "ignore_environment": sys.flags.ignore_environment,
}))
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    (tmp_path / "probe_module.py").write_text(PROBE)
    return tmp_path


def seen(done: subprocess.CompletedProcess[Any]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_it_runs_this_interpreter_in_the_folder_given_with_each_argument_a_string(
    probe: Path,
) -> None:
    done = run_module("probe_module", "plain", probe / "a path", cwd=probe)
    got = seen(done)
    assert got["executable"] == sys.executable
    assert Path(got["cwd"]).resolve() == probe.resolve()
    assert got["argv"] == ["plain", str(probe / "a path")]
    assert isinstance(done.stdout, str) and isinstance(done.stderr, str)


def test_the_folder_is_the_repository_root_by_default_and_the_env_is_taken_whole(
    probe: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONLY_IN_THE_PARENT", "1")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(probe), "PROBE": "given"}
    got = seen(run_module("probe_module", env=env))
    assert Path(got["cwd"]).resolve() == REPO
    assert (Path(got["cwd"]) / "pyproject.toml").is_file()
    assert got["env"] == {"PROBE": "given", "ONLY_IN_THE_PARENT": None}
    # no env: the caller's, inherited
    inherited = seen(run_module("probe_module", cwd=probe))
    assert inherited["env"] == {"PROBE": None, "ONLY_IN_THE_PARENT": "1"}


def test_cwd_none_is_the_callers_folder(probe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(probe)
    got = seen(run_module("probe_module", cwd=None))
    assert Path(got["cwd"]).resolve() == probe.resolve()


def test_check_raises_on_a_failing_module_and_otherwise_returns_its_code(
    probe: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_EXIT", "3")
    assert run_module("probe_module", cwd=probe).returncode == 3
    with pytest.raises(subprocess.CalledProcessError) as failed:
        run_module("probe_module", cwd=probe, check=True)
    assert failed.value.returncode == 3
    assert failed.value.cmd[0] == sys.executable
    assert failed.value.cmd[1:3] == ["-m", "probe_module"]


def test_bytes_uncaptured_flags_and_timeout(probe: Path) -> None:
    as_bytes = run_module("probe_module", cwd=probe, text=False)
    assert isinstance(as_bytes.stdout, bytes) and json.loads(as_bytes.stdout)["argv"] == []
    assert run_module("probe_module", cwd=probe, capture=False).stdout is None
    assert seen(run_module("probe_module", cwd=probe))["ignore_environment"] == 0
    assert seen(run_module("probe_module", flags=["-E"], cwd=probe))["ignore_environment"] == 1
    (probe / "sleeper.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_module("sleeper", cwd=probe, timeout=0.5)


# --- no `sys.executable, "-m"` by hand --------------------------------------------------------


def by_hand(node: ast.AST) -> TypeGuard[ast.List | ast.Tuple]:
    """A list or tuple display ``[sys.executable, <options>, "-m", ...]``."""
    if not isinstance(node, ast.List | ast.Tuple) or not node.elts:
        return False
    first = node.elts[0]
    if not (
        isinstance(first, ast.Attribute)
        and first.attr == "executable"
        and isinstance(first.value, ast.Name)
        and first.value.id == "sys"
    ):
        return False
    for elt in node.elts[1:]:
        if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
            return False
        if elt.value == "-m":
            return True
        if elt.value == "-c" or not elt.value.startswith("-"):
            return False
    return False


def argv_sites(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, enclosing function or ``<module>``) of each display ``by_hand`` flags."""

    def walk(node: ast.AST, where: str) -> Iterator[tuple[int, str]]:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            )
            if by_hand(child):
                yield child.lineno, inner
            yield from walk(child, inner)

    yield from walk(tree, "<module>")


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ('subprocess.run([sys.executable, "-m", "nox"])', True),
        ('cmd = [\n    sys.executable,\n    "-m",\n    "nox",\n]', True),
        ('run([*(sys.executable, "-m", "pip"), "download"])', True),
        ('[sys.executable, "-S", "-E", "-m", "harness.ci.commit_status"]', True),
        ('[sys.executable, "-c", "import sys"]', False),
        ('[sys.executable, "script.py", "-m"]', False),
        ('["python", "-m", "nox"]', False),
    ],
)
def test_the_detector_finds_argv_spelled_by_hand(source: str, flagged: bool) -> None:
    assert bool(list(argv_sites(ast.parse(source)))) is flagged


def test_no_file_under_tests_but_the_helper_spells_python_dash_m_by_hand() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.resolve() == HELPER.resolve() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(REPO).as_posix()
        for line, where in argv_sites(ast.parse(path.read_text(), filename=str(path))):
            if (rel, where) not in BUILT_BY_HAND:
                found.append(f"{rel}:{line} (in {where})")
    assert not found, "use tests.common.python_module.run_module instead: " + ", ".join(found)
    # every exception named still has its reason to be: a site that went away leaves the list
    for rel, where in BUILT_BY_HAND:
        sites = argv_sites(ast.parse((REPO / rel).read_text()))
        assert any(w == where for _, w in sites), f"{rel} ({where}) no longer builds one"
