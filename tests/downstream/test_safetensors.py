"""safetensors' load_file onto an int device on a machine without one, alone and through compat.

Seed: ``torch.device(0)`` meant ``cuda:0`` up to torch 2.4 and "the current accelerator" from 2.5
(pytorch PR #129119), and ``str(device)`` of an int (``'0'``) is an invalid device string
everywhere (safetensors #625). ``safetensors.torch.load_file(path, device=0)`` on a machine
without an accelerator fails with torch's error, which names no device ("Cannot access
accelerator device when none is available", or CUDA's driver message); ``compat.load_file``
raises ``DeviceUnavailableError`` naming ``cuda:0`` (the accelerator this build means) before the
file is opened. The downstream cells run on the cpu backend, with accelerators hidden.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import compat
from tests.common.downstream.scenarios import scenario

LINK = "https://github.com/safetensors/safetensors/issues/625"
TITLE = "load_file(path, device=0) on a machine without an accelerator"

pytestmark = pytest.mark.skipif(
    compat.accelerator_type() is not None and torch.cuda.is_available(),
    reason="the scenario needs a machine without an accelerator; this one has "
    f"{compat.accelerator_type()}",
)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file({"w": torch.arange(4.0)}, path)
    return path


def names_the_device(error: BaseException) -> bool:
    return "cuda:0" in str(error) or "'0'" in str(error)


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    reason=f"safetensors: load_file(device=0) without an accelerator fails with torch's error, "
    f"which names no device {LINK}",
)
@scenario("safetensors", TITLE, "alone", LINK)
def test_load_file_on_an_absent_int_device_alone(saved: Path) -> None:
    from safetensors.torch import load_file

    with pytest.raises(Exception) as caught:  # which exception varies by torch version
        load_file(saved, device=0)
    assert names_the_device(caught.value), str(caught.value)


@scenario("safetensors", TITLE, "compat", LINK)
def test_load_file_on_an_absent_int_device_through_compat(saved: Path) -> None:
    with pytest.raises(compat.DeviceUnavailableError, match="cuda:0"):
        compat.load_file(saved, device=0)
    assert torch.equal(compat.load_file(saved)["w"], torch.arange(4.0))


@scenario("safetensors", TITLE, "compat", LINK)
def test_safetensors_load_file_given_for_safetensors_through_compat(saved: Path) -> None:
    """safetensors' own load_file, handed ``compat.for_safetensors(0)``: refused before
    safetensors sees it, naming the device (torch 2.5/2.6 used to fail inside safetensors with
    "Need to provide pin_memory allocator to use pin memory.")."""
    from safetensors.torch import load_file

    with pytest.raises(compat.DeviceUnavailableError, match="'cuda:0'"):
        load_file(saved, device=compat.for_safetensors(0))
    assert compat.for_safetensors(0, check=False) == "cuda:0"
    assert torch.equal(
        load_file(saved, device=compat.for_safetensors("cpu"))["w"], torch.arange(4.0)
    )
