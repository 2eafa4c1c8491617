"""compat.saving: what ``dedup_for_save`` plans, and the paths of saving and loading that the
property tests (tests/compat/sharing/test_sharing.py) do not pin down.

Sections, in order:

* **The plan.** The property tests check that every name round-trips, which many plans satisfy;
  these check the plan itself. Identical plain aliases are one saved tensor and an alias entry
  (no base); regions of bytes that touch share one synthetic base, and separate ones are numbered
  from 0; a synthetic base over one storage is a view of it, not a copy; a base's pad is the one
  that aligns every member; storages imported separately from one misaligned buffer are refused
  with the whole message; and the plan is built on the input's device whatever torch's default
  device is.
* **Placeholders.** The writer stores an empty uint8 (0,) placeholder exactly under each view's
  name and each alias of a view's, none under an alias of a saved tensor (hypothesis, judged by
  the record and apart from it); ``load_state_dict(..., strict=False)`` of a plain
  ``safetensors.torch.load_file`` of a module whose parameters are views of one another raises
  a size mismatch naming each view's key, where the version-2 file (no placeholders) loaded
  silently without them.
* **Paths.** ``restore_aliases`` given a base at an aligned, a padded or a misaligned storage
  offset: the base is used in place when its offset is as recorded (modulo 16 bytes), else copied
  once, the base name then referring to the copy its views share; reserved names never come out,
  and the tensors stay on the loaded device whatever torch's default device is.
  ``save_file`` / ``load_file`` around a file read back with safetensors' own ``safe_open``:
  ``preferred`` picks the kept name, non-str metadata is refused with the whole message, and
  ``device=None`` loads onto the cpu. The name that carries a view entry among identical views
  (the first of ``preferred``, else the smallest), as written in the alias record. The finders on
  wrapper subclasses next to other groups, with empty inner tensors, and on packed sub-byte
  quantized tensors (their footprint is ``ceil(numel * bits / 8)`` bytes).
* **safetensors.torch's parameters and format.** A state dict with nothing to record (every name
  saved as itself, contiguous or not) gives the file and the bytes safetensors gives, with and
  without metadata (hypothesis); ``save`` / ``load`` bring every name back with its sharing, and
  ``load_file`` does through the ``pread`` backend; a backend ``safe_open`` refuses raises its
  error, one it has no parameter for is refused by name. Input both refuse raises an instance of
  the class safetensors' own function raises for it (the oracle) and of compat's own.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors import safe_open
from torch.testing._internal.two_tensor import TwoTensor

import compat
from compat import _save_plan
from compat._storage import collect
from compat.saving import METADATA_KEY
from tests.common import oracle
from tests.common.compat import roundtrip
from tests.common.strategies import NAME_ALPHABET, base_tensor, cases

# === The plan =====================================================================================


def record(metadata: dict[str, str]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(metadata[METADATA_KEY])
    return parsed


def assert_round_trip(sd: dict[str, torch.Tensor]) -> None:
    """Through safetensors bytes and back: every name's bytes, reading and values, and the
    sharing among names, judged by the oracle (tests/common/compat/roundtrip.py)."""
    origins = oracle.address_origins(sd)
    roundtrip.assert_round_trip(sd, roundtrip.save_and_restore(sd)[2], origins)


def test_identical_plain_aliases_are_one_tensor_and_an_alias() -> None:
    z = torch.arange(4.0)
    to_save, metadata = compat.dedup_for_save({"a": z, "b": z})
    assert list(to_save) == ["a"] and to_save["a"] is z
    assert record(metadata) == {
        "aliases": {"b": "a"},
        "bases": {},
        "empty": {},
        "version": 3,
        "views": {},
    }


def test_touching_regions_of_bytes_share_one_synthetic_base() -> None:
    """Two pairs of overlapping slices, neither member covering its pair, the pairs touching at
    byte 40: one base of 80 bytes, a view of the input's own storage."""
    x = torch.arange(20, dtype=torch.int32) * 1000 + 7
    sd = {"a": x[0:6], "b": x[4:10], "c": x[10:16], "d": x[14:20]}
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["__alias_base__/0", "a", "b", "c", "d"]
    assert roundtrip.placeholders(to_save) == ["a", "b", "c", "d"]
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
    assert sorted(to_save) == ["__alias_base__/0", "__alias_base__/1", "a", "b", "p", "q"]
    assert roundtrip.placeholders(to_save) == ["a", "b", "p", "q"]
    assert sorted(record(metadata)["bases"]) == ["__alias_base__/0", "__alias_base__/1"]
    assert_round_trip(sd)


def test_a_base_gets_the_pad_that_aligns_every_member() -> None:
    """A uint8 slice from byte 1 and an int32 view from byte 4: only pad 1 puts the int32 view on
    a multiple of 4 in the saved base (3 + 1), so the record says pad 1."""
    buf = torch.arange(20, dtype=torch.uint8)
    sd = {"b": buf[1:], "w": buf.view(torch.int32)[1:]}
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["b", "w"]
    assert roundtrip.placeholders(to_save) == ["w"]
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


