"""``compat.find_identical_tensors`` compares how the same bytes are read, quantizer included.

Two per-channel quantized tensors over the same bytes, with the same geometry, read different
values when their scales (or zero points) differ, so they are not identical; with equal ones they
are. A per-channel quantizer keyed as if it were per-tensor fails here.
"""

from __future__ import annotations

import pytest
import torch

import compat

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
