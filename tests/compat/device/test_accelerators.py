"""compat.device's accelerator paths on pretend backends: every branch without an accelerator.

A CPU runner has no CUDA, XPU or MPS device, so the branches that only run when one is present
(the allocation probe, the device count, a backend module without ``device_count``) are driven
here by patching torch's own query functions with ``monkeypatch``. Each test says what it pins;
together they hold the exact wording of the errors users meet, which the docstrings promise
(the bad value, the reason, what is accepted), on every torch of the matrix.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from compat import (
    DeviceUnavailableError,
    _features,
    available_backends,
    default_device,
    ensure_available,
    normalize_device,
)
from compat import device as device_module
from tests.common.compat import messages


@pytest.fixture
def no_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build with no accelerator at all: ints have no device type."""
    monkeypatch.setattr(_features, "CUDA_BUILT", False)
    monkeypatch.setattr(_features, "XPU_BUILT", False)
    monkeypatch.setattr(_features, "MPS_BUILT", False)
    monkeypatch.setattr(_features, "privateuse1_backend_name", lambda: None)


@pytest.mark.usefixtures("no_accelerator")
@pytest.mark.parametrize("value", [0, "0"], ids=repr)
def test_int_without_accelerator_says_so_exactly(value: Any) -> None:
    with pytest.raises(ValueError) as info:
        normalize_device(value)
    assert str(info.value) == (
        f"integer device {value!r} ({type(value).__name__}) is an accelerator index, but this "
        "torch build has no accelerator (no CUDA, XPU, MPS or renamed PrivateUse1 backend); "
        "accepted here: a device string such as 'cpu', or an int with accelerator='<type>'"
    )


def test_unknown_accelerator_names_the_accelerator() -> None:
    with pytest.raises(ValueError) as info:
        normalize_device(0, accelerator="nosuch")
    assert str(info.value).startswith("unknown device type 'nosuch' in 'nosuch' (str); ")


def test_backend_module_without_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.<type> exists but cannot say whether it is available: the message says the module
    is missing that, not that asking failed."""
    monkeypatch.delattr(torch.xpu, "is_available")
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available("xpu:0")
    assert str(info.value) == (
        "device 'xpu:0' (from 'xpu:0' (str)) is not available: torch has no torch.xpu module "
        "(is the backend's extension installed?); 'cpu' and 'meta' are always available"
    )


def test_failed_availability_query_names_the_exception_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> bool:
        raise OSError("driver gone")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available("cuda:0")
    assert str(info.value) == (
        "device 'cuda:0' (from 'cuda:0' (str)) is not available: asking torch whether it is "
        "available failed (OSError); 'cpu' and 'meta' are always available"
    )


def test_mps_without_mps_build_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_features, "MPS_BUILT", False)
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available("mps")
    assert str(info.value) == (
        "device 'mps:0' (from 'mps' (str)) is not available: this torch build has no MPS "
        "support; 'cpu' and 'meta' are always available"
    )


@pytest.mark.usefixtures("fake_cuda")
def test_the_mps_count_rule_is_for_mps_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.3 has no torch.mps.device_count(); that must not cap CUDA at one device."""
    monkeypatch.setattr(_features, "MPS_HAS_DEVICE_COUNT", False)
    assert ensure_available("cuda:1") == torch.device("cuda", 1)


def test_backend_without_device_count_accepts_any_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """No way to count: the index is not checked (and no query error is invented)."""
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.delattr(torch.xpu, "device_count")
    assert ensure_available("xpu:5") == torch.device("xpu", 5)


def test_backend_without_current_device_asks_for_an_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.delattr(torch.xpu, "current_device")
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available("xpu")
    assert str(info.value) == (
        "cannot resolve the current index of 'xpu': torch.xpu has no current_device(); pass an "
        "explicit index such as 'xpu:0'"
    )