def test_the_plan_says_where_every_leaf_goes_before_anything_is_written() -> None:
    """The frozen plan of a state dict with each kind of leaf: a fresh empty, a recorded empty
    (a conjugate bit), one tensor with an alias, and a base (``qkv``) with its views, one of
    which an identical slice aliases."""
    qkv = torch.arange(12.0)
    w = torch.ones(3)
    sd = {
        "qkv": qkv,
        "q": qkv[0:4],
        "k": qkv[4:8],
        "k2": qkv[4:8],
        "w": w,
        "w_tied": w,
        "none": torch.ones(2)[:0],
        "none_conj": torch.ones(2, dtype=torch.complex64)[:0].conj(),
    }
    leaves = collect(sd, allow_subclasses=False)
    leaf = {name: i for i, name in enumerate(leaves.names)}
    plan = _save_plan.plan(leaves, list(leaves.tensors), {})
    assert plan.fresh_empty == (leaf["none"],)
    assert plan.recorded_empty == (leaf["none_conj"],)
    assert plan.bits[leaf["none_conj"]].conj
    assert plan.singles == ((leaf["w"], (leaf["w_tied"],)),)
    (base,) = plan.bases
    assert (base.name, base.member, base.lo, base.hi - base.lo, base.pad, base.aliases) == (
        "qkv",
        leaf["qkv"],
        qkv.data_ptr(),
        48,
        0,
        (),
    )
    views = {leaves.names[v.geom.leaf]: (v.offset, v.aliases) for v in base.views}
    assert views == {"k": (16, (leaf["k2"],)), "q": (0, ())}
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.pad = 1  # type: ignore[misc]


def test_a_meta_tensor_is_refused_naming_its_key_and_the_way_out() -> None:
    with pytest.raises(ValueError) as info:
        compat.dedup_for_save({"w": torch.ones(2), "m": torch.empty(3, device="meta")})
    assert str(info.value) == (
        "key 'm' is a meta tensor with no data (meta or fake); there are no bytes to save. "
        "Accepted: tensors with data (materialize it first, e.g. with to_empty() and load real "
        "values)"
    )


# === Placeholders =================================================================================


@pytest.mark.examples(100)
@roundtrip.hyp
@given(data=st.data())
def test_a_placeholder_is_stored_exactly_under_each_view_and_each_alias_of_a_view(
    data: st.DataObject,
) -> None:
    """By the record: the placeholders are its views and the aliases of its views, listed sorted,
    each an empty uint8 (0,) in ``to_save``; an alias of a saved tensor and an empty entry are
    left out of ``to_save``. Apart from the record: a name holds a placeholder exactly when it
    has elements, is not saved as itself and is not identical (the oracle's groups) to a name
    that is."""
    case = data.draw(cases("cpu"), label="case")
    sd = case.tensors
    to_save, metadata = compat.dedup_for_save(sd)
    rec = record(metadata) if metadata else {"views": {}, "aliases": {}, "empty": {}}
    views = set(rec["views"])
    of_views = {name for name, target in rec["aliases"].items() if target in views}
    of_saved = set(rec["aliases"]) - of_views
    assert rec.get("placeholders", []) == sorted(views | of_views)
    itself = {
        name
        for name, t in sd.items()
        if name in to_save and (to_save[name].dtype, to_save[name].shape) == (t.dtype, t.shape)
    }
    tied_to_saved = {
        name
        for group in oracle.identical_groups(sd, case.origins)
        if group & itself
        for name in group
    }
    want = {name for name, t in sd.items() if t.numel() and name not in tied_to_saved | itself}
    assert views | of_views == want
    for name in sd:
        if name in want:
            assert roundtrip.is_placeholder(to_save[name]), name
        elif name not in itself:
            assert name in of_saved | set(rec["empty"]) and name not in to_save, name


def test_the_placeholders_of_a_base_named_by_the_empty_string() -> None:
    """A base saved under ``""`` (a falsy name): the view and the alias of the view beside it get
    their placeholders on the base's device (a lookup by truth raised KeyError here)."""
    x = torch.arange(8.0)
    sd = {"": x, "a": x[2:4], "b": x[2:4]}
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["", "a", "b"] and roundtrip.placeholders(to_save) == ["a", "b"]
    assert record(metadata)["views"]["a"]["base"] == "" and record(metadata)["aliases"] == {
        "b": "a"
    }
    assert_round_trip(sd)


class Fused(torch.nn.Module):
    """A fused ``qkv`` parameter with ``q``, ``k`` and a transposed ``kT`` that are views of it,
    and a ``bias`` of its own."""

    def __init__(self, start: float) -> None:
        super().__init__()
        self.qkv = torch.nn.Parameter(torch.arange(12.0) + start)
        self.q = torch.nn.Parameter(self.qkv.data[0:4])
        self.k = torch.nn.Parameter(self.qkv.data[4:8])
        self.kT = torch.nn.Parameter(self.qkv.data[4:12].view(2, 4).t())
        self.bias = torch.nn.Parameter(torch.arange(2.0) + start)


def test_load_state_dict_refuses_a_views_placeholder_naming_it_instead_of_skipping_it(
    tmp_path: Path,
) -> None:
    """A plain ``safetensors.torch.load_file`` of compat's file into ``load_state_dict``, even with
    ``strict=False``: each view's name meets its placeholder, a size mismatch torch raises for,
    naming the key. The version-2 file (the same without placeholders) loaded silently, reporting
    the views' names only as missing keys. compat's own load_file brings every name back."""
    path = tmp_path / "fused.safetensors"
    compat.save_file(Fused(100.0).state_dict(), path)
    plain = safetensors.torch.load_file(path)
    views = ["k", "kT", "q"]
    assert roundtrip.placeholders(plain) == views
    fresh = Fused(0.0)
    with pytest.raises(RuntimeError) as info:
        fresh.load_state_dict(plain, strict=False)
    mismatched = re.findall(
        r"size mismatch for (\w+): copying a param with shape torch\.Size\(\[0\]\)", str(info.value)
    )
    assert sorted(mismatched) == views
    before = {name: t for name, t in plain.items() if name not in views}  # the version-2 file
    assert sorted(Fused(0.0).load_state_dict(before, strict=False).missing_keys) == views
    fresh.load_state_dict(compat.load_file(path))
    for name, t in Fused(100.0).state_dict().items():
        assert torch.equal(fresh.state_dict()[name], t), name


# === Paths of saving and loading ==================================================================

# --- helpers -------------------------------------------------------------------------------------


