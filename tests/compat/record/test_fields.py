"""The record's field checks, message by message, and the builders behind a valid record.

Pins: every refusal of a hand-made ``__compat_sharing__`` record (views, lazy bits, quantizers per
tensor and per channel, sub-byte views, JSON constants) is a ValueError whose whole message names
the entry, shows the bad value with its type and says what is accepted; the limits are exact (64
dims is accepted, a scale of 0 is not); valid sub-byte and view records round-trip bit for bit,
also under a ``torch.device`` default-device context; a per-channel quantizer that no longer fits
its tensor is refused at save time; and a non-module argument gets the shared TypeError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch

import compat
from compat._features import SUB_BYTE_BITS
from compat.saving import METADATA_KEY
from tests.common.compat import messages

Tensors = dict[str, torch.Tensor]
Record = dict[str, Any]

PER_TENSOR_Q = {"scheme": "per_tensor_affine", "scale": "0x1p-2", "zero_point": 3}


message = messages.record_entry  # the whole refusal the record docs promise for an entry


def write(tmp_path: Path, tensors: Tensors, record: Record | str) -> Path:
    """A safetensors file holding ``tensors`` with ``record`` as its alias record."""
    text = record if isinstance(record, str) else json.dumps(record)
    path = tmp_path / "crafted.safetensors"
    safetensors.torch.save_file(tensors, path, metadata={METADATA_KEY: text})
    return path


def refusal(tmp_path: Path, tensors: Tensors, record: Record | str) -> str:
    """The message load_file refuses the crafted file with."""
    path = write(tmp_path, tensors, record)
    with pytest.raises(ValueError) as info:
        compat.load_file(path)
    return str(info.value)


def plain_file() -> tuple[Tensors, Record]:
    """A float32 base of 8 elements and a record with one ordinary view of it."""
    tensors = {"buf": torch.arange(8, dtype=torch.float32)}
    record: Record = {
        "version": 2,
        "bases": {"buf": {"pad": 0}},
        "views": {
            "v": {"base": "buf", "offset": 4, "dtype": "float32", "shape": [2], "stride": [1]}
        },
    }
    return tensors, record


def per_tensor_file(quant: Any = None, dtype: str = "quint8") -> tuple[Tensors, Record]:
    """A 16-byte raw base and a quantized view ``q`` of its first 4 bytes."""
    tensors = {"raw": torch.arange(16, dtype=torch.uint8)}
    view = {"base": "raw", "offset": 0, "dtype": dtype, "shape": [4], "stride": [1]}
    view["quant"] = dict(PER_TENSOR_Q) if quant is None else quant
    return tensors, {"version": 2, "bases": {"raw": {"pad": 0}}, "views": {"q": view}}


def per_channel_file(
    scales: torch.Tensor | None = None, zero_points: torch.Tensor | None = None, **quant: Any
) -> tuple[Tensors, Record]:
    """A qint8 view ``w`` of shape (3, 4) quantized per channel along axis 0."""
    tensors = {
        "raw": torch.arange(12, dtype=torch.uint8),
        "__qparams__/0": (
            torch.tensor([0.5, 0.25, 1.0], dtype=torch.float64) if scales is None else scales
        ),
        "__qparams__/1": torch.tensor([0, 1, 2]) if zero_points is None else zero_points,
    }
    q = {
        "scheme": "per_channel_affine",
        "axis": 0,
        "scales": "__qparams__/0",
        "zero_points": "__qparams__/1",
        **quant,
    }
    view = {"base": "raw", "offset": 0, "dtype": "qint8", "shape": [3, 4], "stride": [4, 1]}
    record = {
        "version": 2,
        "bases": {"raw": {"pad": 0}},
        "qparams": ["__qparams__/0", "__qparams__/1"],
        "views": {"w": {**view, "quant": q}},
    }
    return tensors, record


# --- views and lazy bits --------------------------------------------------------------------------


def test_a_view_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    tensors, record = plain_file()
    record["views"]["v"] = 5
    assert refusal(tmp_path, tensors, record) == message("v", "5 (int) is not an object")


def test_a_conj_flag_that_is_not_a_bool_is_refused(tmp_path: Path) -> None:
    tensors, record = plain_file()
    record["views"]["v"].update(dtype="complex64", offset=0, conj=1)
    assert refusal(tmp_path, tensors, record) == message("v", "conj 1 (int) is not true or false")


def test_a_neg_flag_that_is_not_a_bool_is_refused(tmp_path: Path) -> None:
    tensors, record = plain_file()
    record["views"]["v"]["neg"] = "yes"
    assert refusal(tmp_path, tensors, record) == message(
        "v", "neg 'yes' (str) is not true or false"
    )


def test_an_unknown_dtype_is_refused(tmp_path: Path) -> None:
    tensors, record = plain_file()
    record["views"]["v"]["dtype"] = "float33"
    assert refusal(tmp_path, tensors, record) == message(
        "v", "dtype 'float33' (str) is not a torch dtype"
    )


def test_a_negative_size_is_refused(tmp_path: Path) -> None:
    tensors, record = plain_file()
    record["views"]["v"]["shape"] = [-1]
    assert refusal(tmp_path, tensors, record) == message(
        "v", "shape [-1] (list) is not a list of at most 64 ints >= 0"
    )


def test_a_view_of_exactly_64_dims_is_accepted(tmp_path: Path) -> None:
    tensors, record = plain_file()
    record["views"]["v"].update(shape=[1] * 64, stride=[1] * 64)
    loaded = compat.load_file(write(tmp_path, tensors, record))
    assert loaded["v"].dim() == 64
    assert loaded["v"].reshape(-1).tolist() == [1.0]
    assert loaded["v"].untyped_storage().data_ptr() == loaded["buf"].untyped_storage().data_ptr()


def test_a_json_constant_is_refused_naming_the_record(tmp_path: Path) -> None:
    tensors, _ = plain_file()
    assert refusal(tmp_path, tensors, '{"version": NaN}') == message(
        METADATA_KEY, "NaN is not a JSON number"
    )


# --- quantizers per tensor ------------------------------------------------------------------------


def test_a_quantizer_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    tensors, record = per_tensor_file(quant=5)
    assert refusal(tmp_path, tensors, record) == message(
        "q", "quantizer 5 (int) has no known scheme"
    )


def test_an_unknown_scheme_is_refused(tmp_path: Path) -> None:
    tensors, record = per_tensor_file(quant={"scheme": "per_tensor_symmetric"})
    assert refusal(tmp_path, tensors, record) == message(
        "q", "quantizer {'scheme': 'per_tensor_symmetric'} (dict) has no known scheme"
    )


def test_a_per_tensor_quantizer_with_an_unknown_field_is_refused(tmp_path: Path) -> None:
    tensors, record = per_tensor_file(quant={**PER_TENSOR_Q, "axis": 0})
    assert refusal(tmp_path, tensors, record) == message(
        "q",
        "fields ['axis', 'scale', 'scheme', 'zero_point'] (missing [], unknown ['axis'])",
    )


@pytest.mark.parametrize("scale", ["0x0p+0", "-0x0p+0", "-0x1p-2"])
def test_a_scale_that_is_not_positive_is_refused(tmp_path: Path, scale: str) -> None:
    tensors, record = per_tensor_file(quant={**PER_TENSOR_Q, "scale": scale})
    assert refusal(tmp_path, tensors, record) == message(
        "q", f"scale {scale!r} (str) is not a positive float in hex"
    )


def test_a_zero_point_out_of_range_is_refused(tmp_path: Path) -> None:
    tensors, record = per_tensor_file(quant={**PER_TENSOR_Q, "zero_point": 300})
    assert refusal(tmp_path, tensors, record) == message(
        "q", "zero_point 300 (int) is not an int in 0..255"
    )


def test_a_valid_per_tensor_view_reads_its_own_bytes(tmp_path: Path) -> None:
    tensors, record = per_tensor_file()
    record["views"]["q"]["offset"] = 4
    loaded = compat.load_file(write(tmp_path, tensors, record))
    q = loaded["q"]
    assert q.dtype is torch.quint8
    assert q.qscheme() is torch.per_tensor_affine
    assert (q.q_scale(), q.q_zero_point()) == (0.25, 3)
    assert q.int_repr().tolist() == [4, 5, 6, 7]
    assert q.dequantize().tolist() == [0.25, 0.5, 0.75, 1.0]


# --- quantizers per channel -----------------------------------------------------------------------


def test_a_per_channel_quantizer_with_an_unknown_field_is_refused(tmp_path: Path) -> None:
    tensors, record = per_channel_file(scale="0x1p-2")
    assert refusal(tmp_path, tensors, record) == message(
        "w",
        "fields ['axis', 'scale', 'scales', 'scheme', 'zero_points'] "
        "(missing [], unknown ['scale'])",
    )


def test_scales_that_are_not_listed_are_refused(tmp_path: Path) -> None:
    tensors, record = per_channel_file()
    record["views"]["w"]["quant"]["scales"] = "__qparams__/9"
    assert refusal(tmp_path, tensors, record) == message(
        "w", "scales '__qparams__/9' (str) is not a listed qparams tensor"
    )


def test_integer_scales_are_refused(tmp_path: Path) -> None:
    tensors, record = per_channel_file(scales=torch.tensor([1, 1, 1]))
    assert refusal(tmp_path, tensors, record) == message(
        "w",
        "scales '__qparams__/0' is a torch.int64 tensor of shape (3,); expected floating of "
        "shape (3,) (one per channel along axis 0)",
    )


def test_zero_points_that_are_not_int64_are_refused(tmp_path: Path) -> None:
    tensors, record = per_channel_file(zero_points=torch.tensor([0, 1, 2], dtype=torch.int32))
    assert refusal(tmp_path, tensors, record) == message(
        "w",
        "zero_points '__qparams__/1' is a torch.int32 tensor of shape (3,); expected int64 of "
        "shape (3,) (one per channel along axis 0)",
    )


@pytest.mark.parametrize("bad_scale", [0.0, float("inf"), float("nan"), -0.5])
def test_scales_that_are_not_positive_and_finite_are_refused(
    tmp_path: Path, bad_scale: float
) -> None:
    scales = torch.tensor([0.5, bad_scale, 1.0], dtype=torch.float64)
    tensors, record = per_channel_file(scales=scales)
    assert refusal(tmp_path, tensors, record) == message(
        "w", "scales are not all positive and finite"
    )


def test_a_valid_per_channel_view_reads_its_own_bytes(tmp_path: Path) -> None:
    tensors, record = per_channel_file()
    loaded = compat.load_file(write(tmp_path, tensors, record))
    w = loaded["w"]
    assert w.qscheme() is torch.per_channel_affine
    assert w.q_per_channel_axis() == 0
    assert w.q_per_channel_scales().tolist() == [0.5, 0.25, 1.0]
    assert w.q_per_channel_zero_points().tolist() == [0, 1, 2]
    assert w.int_repr().reshape(-1).tolist() == list(range(12))
    assert set(loaded) == {"raw", "w"}


def test_a_per_channel_quantizer_that_does_not_fit_is_refused_at_save(tmp_path: Path) -> None:
    # torch keeps the channel axis 1 on a flattening view of a (3, 1) tensor: shape (3,), axis 1.
    w = torch.quantize_per_channel(
        torch.zeros(3, 1),
        torch.ones(1, dtype=torch.float64),
        torch.zeros(1, dtype=torch.long),
        1,
        torch.qint8,
    )
    flat = w.view(3)
    assert flat.q_per_channel_axis() == 1
    with pytest.raises(ValueError) as info:
        compat.save_file({"w": w, "flat": flat}, tmp_path / "x.safetensors")
    assert str(info.value) == (
        "key 'flat' is a torch.qint8 tensor of shape (3,) whose per-channel quantizer does not fit "
        "it (axis 1, 1 scales): torch cannot read its values either; accepted: quantized tensors "
        "that dequantize"
    )


# --- sub-byte views -------------------------------------------------------------------------------

needs_quint4x2 = pytest.mark.skipif(
    getattr(torch, "quint4x2", None) not in SUB_BYTE_BITS,
    reason="this torch has no quint4x2",
)


def sub_byte_file(shape: list[int], stride: list[int]) -> tuple[Tensors, Record]:
    tensors = {"raw": torch.tensor([0x21, 0x43, 0x65, 0x87], dtype=torch.uint8)}
    view = {
        "base": "raw",
        "offset": 0,
        "dtype": "quint4x2",
        "shape": shape,
        "stride": stride,
        "quant": {"scheme": "per_tensor_affine", "scale": "0x1p-1", "zero_point": 0},
    }
    return tensors, {"version": 2, "bases": {"raw": {"pad": 0}}, "views": {"q4": view}}


@needs_quint4x2
@pytest.mark.parametrize(
    ("shape", "stride"), [([2], [2]), ([2, 2], [1, 2]), ([2, 1, 2], [1, 1, 2])]
)
def test_a_strided_sub_byte_view_is_refused(
    tmp_path: Path, shape: list[int], stride: list[int]
) -> None:
    tensors, record = sub_byte_file(shape, stride)
    assert refusal(tmp_path, tensors, record) == message(
        "q4", f"a torch.quint4x2 view must be contiguous, not strides {stride}"
    )


@needs_quint4x2
@pytest.mark.parametrize(
    ("shape", "stride"), [([2, 2, 2], [4, 2, 1]), ([2, 1, 4], [4, 7, 1]), ([8], [1])]
)
def test_a_contiguous_sub_byte_view_round_trips(
    tmp_path: Path, shape: list[int], stride: list[int]
) -> None:
    tensors, record = sub_byte_file(shape, stride)
    loaded = compat.load_file(write(tmp_path, tensors, record))
    q4 = loaded["q4"]
    assert q4.dtype is torch.quint4x2
    assert tuple(q4.shape) == tuple(shape)
    raw = torch.empty(0, dtype=torch.uint8).set_(q4.untyped_storage())
    assert raw.tolist() == [0x21, 0x43, 0x65, 0x87]
    # torch packs the first element in the low nibble: 1, 2, 3, ..., 8 at scale 1/2.
    assert q4.dequantize().reshape(-1).tolist() == [n / 2 for n in range(1, 9)]


@needs_quint4x2
def test_a_saved_sub_byte_tensor_round_trips(tmp_path: Path) -> None:
    q = torch.quantize_per_tensor(torch.linspace(0, 1, 8).reshape(2, 2, 2), 0.1, 1, torch.quint4x2)
    path = tmp_path / "q4.safetensors"
    compat.save_file({"q": q}, path)
    loaded = compat.load_file(path)["q"]
    assert loaded.dtype is torch.quint4x2
    assert tuple(loaded.shape) == (2, 2, 2)
    assert torch.equal(loaded.dequantize(), q.dequantize())


# --- the builders honour the file's device, not torch's default device ---------------------------


def test_restoring_under_a_default_device_context_stays_on_the_tensors_device(
    tmp_path: Path,
) -> None:
    buf = torch.arange(12.0)
    z = torch.arange(4.0).to(torch.complex64) * (1 + 1j)
    sd = {
        "buf": buf,
        "mid": buf[2:6].view(2, 2),
        "zc": z.conj(),
        "e": torch.empty(0, 3, dtype=torch.complex64).conj(),
        "eq": torch.quantize_per_tensor(torch.ones(0, 2), 0.5, 1, torch.quint8),
        "qt": torch.quantize_per_tensor(torch.linspace(0, 1, 6), 0.25, 2, torch.quint8)[1:],
    }
    path = tmp_path / "sd.safetensors"
    compat.save_file(sd, path)
    stored = safetensors.torch.load_file(path)
    with safetensors.safe_open(path, framework="pt") as handle:
        metadata = handle.metadata()
    with torch.device("meta"):
        restored = compat.restore_aliases(stored, metadata)
    assert set(restored) == set(sd)
    for name, t in restored.items():
        assert t.device == torch.device("cpu"), name
    assert restored["mid"].tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert (
        restored["mid"].untyped_storage().data_ptr() == restored["buf"].untyped_storage().data_ptr()
    )
    assert restored["zc"].is_conj() and torch.equal(restored["zc"], z.conj())
    assert restored["e"].is_conj() and tuple(restored["e"].shape) == (0, 3)
    assert tuple(restored["eq"].shape) == (0, 2) and restored["eq"].q_scale() == 0.5
    assert torch.equal(restored["qt"].dequantize(), sd["qt"].dequantize())


# --- the argument check shared by every function that takes a module ------------------------------


@pytest.mark.parametrize(
    "call", [compat.module_devices, compat.is_meta_module, compat.tied_parameters]
)
def test_a_non_module_gets_the_shared_type_error(call: Any) -> None:
    with pytest.raises(TypeError) as info:
        call(5)
    assert str(info.value) == "module must be a torch.nn.Module; got 5 (int)"


def test_a_duplicated_name_in_the_record_is_refused(tmp_path: Path) -> None:
    tensors, _ = plain_file()
    view = '{"base": "buf", "offset": 4, "dtype": "float32", "shape": [2], "stride": [1]}'
    text = (
        f'{{"version": 2, "bases": {{"buf": {{"pad": 0}}}}, "views": {{"v": {view}, "v": {view}}}}}'
    )
    assert refusal(tmp_path, tensors, text) == message(
        "v", "the name is written twice in one JSON object"
    )


@pytest.mark.parametrize("name", ["q", "q_empty"])
def test_a_quantized_entry_torch_cannot_build_on_the_loaded_device_is_named(name: str) -> None:
    """Quantized tensors have no meta kernels: restoring them from tensors loaded on meta fails
    in torch, and the error names the entry, with torch's reason."""
    q = torch.quantize_per_tensor(torch.linspace(-1, 1, 12).reshape(4, 3), 0.1, 2, torch.qint8)
    sd = {"q": q} if name == "q" else {"x": torch.ones(2), "q_empty": q[:0]}
    to_save, metadata = compat.dedup_for_save(sd)
    on_meta = {key: t.to("meta") for key, t in to_save.items()}
    with pytest.raises(ValueError) as info:
        compat.restore_aliases(on_meta, metadata)
    cause = info.value.__cause__
    assert isinstance(cause, RuntimeError)
    assert str(info.value) == message(name, f"torch cannot build it ({cause})")
