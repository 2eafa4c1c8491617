"""The harness's own tests run without torch: no cell plumbing from tests/conftest.py applies,
but the same Hypothesis profiles do (tests/profiles.py: derandomized unless told otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import profiles

profiles.load()


@pytest.fixture(scope="session")
def fault_envdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One nox --envdir for every fault-injection run, so each group's venv is built once:
    ``$COMPAT_MATRIX_FAULT_ENVS`` (``nox -s tests`` keeps them in .nox/faults, warm for the
    next run, like nox's own venvs), else a temporary folder of this session."""
    from tests.harness.faultproject import warm_cache

    warm_cache(tmp_path_factory.mktemp("warm"))  # the cells install offline from uv's cache
    kept = os.environ.get("COMPAT_MATRIX_FAULT_ENVS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    return tmp_path_factory.mktemp("fault-envs")
