"""A throwaway peer suite for the peer-suite machinery (tests/common/peers), run for real.

An sdist (``toypeer-1.0.tar.gz``) whose ``pkg/tests/test_toy.py`` is a peer's own suite in
miniature, and a session plugin whose "patch" sets ``TOY_PATCHED=1`` for the whole session: so
the compat run differs from the plain one as a peer's does through compat. One test passes plain
and fails through the patch (a regression, unless ``TOY_BREAK=0``), one fails plain and passes
through it (fixed), one asserts a refusal the patch lifts (lifted), one is skipped with the
peer's own reason, one fails in both runs, one reads a data file by a relative path and one
checks that its folder is fresh. ``TOY_FAULT`` injects what must never pass for a verdict:
``unpatch`` (a test puts the original back), ``silent`` (the plugin installs without saying so),
``plain_import_error`` / ``compat_import_error`` (the module does not import in that run).
"""

from __future__ import annotations

import io
import tarfile
import textwrap
from pathlib import Path

from tests.common.peers.suites import Suite

NAME, VERSION = "toypeer", "1.0"
TEST_ID = "tests/test_toy.py::"

TESTS = """
import os
from pathlib import Path

import pytest

PATCHED = os.environ.get("TOY_PATCHED") == "1"  # the plugin patched before this import
BREAK = os.environ.get("TOY_BREAK", "1") == "1"
FAULT = os.environ.get("TOY_FAULT", "")
if FAULT == "plain_import_error" and not PATCHED:
    raise ImportError("toypeer's suite needs something this cell lacks")
if FAULT == "compat_import_error" and PATCHED:
    raise ImportError("the patch broke an import")


def refuse(value):
    if not PATCHED:
        raise ValueError(f"toypeer refuses {value!r}")


def test_data_file_by_a_relative_path():
    assert Path("tests/data/value.txt").read_text() == "42\\n"


def test_fresh_folder():
    assert not Path("written.txt").exists(), "the folder holds another run's file"
    Path("written.txt").write_text("x")


def test_breaks_through_the_patch():
    assert not (PATCHED and BREAK), "the patch broke this"


def test_fixed_by_the_patch():
    assert PATCHED, "broken without the patch"


def test_refusal():
    with pytest.raises(ValueError):
        refuse("shared")


def test_needs_a_gpu():
    pytest.skip("test requires a GPU")


def test_always_fails():
    assert False, "the peer's own failure"


def test_unpatches():
    if FAULT == "unpatch":
        os.environ.pop("TOY_PATCHED")
"""

PLUGIN = """
import os

from tests.common.peers.plugins.compat_peer_session import Session


class Patch:
    def install(self):
        os.environ["TOY_PATCHED"] = "1"
        return self

    def uninstall(self):
        os.environ.pop("TOY_PATCHED", None)


_SESSION = Session("toy.patch()", Patch, lambda: os.environ.get("TOY_PATCHED") == "1")


def pytest_configure(config):
    if os.environ.get("TOY_FAULT") == "silent":
        Patch().install()
    else:
        _SESSION.start()


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("TOY_FAULT") != "silent":
        _SESSION.finish()


def pytest_unconfigure(config):
    _SESSION.stop()
"""

LIFTED = {f"{TEST_ID}test_refusal": "asserts a refusal toy.patch() lifts"}


def sdist(folder: Path, files: dict[str, str] | None = None) -> Path:
    """``toypeer-1.0.tar.gz`` in ``folder``: the suite, its data file and a file no suite names."""
    folder.mkdir(parents=True, exist_ok=True)
    files = files or {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n",
        "pkg/tests/test_toy.py": textwrap.dedent(TESTS),
        "pkg/tests/data/value.txt": "42\n",
        "pkg/setup.py": "raise SystemExit('never run')\n",
    }
    path = folder / f"{NAME}-{VERSION}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{NAME}-{VERSION}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def suite(folder: Path, lifted: dict[str, str] | None = None) -> Suite:
    """The toy suite, its plugin written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    plugin = folder / "toy_compat.py"
    plugin.write_text(PLUGIN)
    return Suite(
        name="toy",
        distribution=NAME,
        root="pkg",
        tests=("tests/test_toy.py",),
        plugin=plugin,
        patch="toy.patch()",
        support=("tests/data/value.txt",),
        lifted=LIFTED if lifted is None else lifted,
    )
