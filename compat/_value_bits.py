"""What torch keeps beside a tensor's geometry that changes the values it reads.

Two tensors with the same storage, offset, shape, strides and dtype can still read different
values; on every supported torch (2.3 and later) the differences are:

* the **conjugate bit** (``z.conj()`` of a complex tensor: a lazy view that negates the imaginary
  part on read) and the **negative bit** (``torch._neg_view``, and ``z.conj().imag``): a view
  with either bit reads its raw bytes transformed;
* a **quantizer** (``torch.quantize_per_tensor`` / ``quantize_per_channel``, and what
  ``torch.ao`` quantized modules put in their state dicts): the bytes are integers that read as
  ``(q - zero_point) * scale``, per tensor or per channel along an axis;
* a **ZeroTensor** (``torch._efficientzerotensor``): reads zeros and has no storage at all.

This module keys them for identity, describes them for a saved file, and re-applies them to a
rebuilt view, so that the view shares its base's storage again and reads exactly its own values.
Quantized tensors must never be reinterpreted with ``Tensor.view(dtype)``: on torch 2.3-2.6 that
crashes the interpreter; their bytes are only ever read through a uint8 view of the storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import torch

from compat import _features

__all__ = [
    "QUANT_STORAGE",
    "Bits",
    "Quantizer",
    "bits_of",
    "build_empty",
    "build_view",
    "value_key",
]

#: Quantized dtype -> the integer dtype its storage holds (sub-byte ones pack several per byte).
QUANT_STORAGE: Final[dict[torch.dtype, torch.dtype]] = {
    torch.quint8: torch.uint8,
    torch.qint8: torch.int8,
    torch.qint32: torch.int32,
    **{d: torch.uint8 for d in _features.SUB_BYTE_BITS},
}
#: The quantization schemes a quantized tensor can carry (the symmetric ones are observer-only).
PER_TENSOR: Final = "per_tensor_affine"
PER_CHANNEL: Final = frozenset({"per_channel_affine", "per_channel_affine_float_qparams"})


@dataclass(frozen=True)
class Quantizer:
    """A quantized tensor's parameters: per tensor (``scale``, ``zero_point``) or per channel
    (``axis`` and the ``scales`` / ``zero_points`` tensors, one entry per channel)."""

    scheme: str
    scale: float = 1.0
    zero_point: int = 0
    axis: int = 0
    scales: torch.Tensor | None = None
    zero_points: torch.Tensor | None = None

    @classmethod
    def of(cls, t: torch.Tensor) -> Quantizer:
        scheme = str(t.qscheme()).removeprefix("torch.")
        if scheme == PER_TENSOR:
            return cls(scheme, scale=float(t.q_scale()), zero_point=int(t.q_zero_point()))
        return cls(
            scheme,
            axis=int(t.q_per_channel_axis()),
            scales=t.q_per_channel_scales(),
            zero_points=t.q_per_channel_zero_points(),
        )

    def fits(self, shape: tuple[int, ...]) -> bool:
        """Whether a tensor of ``shape`` can carry this quantizer (torch can make views whose
        per-channel quantizer no longer fits them, e.g. ``q.select(d, i)`` for a dim ``d`` after
        the channel axis on torch 2.3-2.6; torch then fails to read them)."""
        if self.scales is None or self.zero_points is None:
            return True
        n = shape[self.axis] if 0 <= self.axis < len(shape) else -1
        return len(self.scales) == n == len(self.zero_points)

    def key(self) -> tuple[Any, ...]:
        """Exact and hashable: floats by their hex spelling, so NaN and -0.0 compare as bits."""
        if self.scales is None or self.zero_points is None:
            return (self.scheme, self.scale.hex(), self.zero_point)
        return (
            self.scheme,
            self.axis,
            tuple(float(s).hex() for s in self.scales.tolist()),
            tuple(self.zero_points.tolist()),
            self.zero_points.dtype,
        )


@dataclass(frozen=True)
class Bits:
    """Everything beside the geometry: the lazy bits, or a quantizer (never both on torch)."""

    conj: bool = False
    neg: bool = False
    quant: Quantizer | None = None

    @property
    def plain(self) -> bool:
        return not (self.conj or self.neg or self.quant is not None)


_PLAIN: Final = Bits()


def bits_of(t: torch.Tensor) -> Bits:
    """The bits of ``t`` (a shared plain instance when it has none)."""
    if t.is_quantized:
        return Bits(quant=Quantizer.of(t))
    conj, neg = bool(t.is_conj()), bool(t.is_neg())
    return Bits(conj, neg) if conj or neg else _PLAIN


def value_key(t: torch.Tensor) -> tuple[Any, ...]:
    """``()`` for a tensor that reads its bytes as its dtype, else a hashable key of its bits."""
    if t.is_quantized:
        return ("quant", *Quantizer.of(t).key())
    conj, neg = bool(t.is_conj()), bool(t.is_neg())
    return (conj, neg) if conj or neg else ()


def build_view(
    storage: torch.UntypedStorage,
    device: torch.device,
    offset: int,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    dtype: torch.dtype,
    bits: Bits,
) -> torch.Tensor:
    """A tensor over ``storage`` (``offset`` in elements) that reads as ``dtype`` with ``bits``."""
    return _with_bits(
        _allocate((0,), dtype, bits, device).set_(storage, offset, shape, stride), bits
    )


def build_empty(
    shape: tuple[int, ...], dtype: torch.dtype, bits: Bits, device: torch.device
) -> torch.Tensor:
    """A zero-element tensor of ``shape`` and ``dtype`` with ``bits``."""
    return _with_bits(_allocate(shape, dtype, bits, device), bits)


def _allocate(
    shape: tuple[int, ...], dtype: torch.dtype, bits: Bits, device: torch.device
) -> torch.Tensor:
    if bits.quant is None:
        return torch.empty(shape, dtype=dtype, device=device)
    return _empty_quantized(shape, dtype, bits.quant, device)


def _with_bits(t: torch.Tensor, bits: Bits) -> torch.Tensor:
    """``t`` with the lazy bits set (views: the storage stays shared)."""
    if bits.conj:
        t = t.conj()
    if bits.neg:
        t = _features.neg_view(t)
    return t


def _empty_quantized(
    shape: tuple[int, ...], dtype: torch.dtype, quant: Quantizer, device: torch.device
) -> torch.Tensor:
    # torch's own constructors for a quantized tensor of given parameters (every torch >= 1.3);
    # set_() then points it at existing storage without copying, which the public
    # _make_per_*_quantized_tensor functions do not (they copy).
    if quant.scales is None or quant.zero_points is None:
        return torch._empty_affine_quantized(
            shape, scale=quant.scale, zero_point=quant.zero_point, dtype=dtype, device=device
        )
    return torch._empty_per_channel_affine_quantized(
        shape,
        scales=quant.scales.to(device),
        zero_points=quant.zero_points.to(device),
        axis=quant.axis,
        dtype=dtype,
        device=device,
    )
