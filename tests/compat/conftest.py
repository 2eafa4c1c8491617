"""compat's own suite (every core, extended and prerelease cell runs it): the cell plumbing
(``tests/common/cell_plugin.py``), and what only this suite uses:

- The ``backend`` fixture is parametrized over the backends this cell exercises;
  ``@pytest.mark.with_data`` keeps only backends whose tensors hold bytes (not meta),
  ``@pytest.mark.dataless`` only the others (the per-backend expectation, as a marker).
- ``drift`` records what torch, TorchAO and the peers do in this cell (``tests/common/compat/drift.py``).
- ``fresh_process``: a process that imported torch and did nothing else (``tests/common/compat/fresh.py``).
- ``fake_cuda`` and ``torchao_scheme_here``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.common.cell_plugin import CELL
from tests.common.compat import drift as drift_record
from tests.common.compat import fresh

pytest_plugins = ("tests.common.cell_plugin",)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two pretend CUDA devices, current index 1: exercises the logic without a GPU."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)


@pytest.fixture
def torchao_scheme_here() -> None:
    """Skip, saying why, where no TorchAO weight scheme runs on CPU (tests.common.strategies'
    ``torchao_linears`` draws from those that do)."""
    from tests.common import torchao_api
    from tests.common.strategies import torchao_schemes

    if not torchao_schemes():
        why = "; ".join(str(torchao_api.cpu_problem(s)) for s in torchao_api.WEIGHT_SCHEMES)
        pytest.skip(f"no TorchAO weight scheme runs on CPU here: {why}")


@pytest.fixture(scope="session")
def drift() -> drift_record.Drift:
    return drift_record.Drift()


FRESH = pytest.StashKey[fresh.Fresh]()


def pytest_sessionstart(session: pytest.Session) -> None:
    # before collection, which probes the backends (tests/common/compat/fresh.py)
    session.config.stash[FRESH] = fresh.start(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="session")
def fresh_process(pytestconfig: pytest.Config) -> fresh.Fresh:
    """A process that imported torch before any test ran and then did nothing: one script's
    worth, for global state a test must not change in the session (tests/common/compat/fresh.py)."""
    return pytestconfig.stash[FRESH]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if FRESH in session.config.stash:
        session.config.stash[FRESH].close()
    path = os.environ.get("COMPAT_MATRIX_DRIFT")
    if path:
        drift_record.write(Path(path))


def _backends() -> list[str]:
    import compat

    available = list(compat.available_backends())
    cell_backend = CELL.get("backend")
    if cell_backend is None:
        return available
    return [b for b in available if b in ("cpu", "meta", cell_backend)]


DATALESS = frozenset({"meta"})  # backends whose tensors have no bytes


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "with_data: only backends whose tensors hold bytes")
    config.addinivalue_line("markers", "dataless: only backends whose tensors hold no bytes")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        backends = _backends()
        if metafunc.definition.get_closest_marker("with_data"):
            backends = [b for b in backends if b not in DATALESS]
        elif metafunc.definition.get_closest_marker("dataless"):
            backends = [b for b in backends if b in DATALESS]
        metafunc.parametrize("backend", backends)
