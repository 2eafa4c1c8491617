"""An independent oracle for compat.sharing: explicit byte sets, compared pairwise.

Nothing here imports compat or reuses its reasoning. Which storage a tensor lives in comes from the
caller (the strategy records each value's provenance, or a real address is used); the bytes it
touches are enumerated one by one from shape, strides, storage offset and itemsize (a packed
sub-byte quantized tensor reads ``ceil(numel * bits / 8)`` bytes from its offset); overlap is a
non-empty set intersection, and groups are union-find over all pairs. Values are judged twice: as
the raw bytes in memory, read straight from the storage, and as what the tensor reads (conjugate
and negative bits resolved, a quantizer's parameters). Meant for small tensors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

# Where a tensor's storage byte 0 lies: (a storage identity, the byte address of byte 0 in it).
Origin = tuple[object, int]
# torch packs 8 // bits elements of these dtypes per byte.
SUB_BYTE = {getattr(torch, name): bits for name, bits in (("quint4x2", 4), ("quint2x4", 2))}


def element_starts(t: torch.Tensor) -> list[int]:
    """Byte offset from storage start of every element, in logical (row-major) order."""
    e = t.element_size()
    base = t.storage_offset()
    ranges = [range(n) for n in t.shape]
    strides = t.stride()
    return [
        (base + sum(k * s for k, s in zip(index, strides, strict=True))) * e
        for index in itertools.product(*ranges)
    ]


def has_memory(t: torch.Tensor) -> bool:
    """A tensor with elements read from memory (a ZeroTensor reads zeros from none)."""
    return bool(t.numel()) and not t._is_zerotensor()


def byte_offsets(t: torch.Tensor) -> list[int]:
    """Byte offset from storage start of every byte the tensor reads, in logical order."""
    if t._is_zerotensor():  # reads zeros from no memory at all
        return []
    bits = SUB_BYTE.get(t.dtype)
    if bits is not None:
        first = t.storage_offset()
        return list(range(first, first + -(-t.numel() * bits // 8))) if t.numel() else []
    e = t.element_size()
    return [first + j for first in element_starts(t) for j in range(e)]


def byte_set(t: torch.Tensor, origin: Origin) -> frozenset[tuple[object, int]]:
    """Every byte the tensor can read, as (storage identity, address)."""
    space, start = origin
    return frozenset((space, start + b) for b in byte_offsets(t))


def reading(t: torch.Tensor) -> tuple[Any, ...]:
    """How a tensor reads its bytes: its conjugate and negative bits, or its quantizer."""
    if not t.is_quantized:
        return ("bits", bool(t.is_conj()), bool(t.is_neg()))
    scheme = t.qscheme()
    if scheme == torch.per_tensor_affine:
        return ("quant", scheme, float(t.q_scale()).hex(), int(t.q_zero_point()))
    scales = [float(v).hex() for v in t.q_per_channel_scales().tolist()]
    points = t.q_per_channel_zero_points()
    return ("quant", scheme, t.q_per_channel_axis(), scales, points.dtype, points.tolist())


def _groups(names: list[str], related: Iterable[tuple[str, str]]) -> set[frozenset[str]]:
    parent = {n: n for n in names}

    def find(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for a, b in related:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    members: dict[str, set[str]] = {}
    for n in names:
        members.setdefault(find(n), set()).add(n)
    return {frozenset(m) for m in members.values() if len(m) > 1}


def overlapping_groups(
    tensors: Mapping[str, torch.Tensor], origins: Mapping[str, Origin]
) -> set[frozenset[str]]:
    """Components of "the byte sets intersect", over every pair."""
    sets = {name: byte_set(t, origins[name]) for name, t in tensors.items()}
    names = list(tensors)
    return _groups(
        names, ((a, b) for a, b in itertools.combinations(names, 2) if sets[a] & sets[b])
    )


def shared_groups(
    tensors: Mapping[str, torch.Tensor], origins: Mapping[str, Origin]
) -> set[frozenset[str]]:
    """Components of "same storage", ignoring tensors with no elements or no memory at all."""
    names = [n for n, t in tensors.items() if has_memory(t)]
    return _groups(
        names,
        ((a, b) for a, b in itertools.combinations(names, 2) if origins[a][0] == origins[b][0]),
    )


def identical_groups(
    tensors: Mapping[str, torch.Tensor], origins: Mapping[str, Origin]
) -> set[frozenset[str]]:
    """Same storage, dtype and shape, every element starting at the same byte, read the same way."""
    names = [n for n, t in tensors.items() if has_memory(t)]

    def same(a: str, b: str) -> bool:
        ta, tb = tensors[a], tensors[b]
        if origins[a][0] != origins[b][0] or ta.dtype != tb.dtype or ta.shape != tb.shape:
            return False
        if reading(ta) != reading(tb):
            return False
        shift_a, shift_b = origins[a][1], origins[b][1]
        return [shift_a + x for x in element_starts(ta)] == [
            shift_b + x for x in element_starts(tb)
        ]

    return _groups(names, ((a, b) for a, b in itertools.combinations(names, 2) if same(a, b)))


def address_origins(tensors: Mapping[str, torch.Tensor]) -> dict[str, Origin]:
    """Origins from real addresses (tensors with data only): one space per device."""
    out: dict[str, Origin] = {}
    for name, t in tensors.items():
        start = t.data_ptr() - t.storage_offset() * t.element_size() if t.numel() else 0
        out[name] = ((t.device.type, t.device.index), start)
    return out


def raw_bytes(t: torch.Tensor) -> bytes:
    """The bytes the tensor reads, in logical order, exactly as stored (bits and quantizers are
    ignored: this is memory, read straight from the storage). A ZeroTensor reads zero bytes."""
    if t._is_zerotensor():
        return bytes(t.numel() * t.element_size())
    st = t.untyped_storage()
    whole = torch.empty(0, dtype=torch.uint8, device=st.device).set_(st, 0, (st.nbytes(),), (1,))
    memory = whole.cpu().numpy()
    offsets = np.asarray(byte_offsets(t), dtype=np.int64)
    return bytes(memory[offsets].tobytes()) if offsets.size else b""


def values(t: torch.Tensor) -> tuple[Any, ...]:
    """What the tensor reads: resolved values as bytes, with the quantizer that maps them."""
    if t.is_quantized:
        return (t.dtype, tuple(t.shape), reading(t), raw_bytes(t))
    if t._is_zerotensor():
        return (t.dtype, tuple(t.shape), raw_bytes(t))
    resolved = t.detach().resolve_conj().resolve_neg()
    if resolved.is_conj() or resolved.is_neg():  # pragma: no cover - torch resolves both
        raise AssertionError("resolve_conj/resolve_neg left a bit set")
    return (t.dtype, tuple(t.shape), raw_bytes(resolved))


def bytes_below(t: torch.Tensor, limit: int) -> int:
    """The bytes a tensor reads below byte ``limit`` of its storage, as a bitmask (bit ``p`` set:
    byte ``p`` is read), for a tensor of any number of elements (an expanded or re-read view of
    2**60 elements): the reachable offsets are bounded sums, built dim by dim as shifted copies
    of a bitmask cut at ``limit``, never element by element. Not for sub-byte quantized tensors."""
    e = t.element_size()
    first = t.storage_offset() * e
    room = limit - first
    if room <= 0 or not t.numel():
        return 0
    cut = (1 << room) - 1

    def steps(reach: int, stride: int, n: int) -> int:
        """``reach`` shifted by k * stride for every k < n (by halving n: log n shifts)."""
        if n == 1 or not stride:
            return reach
        half = steps(reach, stride, n // 2)
        both = (half | (half << (n // 2 * stride))) & cut
        return (both | (reach << ((n - 1) * stride))) & cut if n % 2 else both

    reach = 1  # offset 0 from the first element's first byte
    for n, s in zip(t.shape, t.stride(), strict=True):
        reach = steps(reach, s * e, n)
    reach = steps(reach, 1, e)  # the element's own bytes
    return reach << first
