"""An independent oracle for compat.sharing: explicit byte sets, compared pairwise.

Nothing here imports compat or reuses its reasoning. Which storage a tensor lives in comes from the
caller (the strategy records each value's provenance, or a real address is used); the bytes it
touches are enumerated one by one from shape, strides, storage offset and itemsize; overlap is a
non-empty set intersection, and groups are union-find over all pairs. Meant for small tensors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import torch

# Where a tensor's storage byte 0 lies: (a storage identity, the byte address of byte 0 in it).
Origin = tuple[object, int]


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


def byte_set(t: torch.Tensor, origin: Origin) -> frozenset[tuple[object, int]]:
    """Every byte the tensor can read, as (storage identity, address)."""
    space, start = origin
    e = t.element_size()
    return frozenset((space, start + first + j) for first in element_starts(t) for j in range(e))


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
    """Components of "same storage", ignoring tensors with no elements."""
    names = [n for n, t in tensors.items() if t.numel()]
    return _groups(
        names,
        ((a, b) for a, b in itertools.combinations(names, 2) if origins[a][0] == origins[b][0]),
    )


def identical_groups(
    tensors: Mapping[str, torch.Tensor], origins: Mapping[str, Origin]
) -> set[frozenset[str]]:
    """Same storage, dtype and shape, and every element starts at the same byte."""
    names = [n for n, t in tensors.items() if t.numel()]

    def same(a: str, b: str) -> bool:
        ta, tb = tensors[a], tensors[b]
        if origins[a][0] != origins[b][0] or ta.dtype != tb.dtype or ta.shape != tb.shape:
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
    """The tensor's bytes in logical order, exactly as stored (no value conversion)."""
    t = t.detach().cpu()
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    if width is not None:
        return bytes(t.view(width).numpy().tobytes())  # numpy reads any strides, C order
    else:  # 16-byte elements: read each element through an as_strided byte view of the storage
        storage = torch.empty(0, dtype=torch.uint8).set_(
            t.untyped_storage(), 0, (t.untyped_storage().nbytes(),), (1,)
        )
        return bytes(
            bytearray(
                b for first in element_starts(t) for b in storage[first : first + 16].tolist()
            )
        )