def raw(t: torch.Tensor) -> bytes:
    """The bytes a tensor reads, in its logical order."""
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).tolist())


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def file_contents(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """What a plain safetensors reader sees in a file."""
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
        return tensors, dict(handle.metadata())


def placed_at(t: torch.Tensor, offset: int, fill: int = 0xA5) -> torch.Tensor:
    """A copy of contiguous ``t`` starting ``offset`` bytes into a larger buffer of ``fill``."""
    n = t.numel() * t.element_size()
    buf = torch.full((offset + n + 8,), fill, dtype=torch.uint8)
    buf[offset : offset + n] = t.reshape(-1).view(torch.uint8)
    out = torch.empty(0, dtype=t.dtype).set_(
        buf.untyped_storage(), offset // t.element_size(), tuple(t.shape), tuple(t.stride())
    )
    assert raw(out) == raw(t)
    return out


def words_of_bytes() -> dict[str, torch.Tensor]:
    """A uint8 buffer and an int32 view of all of it: the buffer is the base, pad 0."""
    b = (torch.arange(32, dtype=torch.uint8) * 37 + 11).to(torch.uint8)
    return {"bytes": b, "words": b.view(torch.int32)}


def padded() -> dict[str, torch.Tensor]:
    """A uint8 slice starting at byte 1 and an int16 view from byte 2: the base needs pad 1."""
    buf = torch.arange(10, dtype=torch.uint8) * 3
    return {"b": buf[1:], "w": buf.view(torch.int16)[1:]}


def straddling() -> dict[str, torch.Tensor]:
    """Two overlapping int32 slices, neither covering the other: a synthetic base of bytes."""
    x = torch.arange(10, dtype=torch.int32) * 1000 + 7
    return {"a": x[0:6], "b": x[4:10]}


def assert_restored(out: dict[str, torch.Tensor], sd: dict[str, torch.Tensor]) -> None:
    assert sorted(out) == sorted(sd)
    for name, t in sd.items():
        assert out[name].dtype == t.dtype, name
        assert tuple(out[name].shape) == tuple(t.shape), name
        assert raw(out[name]) == raw(t), name


# --- restore_aliases: where the base's views are cut from ----------------------------------------


def test_a_base_at_its_recorded_offset_is_used_in_place() -> None:
    sd = words_of_bytes()
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["bytes", "words"]
    assert roundtrip.placeholders(to_save) == ["words"]
    assert record(metadata)["bases"] == {"bytes": {"pad": 0}}
    for offset in (0, 16, 32):  # 16-byte aligned as recorded: nothing is copied
        base = to_save["bytes"].clone() if offset == 0 else placed_at(to_save["bytes"], offset)
        out = compat.restore_aliases({**to_save, "bytes": base}, metadata)
        assert_restored(out, sd)
        assert out["bytes"] is base, offset
        assert same_storage(out["words"], base), offset
        assert out["words"].data_ptr() == base.data_ptr(), offset


def test_a_misaligned_original_base_is_copied_once_and_its_views_share_the_copy() -> None:
    sd = words_of_bytes()
    to_save, metadata = compat.dedup_for_save(sd)
    for offset in (1, 3, 4, 8, 17):
        base = placed_at(to_save["bytes"], offset)
        out = compat.restore_aliases({**to_save, "bytes": base}, metadata)
        assert_restored(out, sd)
        assert out["bytes"] is not base, offset
        assert not same_storage(out["bytes"], base), offset
        assert out["bytes"].storage_offset() == 0
        assert out["bytes"].is_contiguous()
        assert same_storage(out["words"], out["bytes"]), offset
        assert out["words"].data_ptr() == out["bytes"].data_ptr(), offset
        out["bytes"][0] = 0  # the restored base and its view still alias one another
        assert raw(out["words"])[0] == 0


def test_a_misaligned_wider_base_keeps_its_dtype_shape_and_views() -> None:
    w = torch.arange(24, dtype=torch.int32).reshape(4, 6) * 101 - 5
    sd = {"w": w, "row": w[2], "half": w.view(torch.int16)[1]}
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["half", "row", "w"]
    assert roundtrip.placeholders(to_save) == ["half", "row"]
    base = placed_at(to_save["w"], 4)  # int32-aligned, not 16-byte aligned
    assert base.storage_offset() == 1
    out = compat.restore_aliases({**to_save, "w": base}, metadata)
    assert_restored(out, sd)
    assert out["w"] is not base
    assert out["w"].stride() == (6, 1)
    assert out["w"].storage_offset() == 0
    for name in ("row", "half"):
        assert same_storage(out[name], out["w"]), name
    assert out["row"].data_ptr() == out["w"].data_ptr() + 2 * 6 * 4
    assert out["half"].data_ptr() == out["w"].data_ptr() + 6 * 4


def test_a_padded_base_is_used_in_place_only_at_its_pad() -> None:
    sd = padded()
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["b", "w"]
    assert roundtrip.placeholders(to_save) == ["w"]
    assert record(metadata)["bases"] == {"b": {"pad": 1}}
    assert record(metadata)["views"]["w"]["offset"] == 1
    at_pad = placed_at(to_save["b"], 1)
    out = compat.restore_aliases({**to_save, "b": at_pad}, metadata)
    assert_restored(out, sd)
    assert out["b"] is at_pad
    assert out["w"].data_ptr() == at_pad.data_ptr() + 1
    for offset in (0, 2, 16):  # below the pad, or not pad modulo 16: copied
        base = placed_at(to_save["b"], offset)
        out = compat.restore_aliases({**to_save, "b": base}, metadata)
        assert_restored(out, sd)
        assert out["b"] is not base, offset
        assert out["b"].storage_offset() == 1, offset
        assert out["w"].data_ptr() == out["b"].data_ptr() + 1, offset


def test_a_misaligned_synthetic_base_is_copied_and_never_returned() -> None:
    sd = straddling()
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["__alias_base__/0", "a", "b"]
    assert roundtrip.placeholders(to_save) == ["a", "b"]
    for offset in (0, 3, 16, 21):
        base = placed_at(to_save["__alias_base__/0"], offset)
        out = compat.restore_aliases({**to_save, "__alias_base__/0": base}, metadata)
        assert_restored(out, sd)  # no reserved name comes back
        assert same_storage(out["a"], out["b"]), offset
        assert out["a"][4:].data_ptr() == out["b"].data_ptr(), offset
        assert same_storage(out["a"], base) == (offset % 16 == 0), offset


def test_a_non_contiguous_synthetic_base_is_read_in_its_logical_order() -> None:
    sd = straddling()
    to_save, metadata = compat.dedup_for_save(sd)
    flat = to_save["__alias_base__/0"]
    spread = torch.full((2 * flat.numel(),), 0x5A, dtype=torch.uint8)
    spread[::2] = flat
    out = compat.restore_aliases({**to_save, "__alias_base__/0": spread[::2]}, metadata)
    assert_restored(out, sd)
    assert out["a"][4:].data_ptr() == out["b"].data_ptr()


def test_restored_tensors_stay_on_the_loaded_device_whatever_the_default_device() -> None:
    for sd in (words_of_bytes(), straddling()):
        to_save, metadata = compat.dedup_for_save(sd)
        loaded = {name: placed_at(t, 3) for name, t in to_save.items()}
        with torch.device("meta"):
            out = compat.restore_aliases(loaded, metadata)
        assert {t.device.type for t in out.values()} == {"cpu"}
        assert_restored(out, sd)


def quantized_and_empty() -> dict[str, torch.Tensor]:
    """Per-tensor and per-channel quantized tensors with views and empty views, an empty plain
    view and a lazy conjugate: the kinds restore_aliases rebuilds with torch's constructors."""
    q = torch.quantize_per_tensor(torch.linspace(-1, 1, 12).reshape(4, 3), 0.1, 2, torch.qint8)
    scales = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.double)
    qc = torch.quantize_per_channel(
        torch.linspace(-2, 2, 12).reshape(4, 3), scales, torch.tensor([0, 1, 2, 3]), 0, torch.quint8
    )
    base = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    z = torch.tensor([1 + 2j, 3 - 4j, -5 + 6j], dtype=torch.complex64)
    return {
        "base": base,
        "row": base[1],
        "empty": base[:0],
        "q": q,
        "q_rows": q[1:3],
        "q_empty": q[:0],
        "qc": qc,
        "qc_tail": qc[1:],
        "qc_empty": qc[:, :0],
        "conj": z.conj(),
    }


