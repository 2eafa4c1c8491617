"""The cell is what it says it is: the pinned versions, a working NumPy bridge, a usable TorchAO.

These fail when an install step picks the wrong wheel (a torch that drifted, a NumPy 2 beside
torch 2.3) before any compat test can be trusted.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

import numpy as np
import pytest
import torch
from packaging.version import Version

from tests.common import torchao_api


def _label(dist: str) -> str:
    return ".".join(metadata.version(dist).split("+")[0].split(".")[:2])


def test_installed_versions_match_the_cell(matrix_cell: dict[str, Any]) -> None:
    for dist in ("torch", "torchao"):
        if matrix_cell[dist] == "latest":  # resolved at install time: any real release
            assert Version(metadata.version(dist)).release >= (0, 1), dist
        else:
            assert _label(dist) == matrix_cell[dist]
    if matrix_cell["torch"] != "latest":
        assert torch.__version__.split("+")[0].startswith(matrix_cell["torch"] + ".")


def test_numpy_bridge_round_trips() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data  # shares memory, no copy
    assert np.array_equal(t.T.contiguous().numpy(), a.T)


def test_torchao_int8_weight_only_quantizes_and_runs_on_cpu() -> None:
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(4, 64)
    expected = lin(x)
    torchao_api.quantize_(lin, torchao_api.int8_weight_only())
    assert type(lin.weight) not in (torch.Tensor, torch.nn.Parameter)  # a TorchAO subclass now
    got = lin(x)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=0.1, rtol=0.05)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backend_fixture_allocates(backend: str, dtype: torch.dtype) -> None:
    t = torch.ones(3, dtype=dtype, device=backend)
    assert t.device.type == backend
    assert t.shape == (3,) and t.dtype is dtype


# --- the suite's own plumbing: compat's memo caches start empty in every test (conftest.py) ---


def _compat_caches() -> dict[str, dict[object, object]]:
    from compat import _features, device

    return {
        f"{module.__name__}.{name}": value
        for module in (_features, device)
        for name, value in vars(module).items()
        if name.startswith("_") and name.endswith("_cache") and isinstance(value, dict)
    }


def test_a_test_may_leave_compats_caches_warm() -> None:
    import compat

    compat.normalize_device("cpu")
    compat.normalize_device(torch.device("cpu"))
    assert any(_compat_caches().values())


def test_the_next_test_starts_with_every_compat_cache_empty() -> None:
    caches = _compat_caches()
    assert len(caches) >= 4  # the device caches and _features' slot cache are all seen
    assert {name: len(cache) for name, cache in caches.items() if cache} == {}
