"""Reading a state dict: a value that is not a mapping is refused naming its type, and storage
groups form right beside an imported (external) buffer: meta storages join none, and a storage
used twice keeps its group.

The refusal's whole text is checked, not only its type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import compat

READERS: list[Callable[[Any], Any]] = [
    compat.find_shared_tensors,
    compat.find_overlapping_tensors,
    compat.find_identical_tensors,
    compat.dedup_for_save,
]


@pytest.mark.parametrize("reader", READERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ([torch.ones(2)], "list"),
        ((("w", torch.ones(2)),), "tuple"),
        (torch.ones(2), "torch.Tensor"),
    ],
    ids=["list", "pairs", "tensor"],
)
def test_a_value_that_is_not_a_mapping_is_named_by_its_type(
    reader: Callable[[Any], Any], value: Any, kind: str
) -> None:
    with pytest.raises(TypeError) as info:
        reader(value)
    assert str(info.value) == (
        f"expected a mapping of str -> torch.Tensor (a state dict), got {kind}"
    )


def test_meta_storages_beside_an_imported_buffer_stay_apart() -> None:
    """An imported (external) buffer makes the address sweep run; meta storages have no address
    and join no group, whatever their sizes."""
    sd = {
        "ext": torch.frombuffer(bytearray(8), dtype=torch.uint8),
        "m1": torch.empty(4, device="meta"),
        "m2": torch.empty(8, device="meta"),
    }
    assert compat.find_shared_tensors(sd) == []
    assert compat.find_overlapping_tensors(sd) == []


def test_a_repeated_storage_beside_a_buffer_imported_twice_keeps_its_group() -> None:
    raw = bytearray(range(16))
    t = torch.arange(6.0)
    sd = {
        "a": torch.frombuffer(raw, dtype=torch.uint8),
        "b": torch.frombuffer(raw, dtype=torch.uint8, offset=4),  # a second storage, same bytes
        "x": t,
        "y": t[1:],
    }
    assert compat.find_shared_tensors(sd) == [frozenset({"a", "b"}), frozenset({"x", "y"})]
    assert compat.find_overlapping_tensors(sd) == [frozenset({"a", "b"}), frozenset({"x", "y"})]