def test_quantized_and_empty_tensors_stay_on_the_loaded_device_whatever_the_default_device() -> (
    None
):
    sd = quantized_and_empty()
    to_save, metadata = compat.dedup_for_save(sd)
    with torch.device("meta"):
        out = compat.restore_aliases(to_save, metadata)
    assert sorted(out) == sorted(sd)
    for name, t in sd.items():
        got = out[name]
        assert got.device == torch.device("cpu"), name
        assert (got.dtype, got.shape, got.is_conj()) == (t.dtype, t.shape, t.is_conj()), name
        if t.is_quantized:
            assert got.qscheme() == t.qscheme(), name
            assert torch.equal(got.int_repr(), t.int_repr()), name
            if t.qscheme() is torch.per_channel_affine:
                assert torch.equal(got.q_per_channel_scales(), t.q_per_channel_scales()), name
                assert got.q_per_channel_scales().device == torch.device("cpu"), name
            else:
                assert (got.q_scale(), got.q_zero_point()) == (t.q_scale(), t.q_zero_point())
        else:
            assert torch.equal(got.resolve_conj(), t.resolve_conj()), name


# --- save_file / load_file -----------------------------------------------------------------------


def test_a_file_with_a_padded_base_loads_back_sharing(tmp_path: Path) -> None:
    sd = padded()
    path = tmp_path / "padded.safetensors"
    compat.save_file(sd, path)
    tensors, metadata = file_contents(path)
    assert list(tensors) == ["b", "w"]
    assert roundtrip.placeholders(tensors) == ["w"]
    assert raw(tensors["b"]) == raw(sd["b"])
    assert metadata["w"] == "b"
    out = compat.load_file(path)
    assert_restored(out, sd)
    assert out["b"].storage_offset() == 1  # copied once behind its pad, the view cut from it
    assert out["w"].data_ptr() == out["b"].data_ptr() + 1
    out["b"][1] = 0xFF
    assert out["w"][0].item() == int.from_bytes(
        bytes(out["b"][1:3].tolist()), "little", signed=True
    )


def test_load_file_with_device_none_loads_onto_the_cpu(tmp_path: Path) -> None:
    sd = words_of_bytes()
    path = tmp_path / "words.safetensors"
    compat.save_file(sd, path)
    out = compat.load_file(path, device=None)
    assert {t.device for t in out.values()} == {torch.device("cpu")}
    assert_restored(out, sd)
    assert out["words"].data_ptr() == out["bytes"].data_ptr()


def test_save_file_keeps_the_preferred_name(tmp_path: Path) -> None:
    w = torch.arange(6.0).reshape(2, 3)
    sd = {"decoder.weight": w, "embed.weight": w}
    for preferred, kept, left in (
        ((), "decoder.weight", "embed.weight"),
        (("embed.weight",), "embed.weight", "decoder.weight"),
        (["missing", "embed.weight", "decoder.weight"], "embed.weight", "decoder.weight"),
    ):
        path = tmp_path / f"{kept}-{len(preferred)}.safetensors"
        compat.save_file(sd, path, preferred=preferred)
        tensors, metadata = file_contents(path)
        assert list(tensors) == [kept], preferred
        assert torch.equal(tensors[kept], w)
        assert metadata[left] == kept
        assert record(metadata)["aliases"] == {left: kept}
        out = compat.load_file(path)
        assert out[left] is out[kept]
        assert torch.equal(out[left], w)


