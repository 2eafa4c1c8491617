"""The distributions a user installs: the sdist and the wheel ``uv build`` makes of this tree hold
every compat module, ``py.typed`` (compat is typed) and the LICENSE, and their metadata says what
pyproject.toml and compat's one written version say."""

from __future__ import annotations

import ast
import email
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from harness.dist import build
from harness.matrix import project

ROOT = Path(__file__).resolve().parents[2]


def written_version() -> str:
    """``compat.__version__`` as compat/__init__.py writes it (read without importing torch)."""
    tree = ast.parse((ROOT / "compat" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError("compat/__init__.py writes no __version__")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The distributions harness/dist/build.py builds (uv build), as `nox -s dist` does."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: the harness's sessions install with it")
    dists = build.build(ROOT, tmp_path_factory.mktemp("dist"), uv)
    return {"wheel": dists.wheel, "sdist": dists.sdist}


def tree_modules() -> set[str]:
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "compat").rglob("*.py")
        if "__pycache__" not in p.parts
    }


def test_the_wheel_holds_every_module_the_marker_and_the_license(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = set(wheel.namelist())
        licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licenses) == 1, sorted(names)
        assert wheel.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
    assert tree_modules() <= names, sorted(tree_modules() - names)
    assert "compat/py.typed" in names
    assert not {n for n in names if n.startswith(("tests/", "harness/", "bench/"))}


def test_the_metadata_says_the_version_compat_writes(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as wheel:
        (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        message = email.message_from_bytes(wheel.read(meta))
    assert message["Name"] == "compat-matrix"
    assert message["Version"] == written_version()
    assert built["wheel"].name.startswith(f"compat_matrix-{written_version()}-")
    assert message["Requires-Python"] == ">=3.10"
    assert message["License-Expression"] == "BSD-3-Clause"
    assert "safetensors" in message.get_all("Provides-Extra", [])
    requires = message.get_all("Requires-Dist", [])
    assert any(r.startswith("torch>=2.3") for r in requires), requires
    assert any(r.startswith("safetensors>=") and "extra == 'safetensors'" in r for r in requires)


def test_the_sdist_holds_the_license_and_the_marker(built: dict[str, Path]) -> None:
    with tarfile.open(built["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"LICENSE", "compat/py.typed", "pyproject.toml"} <= names
    assert tree_modules() <= names


def test_the_harness_finds_nothing_wrong_with_them(built: dict[str, Path]) -> None:
    dists = build.Dists(sdist=built["sdist"], wheel=built["wheel"])
    assert build.check(dists, ROOT, twine=False) == {"wheel": [], "sdist": [], "metadata": []}
    assert project.written_version(ROOT) == written_version()


def rewritten(source: Path, target: Path, drop: str = "", edit: tuple[str, str] = ("", "")) -> Path:
    """A copy of the wheel ``source`` without the member ``drop`` and with ``edit[0]`` replaced
    by ``edit[1]`` in its METADATA: a real fault in a real archive."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename == drop:
                continue
            if item.filename.endswith(".dist-info/METADATA") and edit[0]:
                data = data.replace(edit[0].encode(), edit[1].encode())
            new.writestr(item, data)
    return target


def test_a_wheel_without_the_marker_or_a_module_is_refused(
    built: dict[str, Path], tmp_path: Path
) -> None:
    no_marker = rewritten(built["wheel"], tmp_path / "a.whl", drop="compat/py.typed")
    assert build.wheel_problems(no_marker, ROOT) == [
        "the wheel lacks compat/py.typed: type checkers would treat compat as untyped"
    ]
    no_module = rewritten(built["wheel"], tmp_path / "b.whl", drop="compat/_move.py")
    assert build.wheel_problems(no_module, ROOT) == ["the wheel lacks compat/_move.py"]


def test_metadata_that_disagrees_with_the_written_version_or_an_extra_is_refused(
    built: dict[str, Path], tmp_path: Path
) -> None:
    version = written_version()
    wrong = rewritten(
        built["wheel"], tmp_path / "a.whl", edit=(f"Version: {version}", "Version: 9")
    )
    assert build.metadata_problems(build.wheel_metadata(wrong), ROOT) == [
        f"the metadata's Version is '9', not '{version}'"
    ]
    no_extra = rewritten(
        built["wheel"],
        tmp_path / "b.whl",
        edit=("Provides-Extra: safetensors", "Provides-Extra: x"),
    )
    assert build.metadata_problems(build.wheel_metadata(no_extra), ROOT) == [
        "the metadata provides no extra 'safetensors' (it has ['x'])"
    ]


def test_an_sdist_without_the_license_is_refused(built: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / built["sdist"].name
    with tarfile.open(built["sdist"]) as old, tarfile.open(target, "w:gz") as new:
        for member in old.getmembers():
            if not member.name.endswith("/LICENSE"):
                new.addfile(member, old.extractfile(member) if member.isfile() else None)
    assert build.sdist_problems(target, ROOT) == ["the sdist lacks LICENSE"]
