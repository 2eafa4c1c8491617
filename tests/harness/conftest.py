"""The harness's own tests run without torch: no cell plumbing (tests/common/cell_plugin.py) applies,
but the same Hypothesis profiles do (tests/common/profiles.py: derandomized unless told otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.common import profiles

profiles.load()


@pytest.fixture(scope="session")
def _uv_cache_warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """What every fault cell installs is in uv's cache (the cells install offline), and this
    session's fault runs use a linked copy of it with torch's bytecode compiled
    (faultproject.compiled_cache): once per session, pytest-xdist's workers included."""
    from tests.common.harness.faultproject import compiled_cache

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = compiled_cache(shared)
    if cache is not None:
        os.environ["UV_CACHE_DIR"] = str(cache)  # every uv the fault runs start reads it


@pytest.fixture(scope="module")
def fault_envdir(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _uv_cache_warm: None
) -> Path:
    """The nox --envdir of one test file's fault-injection runs, so each group's venv is built
    once per file and two files run side by side (``nox -s tests`` gives each pytest-xdist
    worker whole files) never install into one venv at once: a folder named for the file under
    ``$COMPAT_MATRIX_FAULT_ENVS`` (``nox -s tests`` keeps them in .nox/faults, warm for the
    next run, like nox's own venvs), else a temporary folder of this session."""
    name = request.path.stem
    kept = os.environ.get("COMPAT_MATRIX_FAULT_ENVS")
    if kept:
        folder = Path(kept) / name
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return tmp_path_factory.mktemp(f"fault-envs-{name}")
