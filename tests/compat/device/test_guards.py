"""Guards: torch's (and safetensors') own device behaviour, the reasons compat.device exists.

These assert the long-standing behaviour plainly, without version checks. Where a torch release
differs, the cell's expected failure comes from matrix.toml (with the upstream PR), so a new
release that changes any of this shows up in the matrix report instead of passing silently.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

import compat

pytestmark = pytest.mark.guard

needs_cuda_build = pytest.mark.skipif(
    not torch.backends.cuda.is_built(), reason="CPU-only torch build: no CUDA device type for ints"
)


@needs_cuda_build
def test_int_device_is_cuda_on_a_cuda_build() -> None:
    # 2.3/2.4: toDevice() maps ints to CUDA. 2.5/2.6 (pytorch PR #129119): the *runtime*
    # accelerator, so it raises on a GPU-less machine. 2.7+ (PR #146098): build time, cuda again.
    assert torch.device(0) == torch.device("cuda", 0)


@pytest.mark.parametrize("text", ["0", "1", "00"])
def test_numeric_device_string_is_invalid(text: str) -> None:
    # Invalid on every version (the safetensors #625 / accelerate break); compat accepts it.
    with pytest.raises(RuntimeError):
        torch.device(text)
    with pytest.raises(RuntimeError):
        torch.zeros(1).to(text)


def test_index_above_127_wraps_silently() -> None:
    # c10::DeviceIndex is int8 on every version: 128 becomes -128, 255 becomes "no index".
    assert torch.device("cuda:128").index != 128
    assert torch.device("cuda", 128).index != 128
    assert torch.device("cuda:255").index is None


def test_tensor_to_true_casts_to_bool() -> None:
    # A bool binds Tensor.to(other)'s dtype overload, so it casts instead of failing.
    assert torch.zeros(2).to(True).dtype is torch.bool


def test_torch_device_rejects_bool() -> None:
    with pytest.raises(TypeError):
        torch.device(True)


def test_bare_type_differs_from_index_zero() -> None:
    # No index means "the current device"; equality and hashing keep them apart (PR #23468).
    assert torch.device("cuda") != torch.device("cuda", 0)
    assert hash(torch.device("cuda")) != hash(torch.device("cuda", 0))


def test_cpu_index_is_kept_but_not_used() -> None:
    # torch accepts 'cpu:1' yet tensors land on plain cpu: why compat rejects it.
    assert torch.device("cpu:1").index == 1
    assert torch.empty(1, device="cpu:1").device == torch.device("cpu")


@pytest.mark.parametrize(("type_", "index"), [("cuda", 0), ("xpu", 1), ("mps", 0), ("hpu", 3)])
def test_two_argument_form_needs_no_backend(type_: str, index: int) -> None:
    # compat builds every result this way; it must not consult the accelerator on any version.
    dev = torch.device(type_, index)
    assert (dev.type, dev.index) == (type_, index)


def test_get_default_device_ignores_device_context() -> None:
    # Fixed in torch 2.8 (PR #148621); compat.default_device() asks the factory instead.
    with torch.device("meta"):
        assert torch.get_default_device() == torch.device("cpu")
        assert torch.empty(()).device == torch.device("meta")


def test_torch_accelerator_agrees_with_accelerator_type() -> None:
    accelerator = getattr(torch, "accelerator", None)
    current = getattr(accelerator, "current_accelerator", None)
    if current is None or "check_available" not in inspect.signature(current).parameters:
        pytest.skip("torch.accelerator.current_accelerator(check_available=) arrived in 2.7")
    found = current(check_available=False)
    assert (None if found is None else found.type) == compat.accelerator_type()


@pytest.fixture
def st_path(tmp_path: Path) -> str:
    path = str(tmp_path / "g.safetensors")
    save_file({"x": torch.ones(2)}, path)
    return path


@pytest.mark.parametrize("device", [torch.device("cpu"), "cpu:0", "meta", "0", -1, 1.0], ids=repr)
def test_safetensors_rejects(st_path: str, device: object) -> None:
    # safetensors accepts only str or int, and only some strings: why for_safetensors exists.
    with pytest.raises((SafetensorError, TypeError)):
        load_file(st_path, device=device)  # type: ignore[arg-type]