def test_unallocatable_default_names_the_exception_class(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> torch.Tensor:
        raise MemoryError("no room")

    monkeypatch.setattr(torch, "empty", refuse)
    with pytest.raises(DeviceUnavailableError) as info:
        default_device()
    assert "cannot allocate on this machine (MemoryError); set it to" in str(info.value)
    assert isinstance(info.value.__cause__, MemoryError)


# --- the allocation probe and available_backends ------------------------------------------------


def test_cpu_passes_the_probe() -> None:
    """The probe allocates two ones, adds one in place and checks the sum is 4."""
    assert device_module._usable("cpu") is True


def test_probe_fails_on_wrong_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    real_ones = torch.ones

    def off_by_one(*args: Any, **kwargs: Any) -> torch.Tensor:
        return real_ones(*args, **kwargs).add_(0.5)  # a backend whose kernels compute wrongly

    monkeypatch.setattr(torch, "ones", off_by_one)
    assert device_module._usable("cpu") is False


@pytest.mark.usefixtures("fake_cuda")
def test_probe_allocates_on_index_0_of_the_type(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[torch.device] = []
    real_ones = torch.ones

    def record(*args: Any, device: torch.device, **kwargs: Any) -> torch.Tensor:
        seen.append(device)
        return real_ones(*args, **kwargs)  # computed on the CPU: a backend that works

    monkeypatch.setattr(torch, "ones", record)
    assert device_module._usable("cuda") is True
    assert seen == [torch.device("cuda", 0)]  # index 0, not the current device (1)


def test_available_backends_starts_with_cpu_and_meta() -> None:
    found = available_backends()  # called here, not through a cached helper
    assert found[:2] == ("cpu", "meta")
    assert len(set(found)) == len(found)


@pytest.mark.parametrize(
    ("renamed", "expected"),
    [
        (None, ("cpu", "meta", "cuda", "xpu", "mps")),
        ("npu", ("cpu", "meta", "cuda", "xpu", "mps", "npu")),
        ("cuda", ("cpu", "meta", "cuda", "xpu", "mps")),  # listed once
    ],
)
def test_available_backends_order_and_renamed_backend(
    monkeypatch: pytest.MonkeyPatch, renamed: str | None, expected: tuple[str, ...]
) -> None:
    probed: list[object] = []

    def usable(type_: object) -> bool:
        probed.append(type_)
        return isinstance(type_, str)

    monkeypatch.setattr(_features, "privateuse1_backend_name", lambda: renamed)
    monkeypatch.setattr(device_module, "_usable", usable)
    assert available_backends() == expected
    assert probed == list(expected[2:])


def test_available_backends_leaves_out_what_fails_the_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_features, "privateuse1_backend_name", lambda: "npu")
    monkeypatch.setattr(device_module, "_usable", lambda t: t in ("xpu", "npu"))
    assert available_backends() == ("cpu", "meta", "xpu", "npu")


# --- ensure_available's and for_safetensors' messages, word for word -----------------------------


def test_ensure_available_of_none_says_what_is_accepted() -> None:
    with pytest.raises(TypeError) as info:
        ensure_available(None)
    assert str(info.value) == (
        "ensure_available needs a device, got None; accepted: a torch.device, an int or a device "
        "string such as 'cpu' or 'cuda:0' (see default_device() for the default)"
    )


@pytest.mark.usefixtures("fake_cuda")
def test_out_of_range_index_names_device_input_and_range() -> None:
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available(torch.device("cuda", 2))
    assert str(info.value) == (
        "device index 2 of 'cuda:2' (from device(type='cuda', index=2) (torch.device)) is out of "
        "range: this machine has 2 cuda device(s), so the accepted indices are 0..1"
    )


def test_failing_index_query_names_device_input_and_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> int:
        raise RuntimeError("runtime not initialised")

    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "current_device", broken)
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available(torch.device("xpu"))
    assert str(info.value) == (
        "device 'xpu' (from device(type='xpu') (torch.device)) is not usable: querying torch.xpu "
        "failed (RuntimeError)"
    )
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_current_index_torch_cannot_store_is_refused_naming_the_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backend that reports a current index above 127 (and no count) gets the index error."""
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "current_device", lambda: 200)
    monkeypatch.delattr(torch.xpu, "device_count")
    with pytest.raises(ValueError) as info:
        ensure_available("xpu")
    assert str(info.value).startswith(
        "bad device index in 'xpu' (str): it is above 127 (torch stores it as int8"
    )


def test_for_safetensors_gives_a_renamed_backend_its_int_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PrivateUse1 backend safetensors has no string form for gets the bare int, which torch
    maps to the renamed backend on every version ('mtia' stands in for it: torch knows the type)."""
    from compat import for_safetensors

    monkeypatch.setattr(_features, "privateuse1_backend_name", lambda: "mtia")
    got = for_safetensors("mtia:1", check=False)
    assert got == 1 and type(got) is int
    with pytest.raises(DeviceUnavailableError, match="'mtia:1'"):
        for_safetensors("mtia:1")  # checked by default: no mtia device here


@pytest.mark.usefixtures("fake_cuda")
def test_for_safetensors_refuses_an_index_beyond_the_device_count() -> None:
    """Two pretend CUDA devices: cuda:1 is handed on, cuda:2 is refused naming it, as
    ensure_available refuses it; without the check it is translated."""
    from compat import for_safetensors

    assert for_safetensors(1) == "cuda:1"
    with pytest.raises(DeviceUnavailableError) as info:
        for_safetensors(torch.device("cuda", 2))
    assert str(info.value) == (
        "device index 2 of 'cuda:2' (from device(type='cuda', index=2) (torch.device)) is out of "
        "range: this machine has 2 cuda device(s), so the accepted indices are 0..1"
    )
    assert for_safetensors("cuda:2", check=False) == "cuda:2"


def test_for_safetensors_refusal_lists_what_it_accepts() -> None:
    from compat import for_safetensors

    with pytest.raises(ValueError) as info:
        for_safetensors("meta")
    assert str(info.value) == (
        "safetensors cannot load onto 'meta' (from 'meta' (str)); it accepts 'cpu', 'mps', "
        "'<type>:N' for cuda, hpu, mlu, musa, npu, xla, xpu, or the index of a renamed "
        "PrivateUse1 backend; load on 'cpu' and move the tensors instead"
    )


# --- normalize_device's refusals, word for word -------------------------------------------------


def test_unknown_type_message() -> None:
    with pytest.raises(ValueError) as info:
        normalize_device("nosuch:1")
    assert str(info.value) == (
        "unknown device type 'nosuch' in 'nosuch:1' (str); expected a device type this torch "
        "knows, such as 'cpu', 'cuda', 'mps', 'xpu', 'meta', 'hpu', 'xla', or the name of a "
        "renamed PrivateUse1 backend (e.g. 'npu' once torch_npu is imported)"
    )


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (-1, "it is negative"),
        (128, "it is above 127 (torch stores it as int8 and would silently wrap it)"),
    ],
)
def test_bad_index_message(value: int, why: str) -> None:
    with pytest.raises(ValueError) as info:
        normalize_device(value, accelerator="cuda")
    assert (
        str(info.value) == f"bad device index in {value} (int): {why}; {messages.DEVICE_ACCEPTED}"
    )


def test_single_device_type_with_an_index_names_the_torch_device() -> None:
    with pytest.raises(ValueError) as info:
        normalize_device(torch.device("cpu", 1))
    assert str(info.value) == (
        "'cpu' has a single device, so index 1 in device(type='cpu', index=1) (torch.device) is "
        "invalid; accepted: 'cpu' or 'cpu:0'"
    )