def test_save_file_writes_user_metadata_beside_the_record(tmp_path: Path) -> None:
    sd = words_of_bytes()
    path = tmp_path / "meta.safetensors"
    compat.save_file(sd, path, metadata={"format": "pt", "note": "words"})
    _, metadata = file_contents(path)
    assert metadata["format"] == "pt"
    assert metadata["note"] == "words"
    assert metadata["words"] == "bytes"
    assert METADATA_KEY in metadata


@pytest.mark.parametrize(
    ("metadata", "shown"),
    [
        ({1: "one"}, "1 (int): 'one' (str)"),
        ({"step": 3}, "'step' (str): 3 (int)"),
        ({b"k": b"v"}, "b'k' (bytes): b'v' (bytes)"),
        ({"ok": "fine", "none": None}, "'none' (str): None (NoneType)"),
    ],
)
def test_save_file_refuses_metadata_that_is_not_str_to_str(
    tmp_path: Path, metadata: dict[Any, Any], shown: str
) -> None:
    path = tmp_path / "bad.safetensors"
    with pytest.raises(ValueError) as info:
        compat.save_file(words_of_bytes(), path, metadata=metadata)
    assert str(info.value) == (
        f"metadata entry {shown} is not str -> str; accepted: str keys and str values only"
    )
    assert not path.exists()


# --- which name carries a view entry -------------------------------------------------------------


def test_identical_views_share_one_entry_named_after_the_preferred_or_smallest() -> None:
    x = torch.arange(16, dtype=torch.int32) * 3
    sd = {"qkv": x, "k2": x[4:8], "k1": x[4:8], "v": x[8:12]}
    for preferred, kept, left in (((), "k1", "k2"), (("k2",), "k2", "k1")):
        to_save, metadata = compat.dedup_for_save(sd, preferred=preferred)
        assert list(to_save) == ["k1", "k2", "qkv", "v"]  # the alias of a view: a placeholder too
        assert roundtrip.placeholders(to_save) == ["k1", "k2", "v"]
        rec = record(metadata)
        assert sorted(rec["views"]) == sorted([kept, "v"]), preferred
        assert rec["views"][kept] == {
            "base": "qkv",
            "dtype": "int32",
            "offset": 16,
            "shape": [4],
            "stride": [1],
        }
        assert rec["aliases"] == {left: kept}, preferred
        assert metadata[left] == metadata[kept] == "qkv"
        out = compat.restore_aliases(to_save, metadata)
        assert out[left] is out[kept]
        assert torch.equal(out[kept], x[4:8])


# --- the finders ---------------------------------------------------------------------------------


class _WithExtra(TwoTensor):
    """A TwoTensor whose ``__tensor_flatten__`` also names a third inner tensor of any shape."""

    extra: torch.Tensor

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["a", "b", "extra"], None


def _with_extra(a: torch.Tensor, b: torch.Tensor, extra: torch.Tensor) -> _WithExtra:
    t = _WithExtra(a, b)
    t.extra = extra
    return t


def test_wrapper_subclasses_next_to_other_groups_keep_the_groups_apart() -> None:
    x, y, z = (torch.arange(12.0) + i for i in range(3))
    sd = {"t": TwoTensor(x[:4], y[:4]), "x_tail": x[2:], "p": z, "q": z[1:], "far": y[8:]}
    assert compat.find_shared_tensors(sd) == [
        frozenset({"far", "t", "x_tail"}),
        frozenset({"p", "q"}),
    ]
    assert compat.find_overlapping_tensors(sd) == [
        frozenset({"p", "q"}),
        frozenset({"t", "x_tail"}),
    ]
    sd["u"] = sd["t"]
    sd["z2"] = z.view(torch.int32)
    assert compat.find_identical_tensors(sd) == [frozenset({"t", "u"})]
    assert compat.find_overlapping_tensors(sd) == [
        frozenset({"p", "q", "z2"}),
        frozenset({"t", "u", "x_tail"}),
    ]


def test_plain_aliases_on_either_side_of_a_subclass_are_identical() -> None:
    """A plain tensor keyed before the first subclass and its alias keyed after it are compared
    the same way (the record of plain leaves does not change when a subclass arrives)."""
    x, y = torch.arange(6.0), torch.arange(6.0) + 10
    sd = {"a": x, "t": TwoTensor(y, y + 1), "b": x, "c": x[:]}
    assert compat.find_identical_tensors(sd) == [frozenset({"a", "b", "c"})]
    assert compat.find_identical_tensors({"b": x, "t": sd["t"], "a": x}) == [frozenset({"a", "b"})]


def test_subclasses_with_an_empty_inner_tensor_compare_it_by_dtype_and_shape() -> None:
    x, y = torch.arange(12.0), torch.arange(12.0) * 2
    a = _with_extra(x[:4], y[:4], torch.empty(0))
    twin = _with_extra(x[:4], y[:4], torch.empty(0))
    assert compat.find_identical_tensors({"a": a, "twin": twin}) == [frozenset({"a", "twin"})]
    for odd in (torch.empty(0, 2), torch.empty(0, dtype=torch.int64), torch.zeros(1)):
        other = _with_extra(x[:4], y[:4], odd)
        assert compat.find_identical_tensors({"a": a, "other": other}) == [], odd
    assert compat.find_overlapping_tensors({"a": a, "twin": twin}) == [frozenset({"a", "twin"})]


