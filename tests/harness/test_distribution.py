"""The distributions a user installs: the sdist and the wheel ``uv build`` makes of this tree hold
every compat module, ``py.typed`` (compat is typed) and the LICENSE, and their metadata says what
pyproject.toml and compat's one written version say."""

from __future__ import annotations

import ast
import email
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

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
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: the harness's sessions install with it")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [uv, "build", "--out-dir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


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
