"""What torch keeps beside a tensor's geometry: conjugate and negative bits, quantizers,
ZeroTensors; and the layouts nothing can read byte by byte (nested, sparse, mkldnn).

Each test names the issue item it guards: identity and dedup must see everything that makes two
tensors read different values, and a saved name must reload reading exactly its own values.

The last section: ``compat.find_identical_tensors`` compares how the same bytes are read,
quantizer included. Two per-channel quantized tensors over the same bytes, with the same
geometry, read different values when their scales (or zero points) differ, so they are not
identical; with equal ones they are. A per-channel quantizer keyed as if it were per-tensor fails
there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import compat
from tests.common import oracle
from tests.common.compat.roundtrip import assert_round_trip, placeholders, save_and_restore

FINDERS = (
    compat.find_shared_tensors,
    compat.find_overlapping_tensors,
    compat.find_identical_tensors,
)


def lazy_views() -> dict[str, torch.Tensor]:
    z = (torch.arange(8.0) - 3.5).to(torch.complex64) * (1 - 2j)
    x = torch.arange(6.0) - 2.0
    return {
        "z": z,
        "z_conj": z.conj(),  # conjugate bit
        "z_conj_imag": z.conj().imag,  # negative bit on a real view
        "z_neg": torch._neg_view(z),  # negative bit on a complex view
        "x": x,
        "x_neg": torch._neg_view(x),
    }


def test_lazy_bit_views_share_bytes_but_are_not_identical() -> None:
    sd = lazy_views()
    assert compat.find_overlapping_tensors(sd) == [
        frozenset({"x", "x_neg"}),
        frozenset({"z", "z_conj", "z_conj_imag", "z_neg"}),
    ]
    assert compat.find_identical_tensors(sd) == []
    assert compat.find_identical_tensors({"a": sd["z_conj"], "b": sd["z"].conj()}) == [
        frozenset("ab")
    ]


def test_lazy_bit_views_reload_with_their_own_values() -> None:
    sd = lazy_views()
    to_save, _, restored = save_and_restore(sd)
    # a lazy view is never written as itself: its name holds a placeholder
    assert set(to_save) == set(sd)
    assert placeholders(to_save) == ["x_neg", "z_conj", "z_conj_imag", "z_neg"]
    assert_round_trip(sd, restored, oracle.address_origins(sd))
    for name in ("z_conj", "z_conj_imag", "z_neg", "x_neg"):
        assert torch.equal(restored[name], sd[name]), name
        assert restored[name].untyped_storage().data_ptr() == restored[name[0]].data_ptr()
    assert restored["z_conj"].is_conj() and restored["z_neg"].is_neg()


def test_a_lone_lazy_bit_view_reloads_with_its_values_and_a_plain_load_reads_a_placeholder(
    tmp_path: Any,
) -> None:
    z = torch.tensor([1 + 2j, -3 - 4j], dtype=torch.complex64)
    sd = {"zc": z.conj(), "neg": torch._neg_view(torch.tensor([1.5, -2.5]))}
    path = tmp_path / "lazy.safetensors"
    compat.save_file(sd, path)
    restored = compat.load_file(path)
    assert torch.equal(restored["zc"], z.conj()) and restored["zc"].is_conj()
    assert restored["neg"].tolist() == [-1.5, 2.5]
    import safetensors.torch

    plain = safetensors.torch.load_file(path)  # never saved as raw memory: a placeholder each
    assert sorted(plain) == ["__alias_base__/0", "__alias_base__/1", "neg", "zc"]
    assert placeholders(plain) == ["neg", "zc"]


def quantized(dtype: torch.dtype) -> torch.Tensor:
    x = torch.linspace(-3, 3, 24).reshape(4, 6)
    return torch.quantize_per_tensor(x, 0.07, 3 if dtype != torch.qint8 else -2, dtype)


QUANTIZED_CASES: dict[str, Callable[[], dict[str, torch.Tensor]]] = {
    "quint8": lambda: {"q": (q := quantized(torch.quint8)), "row": q[1], "t": q.t(), "e": q[2:2]},
    "qint8": lambda: {"q": (q := quantized(torch.qint8)), "cols": q[:, ::2]},
    "qint32": lambda: {"q": (q := quantized(torch.qint32)), "tail": q[2:]},
    "per_channel": lambda: {
        "w": (
            w := torch.quantize_per_channel(
                torch.linspace(-1, 1, 24).reshape(4, 6),
                torch.tensor([0.01, 0.02, 0.03, 0.04], dtype=torch.float64),
                torch.tensor([0, 1, -1, 2]),
                0,
                torch.qint8,
            )
        ),
        "w_row": w[2],
        "w_half": w[:2],
    },
    "per_channel_float_qparams": lambda: {
        "emb": torch.quantize_per_channel(
            torch.linspace(-1, 1, 24).reshape(4, 6),
            torch.tensor([0.01, 0.02, 0.03, 0.04]),
            torch.tensor([0.5, -1.0, 0.0, 2.0]),
            0,
            torch.quint8,
        )
    },
    "quint4x2": lambda: {"q4": quantized(torch.quint4x2)},
    "quint2x4": lambda: {"q2": quantized(torch.quint2x4)},
    "with_its_integers": lambda: {
        "q": (q := quantized(torch.quint8)),
        "ints": torch.empty(0, dtype=torch.uint8).set_(q.untyped_storage(), 0, (24,), (1,)),
    },
}


@pytest.mark.parametrize("case", sorted(QUANTIZED_CASES))
def test_quantized_tensors_round_trip_with_their_quantizer(case: str) -> None:
    sd = QUANTIZED_CASES[case]()
    _, _, restored = save_and_restore(sd)
    assert_round_trip(sd, restored, oracle.address_origins(sd))
    for name, t in sd.items():
        got = restored[name]
        assert got.is_quantized is t.is_quantized, name
        if t.is_quantized and t.numel():
            assert got.qscheme() == t.qscheme(), name
            assert torch.equal(got.dequantize(), t.dequantize()), name
            if t.dtype not in oracle.SUB_BYTE:  # torch.equal also compares a packed storage's
                assert torch.equal(got, t), name  # padding bytes, which hold nothing


def test_quantized_views_are_identical_only_with_the_same_quantizer() -> None:
    q = quantized(torch.quint8)
    same_bytes_other_scale = torch._empty_affine_quantized(
        [0], scale=0.5, zero_point=3, dtype=torch.quint8
    ).set_(q.untyped_storage(), 0, (4, 6), (6, 1))
    ints = torch.empty(0, dtype=torch.uint8).set_(q.untyped_storage(), 0, (4, 6), (6, 1))
    sd = {"q": q, "q2": q[:], "other": same_bytes_other_scale, "ints": ints}
    assert compat.find_overlapping_tensors(sd) == [frozenset(sd)]
    assert compat.find_identical_tensors(sd) == [frozenset({"q", "q2"})]


def test_zero_tensors_share_nothing_and_save_as_zeros() -> None:
    zt = torch._efficientzerotensor((3,), dtype=torch.complex128)
    sd = {"a": zt, "b": zt, "c": torch._efficientzerotensor((2, 2))}
    for find in FINDERS:
        assert find(sd) == []
    _, _, restored = save_and_restore(sd)
    for name, t in sd.items():
        assert torch.equal(restored[name], torch.zeros_like(t)), name


def nested_strided() -> torch.Tensor:
    return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


def nested_jagged() -> torch.Tensor:
    return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)


UNREADABLE: dict[str, tuple[Callable[[], torch.Tensor], str]] = {
    "nested": (nested_strided, r"nested tensor \(layout torch\.strided\)"),
    "nested_jagged": (nested_jagged, r"nested tensor \(layout torch\.jagged\)"),
    "sparse_coo": (lambda: torch.eye(3).to_sparse(), r"sparse tensor \(layout torch\.sparse_coo\)"),
    "sparse_csr": (
        lambda: torch.eye(4).to_sparse_csr(),
        r"sparse tensor \(layout torch\.sparse_csr\)",
    ),
    "sparse_csc": (
        lambda: torch.eye(4).to_sparse_csc(),
        r"sparse tensor \(layout torch\.sparse_csc\)",
    ),
    "sparse_bsr": (
        lambda: torch.eye(4).to_sparse_bsr((2, 2)),
        r"block-sparse tensor \(layout torch\.sparse_bsr\)",
    ),
    "sparse_bsc": (
        lambda: torch.eye(4).to_sparse_bsc((2, 2)),
        r"block-sparse tensor \(layout torch\.sparse_bsc\)",
    ),
    "mkldnn": (lambda: torch.ones(3).to_mkldnn(), r"mkldnn tensor \(layout torch\._mkldnn\)"),
}


def _save_to_tmp(sd: dict[str, torch.Tensor]) -> None:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        compat.save_file(sd, Path(tmp) / "x.safetensors")


PUBLIC = (*FINDERS, compat.dedup_for_save, _save_to_tmp)


@pytest.mark.filterwarnings("ignore:.*(nested tensors|Sparse).*:UserWarning")
@pytest.mark.parametrize("kind", sorted(UNREADABLE))
@pytest.mark.parametrize("function", PUBLIC, ids=lambda f: f.__name__.strip("_"))
def test_layouts_without_strided_storage_are_refused_by_every_function(
    kind: str, function: Callable[[dict[str, torch.Tensor]], Any]
) -> None:
    build, layout = UNREADABLE[kind]
    sd = {"fine": torch.ones(2), "bad.weight": build()}
    with pytest.raises(TypeError, match=rf"key 'bad\.weight' holds a {layout}"):
        function(sd)


def test_a_non_contiguous_sub_byte_view_is_refused_naming_the_key() -> None:
    q4 = quantized(torch.quint4x2)
    view = torch._empty_affine_quantized([0], scale=0.1, zero_point=3, dtype=torch.quint4x2)
    view.set_(q4.untyped_storage(), 0, (2, 3), (1, 2))  # what torch's own slicing cannot make
    for function in (compat.find_overlapping_tensors, compat.dedup_for_save):
        with pytest.raises(TypeError, match=r"key 'odd'.*non-contiguous torch\.quint4x2"):
            function({"q4": q4, "odd": view})


def test_a_quantized_view_whose_quantizer_torch_broke_is_refused_naming_the_key() -> None:
    w = torch.quantize_per_channel(
        torch.randn(2, 3),
        torch.tensor([0.1, 0.2], dtype=torch.float64),
        torch.zeros(2).long(),
        0,
        torch.qint8,
    )
    broken = w.select(1, 1)  # torch 2.3-2.6: the channel axis no longer fits (it cannot read it)
    with pytest.raises(ValueError, match=r"key 'broken'.*quantizer does not fit"):
        compat.dedup_for_save({"w": w, "broken": broken})


def test_per_channel_zero_points_move_to_the_base_device_before_the_build() -> None:
    """restore_aliases moves a per-channel quantizer's zero points to the device of the view's
    base before torch builds the quantized view: zero points loaded on meta under a cpu base
    fail in that move (no data to copy), not in torch's constructor on the QuantizedMeta
    backend."""
    w = QUANTIZED_CASES["per_channel"]()["w"]
    to_save, metadata = compat.dedup_for_save({"w": w, "w_half": w[:2]})
    moved = {
        name: t.to("meta") if name.startswith("__qparams__/") and t.dtype == torch.int64 else t
        for name, t in to_save.items()
    }
    assert any(t.is_meta for t in moved.values())
    with pytest.raises(
        ValueError, match=r"torch cannot build it \(Cannot copy out of meta"
    ) as info:
        compat.restore_aliases(moved, metadata)
    assert "QuantizedMeta" not in str(info.value)


# === Identical readings: the quantizer is part of what is read ====================================

W = torch.linspace(-2, 2, 12).reshape(4, 3)

SCALES = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.double)

ZERO_POINTS = torch.tensor([0, 1, 2, 3])


def over(q: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor) -> torch.Tensor:
    """A per-channel quantized tensor reading ``q``'s bytes with its own quantizer."""
    out = torch._empty_per_channel_affine_quantized(
        [0], scales=scales, zero_points=zero_points, axis=0, dtype=q.dtype
    )
    return out.set_(q.untyped_storage(), 0, tuple(q.shape), tuple(q.stride()))


@pytest.mark.parametrize(
    ("scales", "zero_points", "identical"),
    [
        (SCALES, ZERO_POINTS, True),
        (SCALES * 2, ZERO_POINTS, False),
        (SCALES, ZERO_POINTS + 1, False),
    ],
    ids=["same-quantizer", "other-scales", "other-zero-points"],
)
def test_per_channel_readings_of_the_same_bytes(
    scales: torch.Tensor, zero_points: torch.Tensor, identical: bool
) -> None:
    q = torch.quantize_per_channel(W, SCALES, ZERO_POINTS, 0, torch.qint8)
    other = over(q, scales, zero_points)
    assert other.untyped_storage().data_ptr() == q.untyped_storage().data_ptr()
    assert torch.equal(other.int_repr(), q.int_repr())
    assert torch.equal(other.dequantize(), q.dequantize()) is identical
    sd = {"q": q, "other": other}
    assert compat.find_identical_tensors(sd) == ([frozenset(sd)] if identical else [])
    assert compat.find_overlapping_tensors(sd) == [frozenset(sd)]
