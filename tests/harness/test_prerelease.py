"""The prerelease tier: its cell in matrix.toml, its install step for real (a folder index of
throwaway wheels, a real venv, real pip and uv), and the "new release seen" finding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from harness.cells import group_run
from harness.cells.plan import install_commands
from harness.matrix import spec
from harness.matrix.interpreters import uv_bin
from harness.report import new_releases
from tests.common.harness.throwaway_wheels import wheel
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]


# --- the cell ------------------------------------------------------------------------------------


def test_the_repository_has_one_prerelease_cell_per_backend_on_the_latest_pair() -> None:
    m = spec.load()
    cells = m.cells(tiers=["prerelease"])
    assert [c.id for c in cells] == [f"torchlatest-aolatest-pre-{b}" for b in m.backends]
    for cell in cells:
        assert cell.tier == "prerelease" and cell.prerelease == m.prerelease
        assert cell.requirements()[:2] == ["torch", "torchao"]  # resolved when it installs
        assert group_run.group_name(cell) == f"tests-torchlatest-pre-{cell.backend.name}"
    assert {"torch", "torchao", "safetensors", "accelerate", "transformers"} <= set(m.prerelease)
    assert not any(c.prerelease for c in m.cells(tiers=["core", "extended", "downstream"]))


def test_its_install_adds_the_newest_releases_step_after_the_pins() -> None:
    m = spec.load()
    (cell,) = m.cells(tiers=["prerelease"], backend="cpu")
    python = Path("/venv/bin/python")
    pins, newest = install_commands(cell, python, uv="uv", requirements=["r.txt"])
    assert pins[:5] == ["uv", "pip", "install", "--python", str(python)]
    assert newest == [
        sys.executable,
        "-m",
        "harness.matrix.prerelease",
        "--python",
        str(python),
        "--uv",
        "uv",
        *m.prerelease,
    ]
    (latest,) = m.cells(
        tiers=["extended"], torch="latest", torchao="latest", backend="cpu", python=m.default_python
    )
    assert len(install_commands(latest, python, uv="uv", requirements=[])) == 1


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('prerelease = ["safe tensors"]', "run.prerelease[0]"),
        ('prerelease = "torch"', "run.prerelease"),
    ],
)
def test_a_bad_prerelease_list_is_refused_naming_it(tmp_path: Path, text: str, field: str) -> None:
    line = 'prerelease = ["torch", "torchao", "safetensors", "accelerate", "transformers"]'
    doc = (ROOT / "matrix.toml").read_text()
    assert line in doc
    doc = doc.replace(line, text, 1)
    path = tmp_path / "matrix.toml"
    path.write_text(doc)
    (tmp_path / "wheels.toml").write_text((ROOT / "wheels.toml").read_text())
    with pytest.raises(spec.MatrixSpecError) as info:
        spec.load(path)
    assert info.value.field == field, str(info.value)


def test_a_version_entry_cannot_be_of_the_prerelease_tier(tmp_path: Path) -> None:
    doc = (ROOT / "matrix.toml").read_text().replace('tier = "extended"', 'tier = "prerelease"', 1)
    path = tmp_path / "matrix.toml"
    path.write_text(doc)
    (tmp_path / "wheels.toml").write_text((ROOT / "wheels.toml").read_text())
    with pytest.raises(spec.MatrixSpecError, match="must be one of \\['core', 'extended'\\]"):
        spec.load(path)


# --- the install step, for real --------------------------------------------------------------


def test_the_install_step_takes_the_newest_release_pre_releases_included(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    for version in ("1.0", "1.1", "1.2rc1"):
        wheel(index, "predemo", version, f"VERSION = {version!r}\n")
    wheel(index, "finaldemo", "2.0", "")
    venv = tmp_path / "venv"
    subprocess.run([uv_bin(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(  # what the cell's pins brought: a final release
        [uv_bin(), "pip", "install", "-q", "--python", str(python), "--no-index",
         "--find-links", str(index), "predemo==1.1"],
        check=True,
    )  # fmt: skip
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(index),
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(index),
    }
    done = run_module(
        "harness.matrix.prerelease", "--python", python, "--uv", uv_bin(), "predemo", "finaldemo",
        env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "predemo==1.2rc1 finaldemo==2.0" in done.stdout
    got = subprocess.run(
        [str(python), "-c", "import predemo, importlib.metadata as m; "
         "print(predemo.VERSION, m.version('finaldemo'))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert got == ["1.2rc1", "2.0"]
    missing = run_module(
        "harness.matrix.prerelease", "--python", python, "--uv", uv_bin(), "nosuchdemo",
        env=env, timeout=300,
    )  # fmt: skip
    assert missing.returncode == 1 and "nosuchdemo" in missing.stderr


# --- new releases seen ------------------------------------------------------------------------


def cell(
    cid: str, tier: str, axes: tuple[str, str], installed: dict[str, str]
) -> dict[str, object]:
    return {"id": cid, "tier": tier, "torch": axes[0], "torchao": axes[1], "installed": installed}


def test_a_release_above_every_pin_is_named_once_and_nothing_else_is() -> None:
    m = spec.load()
    pins = new_releases.highest_pins(m)
    assert pins["torch"] == max(Version(v.pin) for v in m.torch if v.pin != "latest")
    assert str(pins["safetensors"]) == "0.8.0"  # requirements/test.txt
    assert str(pins["accelerate"]) == "1.16.0"  # the 2026.12 group
    latest = ("latest", "latest")
    pre = {"torch": "2.15.0+cu132", "safetensors": "0.9.0rc1", "accelerate": "1.16.0"}
    cells = [
        cell("pre", "prerelease", latest, {**pre, "transformers": "5.26.0.dev0"}),
        cell("latest", "extended", latest, {"torch": "2.16.0", "safetensors": "0.9.0rc1"}),
        cell("pinned", "extended", ("2.15", "0.18"), {"torch": "2.99.0", "safetensors": "9.9.9"}),
    ]
    found = new_releases.seen(m, cells)
    assert [(f["dist"], f["version"], f["cell"]) for f in found] == [
        ("safetensors", "0.9.0rc1", "pre"),
        ("torch", "2.16.0", "latest"),
        ("transformers", "5.26.0.dev0", "pre"),
    ]
    assert new_releases.line(found[0]) == (
        "new release seen: safetensors 0.9.0rc1, not in matrix.toml (highest pin: 0.8.0; "
        "installed by pre)"
    )
