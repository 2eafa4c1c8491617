"""Finding each Python's interpreter: named, pyenv's, uv's; a Python found nowhere skips its
cells with a reason that says how to provide it (a real run of the selection, no mock)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.cells import group_run, run
from harness.matrix import interpreters, paths, spec, wheels
from harness.matrix import selection as selection_mod

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
NOWHERE = "3.99"  # no such CPython: no pyenv, uv or PATH can have it


def test_a_named_interpreter_is_asked_its_version(tmp_path: Path) -> None:
    env = {interpreters.ENV: os.pathsep.join(["/no/such/python", sys.executable])}
    found = interpreters.find([HERE, NOWHERE], environ={**env, "PYENV_ROOT": str(tmp_path)})
    assert found[HERE] == Path(sys.executable)
    assert found[NOWHERE] is None


def test_pyenv_versions_are_found_newest_patch_first_and_checked(tmp_path: Path) -> None:
    for patch, target in (("2", sys.executable), ("7", sys.executable), ("9", "/no/such")):
        folder = tmp_path / "versions" / f"{HERE}.{patch}" / "bin"
        folder.mkdir(parents=True)
        (folder / f"python{HERE}").symlink_to(target)
    (tmp_path / "versions" / f"{HERE}.0-dev").mkdir()  # not a release folder: ignored
    found = interpreters.find([HERE], environ={"PYENV_ROOT": str(tmp_path)})
    # 3.X.9 is the newest but does not run: the next newest that answers with its version wins
    assert found[HERE] == tmp_path / "versions" / f"{HERE}.7" / "bin" / f"python{HERE}"


def test_uv_discovery_is_the_last_resort(tmp_path: Path) -> None:
    lone = {"PYENV_ROOT": str(tmp_path)}  # no pyenv versions, nothing named
    found = interpreters.find([HERE, NOWHERE], uv=group_run.uv_bin(), environ=lone)
    assert found[HERE] is not None and interpreters.version_of(found[HERE]) == HERE
    assert found[NOWHERE] is None
    assert interpreters.find([HERE], uv=None, environ=lone)[HERE] is None  # no uv: not found


def test_expose_links_each_found_interpreter_first_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin")
    folder = interpreters.expose({HERE: Path(sys.executable), NOWHERE: None}, tmp_path / "py")
    assert os.environ["PATH"].split(os.pathsep)[0] == str(folder)
    assert (folder / f"python{HERE}").resolve() == Path(sys.executable).resolve()
    assert not (folder / f"python{NOWHERE}").exists()
    assert interpreters.version_of(folder / f"python{HERE}") == HERE


def test_a_missing_python_gives_skipped_cells_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = (paths.ROOT / "matrix.toml").read_text()
    text = base.replace(
        'python = ["3.10", "3.11", "3.12", "3.13", "3.14"]', f'python = ["3.11", "{NOWHERE}"]'
    )
    assert text != base
    (tmp_path / "matrix.toml").write_text(text)
    published = (paths.ROOT / wheels.FILE).read_text().replace('"3.11"', f'"3.11", "{NOWHERE}"')
    (tmp_path / wheels.FILE).write_text(published)
    matrix = spec.load(tmp_path / "matrix.toml")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.delenv(interpreters.ENV, raising=False)
    selection = selection_mod.select(matrix, ["core"], ["cpu"], patterns=[f"*-py{NOWHERE}-*"])
    assert selection.cells and all(c.python == NOWHERE for c in selection.cells)
    assert NOWHERE in selection.missing and not group_run.group_cells(
        [c for c in selection.cells if selection.skip_reason(c) is None]
    )
    reports = tmp_path / "reports"
    results = run.run_matrix(
        matrix, selection, envdir=tmp_path / "envs", reports=reports, uv="uv", echo=None
    )
    assert {r.status for r in results} == {"skipped"}
    cell = json.loads((paths.cell_dir(reports, results[0].id) / paths.CELL_FILE).read_text())
    assert cell["status"] == "skipped"
    for words in (f"Python {NOWHERE}", interpreters.ENV, f"uv python install {NOWHERE}"):
        assert words in cell["reason"]
    manifest = json.loads((reports / paths.RUN_FILE).read_text())
    assert NOWHERE in manifest["missing_pythons"]
    assert not (tmp_path / "envs").exists()  # nothing was installed for it