@pytest.mark.parametrize(("dtype", "bits"), [(torch.quint4x2, 4), (torch.quint2x4, 2)])
def test_packed_sub_byte_tensors_cover_only_their_packed_bytes(
    dtype: torch.dtype, bits: int
) -> None:
    buf = torch.arange(24, dtype=torch.uint8)
    for n in (7, 8, 9):
        q = torch._empty_affine_quantized([0], scale=0.5, zero_point=1, dtype=dtype)
        q.set_(buf.untyped_storage(), 0, (n,), (1,))
        end = -(-n * bits // 8)  # bytes [0, end) hold its values
        assert compat.find_overlapping_tensors({"q": q, "rest": buf[end:]}) == [], n
        assert compat.find_overlapping_tensors({"q": q, "last": buf[end - 1 :]}) == [
            frozenset({"last", "q"})
        ], n
        assert compat.find_shared_tensors({"q": q, "rest": buf[end:]}) == [
            frozenset({"q", "rest"})
        ], n


@pytest.mark.parametrize(
    "relayout",
    [
        lambda t: t.t().contiguous().t(),  # same values, column-major
        lambda t: torch.stack([t, t]).select(0, 1),  # a view at an offset
        lambda t: t.repeat_interleave(2, dim=1)[:, ::2],  # a strided view
    ],
    ids=["column-major", "offset", "strided"],
)
def test_restore_aliases_reads_a_base_handed_in_any_layout(
    relayout: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    """The base a caller hands back may hold its values in another layout than the one saved
    (transposed, strided, at an offset): the restored base and its views read those values."""
    w = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    to_save, metadata = compat.dedup_for_save({"w": w, "row": w[1], "col": w[:, 2]})
    assert list(to_save) == ["col", "row", "w"]
    assert roundtrip.placeholders(to_save) == ["col", "row"]
    handed = relayout(to_save["w"])
    assert torch.equal(handed, w)
    out = compat.restore_aliases({**to_save, "w": handed}, metadata)
    assert torch.equal(out["w"], w)
    assert torch.equal(out["row"], w[1]) and torch.equal(out["col"], w[:, 2])


def test_per_channel_qparams_are_saved_once_per_value_compared_bit_for_bit() -> None:
    """Equal scales are stored once; zero points that differ only in the sign of a zero are not
    merged (a float compare would make -0.0 come back as 0.0)."""
    w = torch.linspace(-1, 1, 12).reshape(4, 3)
    scales = torch.tensor([0.1, 0.2, 0.3, 0.4])
    a = torch.quantize_per_channel(w, scales, torch.tensor([0.0, 1.0, 2.0, 3.0]), 0, torch.quint8)
    b = torch.quantize_per_channel(w, scales, torch.tensor([-0.0, 1.0, 2.0, 3.0]), 0, torch.quint8)
    assert a.qscheme() is torch.per_channel_affine_float_qparams
    to_save, metadata = compat.dedup_for_save({"a": a, "b": b})
    qparams = sorted(k for k in to_save if k.startswith("__qparams__/"))
    assert len(qparams) == 3  # one scales tensor for both, a zero-points tensor each
    assert record(metadata)["qparams"] == qparams
    out = compat.restore_aliases(to_save, metadata)
    for name, t in (("a", a), ("b", b)):
        got = out[name]
        assert torch.equal(got.int_repr(), t.int_repr()), name
        assert torch.equal(got.q_per_channel_scales(), t.q_per_channel_scales()), name
        zp, want = got.q_per_channel_zero_points(), t.q_per_channel_zero_points()
        assert torch.equal(zp.view(torch.int32), want.view(torch.int32)), name  # bit for bit


def test_per_channel_qparams_are_named_whatever_the_mapping_order() -> None:
    """The same state dict in another order writes the same file: the qparams tensors are named
    by their values, not by the order in which the entries were met. Found by the nightly
    profile's random exploration of test_saving_does_not_depend_on_the_mapping_order: a
    per-channel base and a narrowed view of it carry different scales and zero points."""
    w = torch.arange(5.0)
    scales, zeros = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5]), torch.tensor([0, 1, 2, 3, 4])
    base = torch.quantize_per_channel(w, scales, zeros, 0, torch.qint32)
    sd = {"view": base.narrow(0, 0, 2), "base": base}
    forward = compat.dedup_for_save(sd)
    backward = compat.dedup_for_save(dict(reversed(sd.items())))
    assert forward[1] == backward[1]
    assert list(forward[0]) == list(backward[0])
    for name, t in forward[0].items():
        assert torch.equal(t, backward[0][name]), name
    assert len([k for k in forward[0] if k.startswith("__qparams__/")]) == 4  # 2 scales, 2 zeros
    assert_restored(compat.restore_aliases(*backward), sd)


