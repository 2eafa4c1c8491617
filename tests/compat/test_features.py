"""compat._features: the feature probes every torch-version branch of compat reads.

The probes are data (flags, names); these tests pin the two that decide behaviour at run time on
every version: the renamed PrivateUse1 backend's name and the reasons swap_tensors would refuse,
word for word (compat.params reports them to users).
"""

from __future__ import annotations

import weakref

import pytest
import torch

from compat import _features


def test_privateuse1_name_is_none_until_renamed() -> None:
    # this process never renames the backend (tests/compat/device/test_device.py does it in a subprocess)
    assert torch._C._get_privateuse1_backend_name() == "privateuseone"
    assert _features.privateuse1_backend_name() is None


def test_privateuse1_name_after_a_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "npu")
    assert _features.privateuse1_backend_name() == "npu"


def test_swap_blocker_none_for_two_fresh_tensors() -> None:
    assert _features.swap_blocker(torch.zeros(2), torch.ones(2)) is None


def test_swap_blocker_without_swap_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_features, "HAS_SWAP_TENSORS", False)
    reason = _features.swap_blocker(torch.zeros(2), torch.ones(2))
    assert reason == "torch.utils.swap_tensors is missing (torch < 2.3)"


@pytest.mark.parametrize("which", ["t1", "t2"])
def test_swap_blocker_names_the_weakly_referenced_tensor(which: str) -> None:
    t1, t2 = torch.zeros(2), torch.ones(2)
    ref = weakref.ref(t1 if which == "t1" else t2)
    assert _features.swap_blocker(t1, t2) == f"{which} has a weak reference"
    del ref


class _Slotted(torch.Tensor):
    __slots__ = ("tag",)


def test_swap_blocker_different_slots() -> None:
    slotted = torch.zeros(2).as_subclass(_Slotted)
    assert _features.swap_blocker(slotted, torch.ones(2)) == (
        "the two classes have different __slots__"
    )


@pytest.mark.parametrize("which", ["t1", "t2"])
def test_swap_blocker_names_the_tensor_with_other_references(
    monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    """Where torch can count TensorImpl references (2.4+) a view blocks the swap; torch 2.3 cannot
    tell beforehand, so the probe answers None and the swap itself decides (compat.params
    restores both tensors when it refuses)."""
    t1, t2 = torch.zeros(4), torch.ones(4)
    view = (t1 if which == "t1" else t2)[:2]
    if _features.HAS_TENSOR_USE_COUNT:
        assert _features.swap_blocker(t1, t2) == (
            f"{which}'s TensorImpl has other references (a view, a live autograd graph)"
        )
    monkeypatch.setattr(_features, "HAS_TENSOR_USE_COUNT", False)
    assert _features.swap_blocker(t1, t2) is None
    del view
