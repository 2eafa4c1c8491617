"""The harness's own tests run without torch: no cell plumbing from tests/conftest.py applies."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fault_envdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One nox --envdir for every fault-injection run: each group's venv is built once."""
    return tmp_path_factory.mktemp("fault-envs")