def test_qparams_names_are_a_digest_and_two_values_never_share_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``__qparams__/`` + 16 hex digits of the values' digest; should two values share those 64
    bits (forced here), the second takes the whole digest: nothing is ever stored over."""
    import hashlib
    import re

    w = torch.arange(4.0)
    sd = {
        "a": torch.quantize_per_channel(w, torch.full((4,), 0.5), torch.zeros(4), 0, torch.qint8),
        "b": torch.quantize_per_channel(w, torch.full((4,), 0.25), torch.zeros(4), 0, torch.qint8),
    }
    names = [k for k in compat.dedup_for_save(sd)[0] if k.startswith("__qparams__/")]
    assert len(names) == 3 and all(re.fullmatch(r"__qparams__/[0-9a-f]{16}", n) for n in names)

    sha256 = hashlib.sha256

    class Colliding:
        def __init__(self, data: bytes) -> None:
            self.real = sha256(data).hexdigest()

        def hexdigest(self) -> str:
            return "0" * 16 + self.real[16:]  # every value: the same first 64 bits

    monkeypatch.setattr("compat.saving.hashlib.sha256", Colliding)
    to_save, metadata = compat.dedup_for_save(sd)
    names = sorted(k for k in to_save if k.startswith("__qparams__/"))
    assert len(names) == 3 and names[0] == "__qparams__/" + "0" * 16
    assert all(len(n) == len("__qparams__/") + 64 for n in names[1:])
    assert_restored(compat.restore_aliases(to_save, metadata), sd)


def test_a_copied_contiguous_base_keeps_the_strides_it_was_handed_in() -> None:
    """A misaligned base is copied; when it was contiguous the copy keeps its strides, even the
    stride of a size-1 dim (which addresses nothing), as the base used in place would."""
    b = (torch.arange(32, dtype=torch.uint8) * 37 + 11).to(torch.uint8)
    sd = {"rows": b.reshape(1, 32), "words": b.view(torch.int32)}
    to_save, metadata = compat.dedup_for_save(sd)
    assert list(to_save) == ["rows", "words"]
    assert roundtrip.placeholders(to_save) == ["words"]
    buf = torch.full((3 + 32 + 8,), 0xA5, dtype=torch.uint8)
    buf[3:35] = b
    handed = torch.empty(0, dtype=torch.uint8).set_(buf.untyped_storage(), 3, (1, 32), (7, 1))
    assert handed.is_contiguous() and handed.stride() == (7, 1)
    out = compat.restore_aliases({**to_save, "rows": handed}, metadata)
    assert out["rows"].stride() == (7, 1)
    assert not same_storage(out["rows"], handed)  # copied: byte 3 is not 16-byte aligned
    assert same_storage(out["rows"], out["words"])
    assert_restored(out, sd)


# === safetensors.torch's parameters and format ====================================================

# what compat saves as itself (every other dtype is recorded as a view of bytes)
WRITTEN_AS_ITSELF = sorted(_save_plan.SAVABLE, key=str)


@st.composite
def plain_state_dicts(draw: st.DrawFn) -> dict[str, torch.Tensor]:
    """0-4 names, each a tensor alone in its storage (a fresh one, a slice, a strided slice or a
    transpose of one: contiguous or not), of a dtype compat saves as itself, 0-d and empty
    shapes included, with random raw bytes: nothing for compat to record."""
    names = draw(st.lists(st.text(NAME_ALPHABET, min_size=1, max_size=6), max_size=4, unique=True))
    out: dict[str, torch.Tensor] = {}
    for name in names:
        dtype = draw(st.sampled_from(WRITTEN_AS_ITSELF))
        shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
        t = base_tensor(dtype, shape, draw(st.integers(0, 2**31 - 1)), "cpu")
        how = draw(st.sampled_from(["fresh", "slice", "step", "transpose"]))
        if t.dim() and how == "slice":
            t = t[draw(st.integers(0, shape[0])) :]
        elif t.dim() and how == "step":
            t = t[:: draw(st.integers(2, 3))]
        elif t.dim() >= 2 and how == "transpose":
            t = t.transpose(0, -1)
        out[name] = t
    return out


metadatas = st.one_of(
    st.none(), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)
)


def assert_same_bytes(ours: bytes, theirs: bytes, metadata: dict[str, str] | None) -> None:
    """Byte for byte; with two metadata entries or more, up to their order, which safetensors
    itself writes in no fixed order (two of its own saves of one input differ there)."""
    if metadata is None or len(metadata) < 2:
        assert ours == theirs
        return
    size = int.from_bytes(theirs[:8], "little")
    assert ours[:8] == theirs[:8]
    assert json.loads(ours[8 : 8 + size]) == json.loads(theirs[8 : 8 + size])
    assert ours[8 + size :] == theirs[8 + size :]


def assert_same_tensors(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    for name, t in want.items():
        assert (got[name].dtype, got[name].shape) == (t.dtype, t.shape), name
        assert oracle.raw_bytes(got[name]) == oracle.raw_bytes(t), name


@pytest.mark.examples(150)
@roundtrip.hyp
@given(sd=plain_state_dicts(), metadata=metadatas)
def test_a_state_dict_with_nothing_to_record_is_written_as_safetensors_writes_it(
    tmp_path_factory: pytest.TempPathFactory,
    sd: dict[str, torch.Tensor],
    metadata: dict[str, str] | None,
) -> None:
    """Files and bytes, with and without metadata (None stays None): no record key, the user's
    metadata as given, a non-contiguous tensor as safetensors writes its contiguous copy."""
    to_save, record = compat.dedup_for_save(sd)
    assert record == {} and sorted(to_save) == sorted(sd)
    dense = {name: t.contiguous() for name, t in sd.items()}
    theirs = safetensors.torch.save(dense, metadata=metadata)
    assert_same_bytes(compat.save(sd, metadata), theirs, metadata)
    folder = tmp_path_factory.mktemp("plain")
    safetensors.torch.save_file(dense, folder / "theirs.safetensors", metadata=metadata)
    compat.save_file(sd, folder / "ours.safetensors", metadata=metadata)
    ours = (folder / "ours.safetensors").read_bytes()
    assert_same_bytes(ours, (folder / "theirs.safetensors").read_bytes(), metadata)
    if not sd and metadata == {}:
        return  # safetensors 0.8.0 writes '{},"__metadata__":{}}' here, which it cannot read
    with safe_open(folder / "ours.safetensors", framework="pt") as handle:
        assert handle.metadata() == metadata
    assert_same_tensors(compat.load(theirs), dense)
    assert_same_tensors(compat.load_file(folder / "theirs.safetensors"), dense)


@pytest.mark.examples(100)
@roundtrip.hyp
@given(data=st.data())
def test_save_and_load_bring_back_every_name_with_its_sharing(data: st.DataObject) -> None:
    case = data.draw(cases("cpu"), label="case")
    blob = compat.save(case.tensors)
    roundtrip.assert_round_trip(case.tensors, compat.load(blob), case.origins)


@pytest.mark.examples(50)
@roundtrip.hyp
@given(data=st.data())
def test_load_file_reads_through_the_pread_backend(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    case = data.draw(cases("cpu"), label="case")
    path = tmp_path_factory.mktemp("pread") / "views.safetensors"
    compat.save_file(case.tensors, path)
    restored = compat.load_file(path, backend="pread")
    roundtrip.assert_round_trip(case.tensors, restored, case.origins)


def test_a_backend_safetensors_does_not_know_raises_what_safe_open_raises(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    compat.save_file({"w": torch.ones(2)}, path)
    with pytest.raises(Exception) as theirs:
        safetensors.torch.load_file(path, backend="nope")
    with pytest.raises(type(theirs.value)) as ours:
        compat.load_file(path, backend="nope")
    assert str(ours.value) == str(theirs.value)


def test_a_backend_the_installed_safe_open_has_no_parameter_for_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A safetensors whose ``safe_open`` takes no ``backend`` (older releases): the default
    reader still works, a backend is refused before the file is opened."""
    import safetensors

    real = safetensors.safe_open

    def safe_open_without_backend(filename: Any, framework: str, device: Any = "cpu") -> Any:
        return real(filename, framework=framework, device=device)

    monkeypatch.setattr(safetensors, "safe_open", safe_open_without_backend)
    path = tmp_path / "w.safetensors"
    compat.save_file({"w": torch.ones(2)}, path)
    assert torch.equal(compat.load_file(path)["w"], torch.ones(2))
    with pytest.raises(TypeError) as info:
        compat.load_file(path, backend="pread")
    assert str(info.value) == (
        f"backend='pread' (str): the installed safetensors {safetensors.__version__}'s safe_open "
        "has no backend parameter; accepted: backend=None (its one reader), or a safetensors "
        "whose safe_open takes backend= (function here)"
    )


