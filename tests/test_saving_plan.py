"""How ``compat.dedup_for_save`` plans what it writes, pinned on small hand-built cases.

The property tests check that every name round-trips, which many plans satisfy; these check
the plan itself. Identical plain aliases are one saved tensor and an alias entry (no base); regions of
bytes that touch share one synthetic base, and separate ones are numbered from 0; a synthetic base
over one storage is a view of it, not a copy; a base's pad is the one that aligns every member;
storages imported separately from one misaligned buffer are refused with the whole message; and
the plan is built on the input's device whatever torch's default device is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

import compat
from compat.saving import METADATA_KEY


def record(metadata: dict[str, str]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(metadata[METADATA_KEY])
    return parsed


def assert_round_trip(sd: dict[str, torch.Tensor]) -> None:
    to_save, metadata = compat.dedup_for_save(sd)
    out = compat.restore_aliases(to_save, metadata)
    assert sorted(out) == sorted(sd)
    for name, t in sd.items():
        assert out[name].dtype == t.dtype and torch.equal(out[name], t), name


def test_identical_plain_aliases_are_one_tensor_and_an_alias() -> None:
    z = torch.arange(4.0)
    to_save, metadata = compat.dedup_for_save({"a": z, "b": z})
    assert list(to_save) == ["a"] and to_save["a"] is z
    assert record(metadata) == {
        "aliases": {"b": "a"},
        "bases": {},
        "empty": {},
        "version": 2,
        "views": {},
    }


def test_touching_regions_of_bytes_share_one_synthetic_base() -> None:
    """Two pairs of overlapping slices, neither member covering its pair, the pairs touching at
    byte 40: one base of 80 bytes, a view of the input's own storage."""
    x = torch.arange(20, dtype=torch.int32) * 1000 + 7
    sd = {"a": x[0:6], "b": x[4:10], "c": x[10:16], "d": x[14:20]}
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["__alias_base__/0"]
    base = to_save["__alias_base__/0"]
    assert base.dtype == torch.uint8 and base.shape == (80,)
    assert base.data_ptr() == x.data_ptr()  # cut from the input, not copied
    assert record(metadata)["bases"] == {"__alias_base__/0": {"pad": 0, "synthetic": True}}
    assert_round_trip(sd)


def test_separate_regions_of_bytes_get_bases_numbered_from_zero() -> None:
    x = torch.arange(20, dtype=torch.int32) * 1000 + 7
    y = torch.arange(40, dtype=torch.int32)
    sd = {"a": x[0:6], "b": x[4:10], "p": y[0:6], "q": y[4:10]}
    to_save, metadata = compat.dedup_for_save(sd)
    assert sorted(to_save) == ["__alias_base__/0", "__alias_base__/1"]
    assert sorted(record(metadata)["bases"]) == ["__alias_base__/0", "__alias_base__/1"]
    assert_round_trip(sd)


def test_a_base_gets_the_pad_that_aligns_every_member() -> None:
    """A uint8 slice from byte 1 and an int32 view from byte 4: only pad 1 puts the int32 view on
    a multiple of 4 in the saved base (3 + 1), so the record says pad 1."""
    buf = torch.arange(20, dtype=torch.uint8)
    sd = {"b": buf[1:], "w": buf.view(torch.int32)[1:]}
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["b"]
    rec = record(metadata)
    assert rec["bases"] == {"b": {"pad": 1}}
    assert rec["views"]["w"]["offset"] == 3
    assert_round_trip(sd)


def test_storages_imported_apart_from_one_misaligned_buffer_are_refused() -> None:
    raw = bytearray(range(64))
    a = torch.frombuffer(raw, dtype=torch.int32, count=8)
    b = torch.frombuffer(raw, dtype=torch.int32, count=8, offset=2)  # 2 bytes on: no int32 grid
    with pytest.raises(ValueError) as info:
        compat.dedup_for_save({"a": a, "b": b})
    assert str(info.value) == (
        "keys ['a', 'b'] alias one buffer at byte offsets that no single storage can express "
        "(their addresses are not aligned to their element sizes relative to each other, which "
        "only storages imported separately from one misaligned buffer can do); accepted: "
        "tensors whose relative byte offsets are multiples of their element sizes"
    )


def test_the_plan_is_built_on_the_inputs_device_whatever_the_default_device() -> None:
    """Synthetic bases (cut from one storage, or pieced together from two) and empty tensors are
    made on the input's device, also inside ``with torch.device("meta")``."""
    x = torch.arange(20, dtype=torch.int32) * 1000 + 7
    raw = bytearray(range(64))
    first = torch.frombuffer(raw, dtype=torch.int32, count=10)  # bytes 0..40
    second = torch.frombuffer(raw, dtype=torch.int32, count=10, offset=24)  # bytes 24..64
    sd = {
        "a": x[0:6],
        "b": x[4:10],
        "first": first,
        "second": second,
        "none": torch.ones(3)[:0],
    }
    with torch.device("meta"):
        to_save, metadata = compat.dedup_for_save(sd)
    assert {t.device for t in to_save.values()} == {torch.device("cpu")}
    out = compat.restore_aliases(to_save, metadata)
    for name, t in sd.items():
        assert torch.equal(out[name], t), name
