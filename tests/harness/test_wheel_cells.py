"""The run against the installed wheel (harness/dist/wheel_cells.py) and the probe's guard
(harness/cells/probe.py: InstalledOnly): compat imports only from the installed distribution,
another copy on sys.path is refused and recorded, and a cell is judged on what was imported.

The guard runs for real in a throwaway venv: a wheel of a throwaway ``compat-matrix`` holding a
``compat`` package, and a folder holding another ``compat/`` (the source tree's stand-in)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.dist import wheel_cells
from harness.matrix import paths, spec
from tests.common.harness import throwaway_wheels

PROBE_DIR = paths.ROOT / "harness" / "cells"
SCRIPT = """
import json, sys
sys.path.insert(0, {probe_dir!r})
import probe
guard = probe.InstalledOnly()
guard.install()
sys.path[:0] = {front!r}
try:
    import compat
    print("imported", compat.__file__)
except ImportError as exc:
    print("refused:", exc)
guard.write({out!r})
"""


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real venvs: one with the throwaway compat-matrix 9.1 installed, one without it."""
    root = tmp_path_factory.mktemp("guard")
    found = throwaway_wheels.wheel(
        root, "compat_matrix", "9.1", "__version__ = '9.1'\n", package="compat"
    )
    with_dist = throwaway_wheels.outer_site_venv(root / "with")
    subprocess.run(
        [wheel_cells.uv_bin(), "pip", "install", "-q", "--python", str(with_dist), str(found)],
        check=True,
    )
    shadow = root / "tree"
    (shadow / "compat").mkdir(parents=True)
    (shadow / "compat" / "__init__.py").write_text("__version__ = 'tree'\n")
    return {"with": with_dist, "without": throwaway_wheels.outer_site_venv(root / "without"),
            "tree": shadow}  # fmt: skip


def guarded(python: Path, front: list[Path], out: Path) -> tuple[str, dict[str, Any]]:
    script = SCRIPT.format(probe_dir=str(PROBE_DIR), front=[str(p) for p in front], out=str(out))
    # run from the output's folder: from this project's, `-c` would put the tree's compat on
    # sys.path (and the guard refuses it, as it should)
    done = subprocess.run(
        [str(python), "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=out.parent,
    )
    return done.stdout, json.loads(out.read_text())


def test_the_installed_compat_imports_and_is_recorded(
    venvs: dict[str, Path], tmp_path: Path
) -> None:
    said, source = guarded(venvs["with"], [], tmp_path / "source.json")
    assert said.startswith("imported "), said
    assert source["from_distribution"] is True
    assert source["version"] == source["imported_version"] == "9.1"
    assert source["refused"] == []
    assert wheel_cells.source_problem(source, "9.1") is None
    assert "not the wheel's 9.2" in str(wheel_cells.source_problem(source, "9.2"))


def test_a_copy_ahead_on_sys_path_is_refused_not_imported(
    venvs: dict[str, Path], tmp_path: Path
) -> None:
    said, source = guarded(venvs["with"], [venvs["tree"]], tmp_path / "source.json")
    assert said.startswith("refused:") and str(venvs["tree"]) in said, said
    assert source["imported"] is None
    assert source["refused"] == [str(venvs["tree"] / "compat" / "__init__.py")]
    assert "tried to import compat from elsewhere" in str(wheel_cells.source_problem(source, "9.1"))


def test_without_the_distribution_every_copy_is_refused(
    venvs: dict[str, Path], tmp_path: Path
) -> None:
    said, source = guarded(venvs["without"], [venvs["tree"]], tmp_path / "source.json")
    assert said.startswith("refused:") and "not installed" in said, said
    assert source["home"] is None and source["version"] is None


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        (None, "wrote no compat-source.json"),
        ({"refused": [], "imported": None}, "never imported compat"),
        (
            {"refused": [], "imported": "/x/compat/__init__.py", "from_distribution": False},
            "came from /x/compat/__init__.py",
        ),
    ],
)
def test_each_way_of_not_testing_the_wheel_is_named(
    source: dict[str, Any] | None, needle: str
) -> None:
    assert needle in str(wheel_cells.source_problem(source, "0.1.0"))


def test_the_cells_are_the_oldest_and_newest_pairs_and_the_newest_downstream_cell() -> None:
    matrix = spec.load(paths.ROOT / "matrix.toml")
    cells = wheel_cells.chosen(matrix)
    pinned = [
        c
        for c in matrix.cells(tiers=spec.TIERS)
        if c.backend.name == "cpu" and spec.LATEST not in (c.torch.pin, c.torchao.pin)
    ]
    own = [c for c in pinned if c.group is None and not c.named_python]

    def key(c: spec.Cell) -> tuple[Any, ...]:
        return (spec.label_key(c.torch.label), spec.label_key(c.torchao.label))

    assert [c.id for c in cells[:2]] == [min(own, key=key).id, max(own, key=key).id]
    downstream = [c for c in pinned if c.group is not None]
    assert cells[2].group is not None and key(cells[2]) == max(map(key, downstream))
    with pytest.raises(wheel_cells.Refused, match="no pinned cell on backend"):
        wheel_cells.chosen(matrix, ["no-such-backend"])


def test_the_staged_folder_links_the_suite_and_holds_no_compat(tmp_path: Path) -> None:
    folder = wheel_cells.stage(paths.ROOT, tmp_path / "suite")
    assert sorted(p.name for p in folder.iterdir()) == ["harness", "pyproject.toml", "tests"]
    assert (folder / "tests").resolve() == paths.ROOT / "tests"
    assert not (folder / "compat").exists()
    wheel_cells.stage(paths.ROOT, folder)  # again: replaced, not refused
    assert (folder / "harness" / "cells" / "probe.py").is_file()


def test_the_wheel_is_found_once_or_refused(tmp_path: Path) -> None:
    with pytest.raises(wheel_cells.Refused, match="nox -s dist builds it"):
        wheel_cells.the_wheel(tmp_path)
    wheel = tmp_path / "compat_matrix-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    assert wheel_cells.the_wheel(tmp_path) == wheel
    assert wheel_cells.requirement(wheel) == f"compat-matrix[safetensors] @ {wheel.as_uri()}"