def _nested(layout: torch.layout) -> torch.Tensor:
    return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=layout)


def _ones() -> torch.Tensor:
    return torch.ones(2)


# name -> (a function making (tensors, metadata), compat's documented class, what the message names)
BAD_INPUTS: dict[str, tuple[Callable[[], tuple[Any, Any]], type[Exception], str]] = {
    "a str": (lambda: ("notadict", None), TypeError, "got str"),
    "a list": (lambda: ([_ones()], None), TypeError, "got list"),
    "an int value": (lambda: ({"w": _ones(), "a": 1}, None), TypeError, "key 'a'"),
    "a dict value": (lambda: ({"a": {"some": "thing"}}, None), TypeError, "key 'a'"),
    "a sparse tensor": (lambda: ({"a": _ones().diag().to_sparse()}, None), TypeError, "key 'a'"),
    "a sparse csr tensor": (
        lambda: ({"a": _ones().diag().to_sparse_csr()}, None),
        TypeError,
        "key 'a'",
    ),
    "a jagged nested tensor": (lambda: ({"a": _nested(torch.jagged)}, None), TypeError, "key 'a'"),
    "a strided nested tensor": (
        lambda: ({"a": _nested(torch.strided)}, None),
        TypeError,
        "key 'a'",
    ),
    "a wrapper subclass": (lambda: ({"a": TwoTensor(_ones(), _ones())}, None), TypeError, "'a'"),
    "a meta tensor": (
        lambda: ({"w": _ones(), "a": torch.empty(2, device="meta")}, None),
        ValueError,
        "key 'a'",
    ),
    "an empty meta tensor": (
        lambda: ({"a": torch.empty(0, device="meta")}, None),
        ValueError,
        "key 'a'",
    ),
    "an int key": (lambda: ({1: _ones()}, None), TypeError, "key 1 (int)"),
    "metadata of a str": (lambda: ({"w": _ones()}, "k"), ValueError, "'k' (str)"),
    "metadata with an int value": (
        lambda: ({"w": _ones()}, {"k": 1}),
        ValueError,
        "'k' (str): 1 (int)",
    ),
    "metadata with an int key": (
        lambda: ({"w": _ones()}, {1: "v"}),
        ValueError,
        "1 (int): 'v' (str)",
    ),
    "metadata with a None value": (
        lambda: ({"w": _ones()}, {"k": None}),
        ValueError,
        "'k' (str): None (NoneType)",
    ),
}


@pytest.mark.filterwarnings("ignore:.*(beta state|prototype stage|TypedStorage is deprecated)")
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_input_both_refuse_raises_an_instance_of_safetensors_class_and_of_compats(
    tmp_path: Path, case: str
) -> None:
    """The oracle is safetensors' own function on the same input; compat's exception is also
    of the class compat documents, and its message names the bad key or entry."""
    make, documented, named = BAD_INPUTS[case]
    tensors, metadata = make()
    with pytest.raises(Exception) as theirs:
        safetensors.torch.save(tensors, metadata=metadata)
    for call in (
        lambda: compat.save(tensors, metadata),
        lambda: compat.save_file(tensors, tmp_path / "out.safetensors", metadata),
    ):
        with pytest.raises(type(theirs.value)) as ours:
            call()
        assert isinstance(ours.value, documented), case
        assert named in str(ours.value), case
    assert not (tmp_path / "out.safetensors").exists()


def test_metadata_may_not_use_the_record_key_even_with_nothing_to_record() -> None:
    with pytest.raises(ValueError) as info:
        compat.save({"w": _ones()}, {METADATA_KEY: "{}"})
    assert str(info.value) == (
        f"metadata key {METADATA_KEY!r} collides with the alias record (removed tensor names and "
        f"{METADATA_KEY!r}); accepted: any other key"
    )


def test_a_plain_file_loads_as_safetensors_loads_it_and_restore_aliases_returns_it() -> None:
    sd = {"b": torch.arange(3.0), "a": torch.arange(4, dtype=torch.int32)}
    blob = safetensors.torch.save(sd)
    assert_same_tensors(compat.load(blob), safetensors.torch.load(blob))
    to_save, metadata = compat.dedup_for_save(sd)
    assert metadata == {}
    assert compat.restore_aliases(to_save, metadata) == dict(sorted(sd.items()))
    assert compat.restore_aliases(to_save, None) == dict(sorted(sd.items()))
