"""The view and empty entries of a hand-made record at their limits: the field each refusal names,
the largest view, sub-byte views that do not fit, offsets aligned only together with their base's
pad, and empty entries with a bad dtype, shape or bit.

These are the limits ``tests/compat/record/test_fields.py`` and ``tests/compat/record/test_record.py`` do not
reach.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

import compat
from tests.common.compat import messages

KEY = "__compat_sharing__"
U8 = torch.arange(16, dtype=torch.uint8)


def metadata(view: dict[str, Any], pad: int = 0) -> dict[str, str]:
    base = {"base": "b", "offset": 0, "dtype": "uint8", "shape": [4], "stride": [1]}
    record = {"version": 2, "bases": {"b": {"pad": pad}}, "views": {"v": {**base, **view}}}
    return {KEY: json.dumps(record)}


def refusal(view: dict[str, Any], pad: int = 0) -> str:
    with pytest.raises(ValueError) as info:
        compat.restore_aliases({"b": U8}, metadata(view, pad))
    return str(info.value)


def message(what: str) -> str:
    return messages.record_entry("v", what)


@pytest.mark.parametrize(
    ("view", "what"),
    [
        ({"stride": [-1]}, "stride [-1] (list) is not a list of at most 64 ints >= 0"),
        ({"shape": [True]}, "shape [True] (list) is not a list of at most 64 ints >= 0"),
        ({"offset": 17}, "offset 17 (int) is not an int in 0..16"),
        ({"offset": -1}, "offset -1 (int) is not an int in 0..16"),
        ({"offset": "0"}, "offset '0' (str) is not an int in 0..16"),
    ],
    ids=["stride", "shape", "offset-past-the-end", "offset-negative", "offset-a-str"],
)
def test_a_bad_view_field_is_named(view: dict[str, Any], what: str) -> None:
    assert refusal(view) == message(what)


def test_the_largest_view_is_accepted_and_one_more_element_is_not() -> None:
    most = 2**63 - 1
    out = compat.restore_aliases({"b": U8}, metadata({"shape": [most], "stride": [0]}))
    assert out["v"].shape == (most,) and out["v"].stride() == (0,)
    assert out["v"].data_ptr() == U8.data_ptr()
    assert refusal({"shape": [most + 1], "stride": [0]}) == message(
        f"shape [{most + 1}] holds {most + 1} elements; a view holds 1..2**63-1"
    )


@pytest.mark.parametrize(("numel", "nbytes"), [(33, 17), (40, 20), (47, 24)])
def test_a_sub_byte_view_past_its_base_is_refused_with_its_packed_extent(
    numel: int, nbytes: int
) -> None:
    """A quint4x2 view of n elements reads ceil(n / 2) bytes from its offset."""
    view = {"dtype": "quint4x2", "shape": [numel], "stride": [1]}
    view["quant"] = {"scheme": "per_tensor_affine", "scale": "0x1p-2", "zero_point": 3}
    assert refusal(view) == message(f"the view (bytes 0..{nbytes}) does not fit its 16-byte base")


def test_a_sub_byte_view_that_fills_its_base_is_accepted() -> None:
    view = {"dtype": "quint4x2", "shape": [32], "stride": [1]}
    view["quant"] = {"scheme": "per_tensor_affine", "scale": "0x1p-2", "zero_point": 3}
    out = compat.restore_aliases({"b": U8}, metadata(view))
    assert out["v"].dtype == torch.quint4x2 and out["v"].shape == (32,)
    assert out["v"].untyped_storage().data_ptr() == U8.data_ptr()  # over the base's own bytes


def test_an_offset_aligned_only_with_its_bases_pad_is_accepted() -> None:
    """Alignment is of the original byte position, pad + offset: pad 1 and offset 3 put a float32
    view at byte 4 of the original storage; offset 3 without a pad does not."""
    view = {"offset": 3, "dtype": "float32", "shape": [2]}
    out = compat.restore_aliases({"b": U8}, metadata(view, pad=1))
    want = torch.frombuffer(bytearray(U8[3:11].tolist()), dtype=torch.float32)
    assert out["v"].tolist() == want.tolist()
    assert refusal(view) == message("byte offset 3 is not a multiple of torch.float32's 4 bytes")


def empty_metadata(entry: dict[str, Any]) -> dict[str, str]:
    record = {"version": 2, "empty": {"e": {"dtype": "float32", "shape": [0], **entry}}}
    return {KEY: json.dumps(record)}


@pytest.mark.parametrize(
    ("entry", "what"),
    [
        ({"dtype": "float99"}, "dtype 'float99' (str) is not a torch dtype"),
        ({"shape": [-1]}, "shape [-1] (list) is not a list of at most 64 ints >= 0"),
        ({"conj": True}, "conj is set on a torch.float32 view; only complex views have a conj bit"),
    ],
    ids=["dtype", "shape", "conj-on-a-real-dtype"],
)
def test_a_bad_empty_entry_is_named(entry: dict[str, Any], what: str) -> None:
    with pytest.raises(ValueError) as info:
        compat.restore_aliases({"b": U8}, empty_metadata(entry))
    assert str(info.value) == messages.record_entry("e", what)
