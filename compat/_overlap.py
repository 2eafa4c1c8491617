"""Exact byte overlap among the leaves of one storage group, near-linear on view families.

A leaf's footprint is ``{lo + Σ k_i·b_i + j : 0 <= k_i < n_i, 0 <= j < e}`` (``lo`` its first
byte, ``b_i`` its byte strides, ``e`` its itemsize); a packed sub-byte quantized tensor (quint4x2,
quint2x4) reads ``ceil(numel·bits / 8)`` contiguous bytes from ``lo``. Its *extent* runs from its
first byte to its last. Components of "the footprints share a byte" are found in four steps:

1. leaves with the same footprint (same ``lo``, sizes and byte strides, size-1 and stride-0 dims
   dropped) are merged at once (ties, dtype views of one width);
2. *dense* leaves (footprint = extent: contiguous, transposed, expanded ones) are merged through
   one interval sweep of their extents (:func:`compat._intervals.runs`);
3. non-dense leaves are grouped into *families* of equal footprint shape (columns ``w[:, i]``,
   strided windows ``x[i:i+400:100]``, batched slices ``x[:, i]``). Two members overlap iff the
   difference of their starts lies in ``D = S - S`` (S the shape's footprint); the part of D that
   can occur (within the spread of the family's starts) is enumerated once, as a few intervals,
   and each member looks its partners up: start by start in a hash for a narrow interval (O(1)
   each, only differences the starts' common step allows: columns, windows), by bisection among
   the sorted starts for a wide one; exact. A family whose D has too many pieces
   (:data:`_MAX_PIECES`) is left to step 4;
4. every remaining pair with intersecting extents (across families, against the dense runs, or
   inside such a family) is decided by NumPy's exact bounded-Diophantine solver
   (``numpy.shares_memory`` with ``max_work``), run on address-only NumPy arrays that describe
   the two geometries below the lower of their ends, by the dims that move through memory only,
   with the dims that re-read one span merged (size-1 and stride-0 dims add no byte, so a view
   expanded or re-read to any size gets the exact answer; no tensor memory is read or
   allocated). If the solver gives up, or a geometry is still too big for NumPy to describe,
   the pair is taken to overlap: disjointness is never claimed without proof.

NumPy is imported only when step 4 meets a pair its shortcuts cannot decide.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from math import gcd, prod
from operator import attrgetter
from typing import Any, Final

import torch

from compat import _features
from compat._intervals import UnionFind, runs

__all__ = ["Geom", "Shape", "exact_overlap", "geometries", "overlap_components"]

# The exact test's work cap per pair (numpy's ``max_work``): candidate solutions it may visit before
# giving up. Realistic slicing needs at most a handful; numpy's own adversarial example gives up at
# 1e6 within 0.02 s. Giving up only makes the answer "overlap".
_MAX_WORK: Final = 1 << 20
# A family's difference set is used when it is at most this many intervals (found by visiting at
# most _MAX_NODES partial sums); otherwise its pairs go to the exact test.
_MAX_PIECES: Final = 64
_MAX_NODES: Final = 4096
# What NumPy can describe as an array of bytes: its fewest supported dims (NumPy 1.x: 32) and
# at most 2**63 - 1 bytes (its ``npy_intp``).
_NUMPY_DIMS: Final = 32
_NUMPY_BYTES: Final = 2**63 - 1

Key = tuple[Any, ...]


class Shape:
    """What a footprint looks like from its start: shared by every leaf of equal sizes, strides
    and dtype (computed once per distinct triple)."""

    __slots__ = (
        "bstrides",
        "contiguous",
        "dense",
        "dtype",
        "extent",
        "ident",
        "injective",
        "key",
        "moving",
        "sizes",
        "strides",
    )

    def __init__(
        self, sizes: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype
    ) -> None:
        e = dtype.itemsize
        self.sizes = sizes
        self.strides = strides
        self.dtype = dtype
        self.bstrides = bstrides = tuple(s * e for s in strides)
        # Strides of size-1 dims address nothing: normalised for identity.
        self.ident: Key = (
            dtype,
            sizes,
            tuple(0 if n == 1 else s for n, s in zip(sizes, strides, strict=True)),
        )
        step = 1
        contiguous = True
        for n, st in zip(reversed(sizes), reversed(strides), strict=True):
            if n != 1 and st != step:
                contiguous = False
                break
            step *= n
        self.contiguous = contiguous
        bits = _features.SUB_BYTE_BITS.get(dtype)
        if bits is not None:
            numel = 1
            for n in sizes:
                numel *= n
            self.extent = -(-numel * bits // 8)  # packed: ceil(numel * bits / 8) bytes
            self.dense = self.injective = True
            self.key: Key = (self.extent,)
            self.moving: tuple[tuple[int, int], ...] = ()
            return
        # Dims that move through memory, by stride: size-1 and stride-0 dims address nothing new.
        dims = sorted((b, n) for n, b in zip(sizes, bstrides, strict=True) if n > 1 and b)
        self.moving = tuple(dims)  # (byte stride, size): the footprint is theirs alone
        self.extent = sum((n - 1) * b for b, n in dims) + e
        # Dense (footprint == extent) iff the moving dims tile memory with no gap, smallest first.
        # Injective (no byte touched twice) is the weaker, sufficient check "each stride exceeds
        # the span of the smaller ones", plus no stride-0 dim; used only to bound copies.
        expected = e
        dense = True
        reach = e - 1
        injective = all(b or n == 1 for n, b in zip(sizes, bstrides, strict=True))
        for b, n in dims:
            if b != expected:
                dense = False
            expected *= n
            if b <= reach:
                injective = False
            reach += (n - 1) * b
        self.dense = dense
        self.injective = injective
        self.key = (self.extent,) if dense else (e, *dims)


class Geom:
    """One non-empty leaf's footprint in its storage group's coordinates (bytes)."""

    __slots__ = ("hi", "leaf", "lo", "shape", "tensor")

    def __init__(self, leaf: int, tensor: torch.Tensor, lo: int, shape: Shape) -> None:
        self.leaf = leaf
        self.tensor = tensor
        self.lo = lo
        self.hi = lo + shape.extent
        self.shape = shape

    def identity(self) -> Key:
        """Same start byte, dtype, shape and strides (size-1 dims normalised)."""
        return (self.lo, self.shape.ident)


def geometries(
    leaves: Iterable[int],
    tensors: list[torch.Tensor],
    origin: Callable[[int], int],
    where: Callable[[int], str],
) -> list[Geom]:
    """A :class:`Geom` for every non-empty leaf (``origin(leaf)``: its storage's first byte)."""
    shapes: dict[Key, Shape] = {}
    out: list[Geom] = []
    sub_byte = _features.SUB_BYTE_BITS
    for leaf in leaves:
        t = tensors[leaf]
        if not t.numel():
            continue
        dtype = t.dtype
        sizes = tuple(t.shape)
        strides = tuple(t.stride())
        key = (sizes, strides, dtype)
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = Shape(sizes, strides, dtype)  # type: ignore[arg-type]
            if dtype in sub_byte and not shape.contiguous:
                raise TypeError(
                    f"key {where(leaf)!r} is a non-contiguous {dtype} view: torch does not "
                    "address the packed elements of a sub-byte quantized tensor through strides "
                    "(its own reads of such a view are wrong); accepted: contiguous sub-byte "
                    "quantized tensors"
                )
        out.append(Geom(leaf, t, origin(leaf) + int(t.storage_offset()) * dtype.itemsize, shape))
    return out


# --- the exact test ------------------------------------------------------------------------------


class _AddressOnly:
    """An ``__array_interface__`` of bytes at an address, only for NumPy's overlap solver."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        self.__array_interface__ = {
            "version": 3,
            "typestr": "|u1",
            "shape": shape,
            "strides": strides,
            "data": (address, True),
        }


def _solver_shape(g: Geom, bound: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Sizes and byte strides (largest first) of a NumPy array whose bytes below ``bound`` are
    exactly ``g``'s footprint's bytes below ``bound``, for NumPy's solver; None when NumPy cannot
    describe such an array.

    Only the dims that move through memory count (size-1 and stride-0 dims add no byte); a dim
    is cut to the steps that stay below ``bound`` (every stride is >= 0, so a later step only
    adds bytes above it); and dims that re-read a span another dim covers are merged: when ``b``
    divides ``b'`` and ``b' / b <= n``, the sums ``{k·b : k < n} + {k'·b' : k' < n'}`` are exactly
    ``{t·b : t < n + (b' / b)(n' - 1)}`` (the element's own bytes are the dim ``(1, itemsize)``).
    So the array's size never grows with an expanded dim nor with dims that re-read one span
    (``expand(2**60, …)``, ``as_strided((2**15,) * 4, (1,) * 4)``: free in torch, while NumPy
    refuses an array of more than 2**63 - 1 bytes). What is still too big for NumPy, or has more
    dims than it takes (32), is None: the caller then takes the pair to overlap."""
    shape = g.shape
    room = bound - g.lo  # the bytes from g's start that matter
    if shape.dense:  # its footprint is its extent: one run of bytes
        return (min(shape.extent, room),), (1,)
    dims = sorted(
        (b, min(n, (room - 1) // b + 1)) for b, n in [(1, shape.dtype.itemsize), *shape.moving]
    )
    i = 0  # dims[:i] can absorb no later dim: their strides and sizes no longer change
    while i < len(dims):
        b, n = dims[i]
        for j in range(i + 1, len(dims)):
            b2, n2 = dims[j]
            if b2 % b == 0 and b2 // b <= n:  # dim j continues or re-reads dim i's span
                dims[i] = (b, n + b2 // b * (n2 - 1))
                del dims[j]
                break  # dims[i] grew: it may absorb more
        else:
            i += 1
    if len(dims) > _NUMPY_DIMS or prod(n for _, n in dims) > _NUMPY_BYTES:
        return None
    dims.reverse()
    return tuple(n for _, n in dims), tuple(b for b, _ in dims)


def _shares(a: Geom, b: Geom | tuple[int, int]) -> bool:
    """Whether ``a``'s footprint shares a byte with ``b``'s (a leaf, or a run ``(lo, hi)`` of
    bytes), by NumPy's exact solver; True when it gives up or cannot describe them."""
    lo_b, hi_b = (b.lo, b.hi) if isinstance(b, Geom) else b
    bound = min(a.hi, hi_b)  # every shared byte lies below both ends
    shape_a = _solver_shape(a, bound)
    shape_b = _solver_shape(b, bound) if isinstance(b, Geom) else ((bound - lo_b,), (1,))
    if shape_a is None or shape_b is None:  # NumPy cannot describe one of them: not disproved
        return True
    import numpy as np

    # Addresses relative to the pair, offset from 0: NumPy never reads through these arrays.
    origin = min(a.lo, lo_b) - 4096
    arr_a = np.asarray(_AddressOnly(a.lo - origin, *shape_a))
    arr_b = np.asarray(_AddressOnly(lo_b - origin, *shape_b))
    too_hard = getattr(np, "exceptions", np).TooHardError  # np.exceptions: NumPy >= 1.25
    shares_memory: Any = np.shares_memory  # its stubs only admit max_work in {-1, 0}
    try:
        return bool(shares_memory(arr_a, arr_b, max_work=_MAX_WORK))
    except (too_hard, OverflowError):
        return True


def exact_overlap(a: Geom, b: Geom) -> bool:
    """Whether two footprints share a byte; True when NumPy's solver gives up (never a "no")."""
    if a.hi <= b.lo or b.hi <= a.lo:
        return False
    # Every non-empty footprint holds its first and its last byte, and a dense one every byte of
    # its extent: enough to prove the common overlaps (a transpose, a view inside its parent).
    if a.lo == b.lo or a.hi == b.hi:
        return True
    for x, y in ((a, b), (b, a)):
        if x.shape.dense and (x.lo <= y.lo < x.hi or x.lo < y.hi <= x.hi):
            return True
    key_a, key_b = (a.lo, a.shape.key), (b.lo, b.shape.key)
    if key_a > key_b:
        a, b = b, a  # a canonical order, so the answer cannot depend on the mapping's order
    return _shares(a, b)


def _touches(g: Geom, lo: int, hi: int) -> bool:
    """Whether ``g``'s footprint has a byte in ``[lo, hi)``."""
    if g.hi <= lo or hi <= g.lo:
        return False
    if lo <= g.lo < hi or lo < g.hi <= hi or g.shape.dense:
        return True
    return _shares(g, (lo, hi))


# --- families ------------------------------------------------------------------------------------


def _difference_pieces(shape_key: Key, window: int) -> list[tuple[int, int]] | None:
    """The positive start differences in ``[1, window]`` at which two footprints of this shape
    share a byte, as sorted disjoint closed intervals; None if there are too many pieces.

    With ``S`` the footprint of a shape at 0, two translates overlap iff their difference lies in
    ``S - S = {Σ c_i·b_i + t : |c_i| <= n_i - 1, |t| <= r}``, where the innermost dims that tile
    memory contiguously form one block of ``r + 1`` bytes. The sums are enumerated largest stride
    first, dropping any partial sum the remaining dims cannot bring back into the window.
    """
    e, *dims = shape_key
    dims = sorted(dims)  # (byte stride, size), smallest stride first
    block = e
    while dims and dims[0][0] == block:  # contiguous innermost dims: one block of bytes
        b, n = dims.pop(0)
        block = b * n
    r = block - 1
    outer = dims[::-1]
    reach = [0] * (len(outer) + 1)
    for i in range(len(outer) - 1, -1, -1):
        b, n = outer[i]
        reach[i] = reach[i + 1] + (n - 1) * b
    pieces: list[tuple[int, int]] = []
    nodes = 0
    stack = [(0, 0)]
    while stack:
        value, depth = stack.pop()
        if depth == len(outer):
            lo, hi = max(1, value - r), min(window, value + r)
            if lo <= hi:
                pieces.append((lo, hi))
            continue
        # Only the multiples c of this stride after which the remaining dims can still land in
        # [1, window]: -(-x // b) is ceil(x / b).
        b, n = outer[depth]
        rest = reach[depth + 1] + r
        first = max(1 - n, -(-(1 - rest - value) // b))
        last = min(n - 1, (window + rest - value) // b)
        nodes += max(0, last - first + 1)
        if nodes > _MAX_NODES:
            return None
        stack.extend((value + c * b, depth + 1) for c in range(first, last + 1))
    pieces.sort()
    merged: list[tuple[int, int]] = []
    for lo, hi in pieces:
        if merged and lo <= merged[-1][1] + 1:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged if len(merged) <= _MAX_PIECES else None


# A piece this narrow (in bytes) is looked up start by start in a hash; a wider one by bisection.
_NARROW: Final = 16


def _family_components(members: list[Geom], uf: UnionFind) -> bool:
    """Union every overlapping pair of one family (distinct starts); False if left undecided."""
    starts = [g.lo for g in members]
    pieces = _difference_pieces(members[0].shape.key, max(starts) - min(starts))
    if pieces is None:
        return False
    union = uf.union
    narrow = [p for p in pieces if p[1] - p[0] < _NARROW]
    if narrow:  # columns, strided windows: a few exact differences, O(1) each
        at = {g.lo: g.leaf for g in members}
        step = 0  # every start difference is a multiple of step: no other difference occurs
        for lo in starts:
            step = gcd(step, lo - starts[0])
        deltas = [d for lo, hi in narrow for d in range(lo, hi + 1) if step and d % step == 0]
        for g in members:
            lo, leaf = g.lo, g.leaf
            for d in deltas:
                other = at.get(lo + d)
                if other is not None:
                    union(leaf, other)
    wide = [p for p in pieces if p[1] - p[0] >= _NARROW]
    if not wide:
        return True
    # Every member overlapping ``a`` by a wide piece is a contiguous index range of the sorted
    # starts. ``a`` joins the range's first member, and the range is chained consecutively;
    # ``chained`` skips links already made, so each member is chained at most once overall.
    members = sorted(members, key=attrgetter("lo"))
    starts = [g.lo for g in members]
    chained = list(range(len(members) + 1))  # chained[i]: first j >= i not yet linked to j + 1

    def unchained(i: int) -> int:
        root = i
        while chained[root] != root:
            root = chained[root]
        while chained[i] != root:
            chained[i], i = root, chained[i]
        return root

    for index, g in enumerate(members):
        lo = g.lo
        for d_lo, d_hi in wide:
            first = bisect_left(starts, lo + d_lo, index + 1)
            last = bisect_right(starts, lo + d_hi, first) - 1
            if first > last:
                continue
            union(g.leaf, members[first].leaf)
            j = unchained(first)
            while j < last:
                union(members[j].leaf, members[j + 1].leaf)
                chained[j] = j + 1
                j = unchained(j + 1)
    return True


# --- components ----------------------------------------------------------------------------------


def overlap_components(geoms: list[Geom], uf: UnionFind) -> None:
    """Union (in ``uf``, over leaf indices) every pair of ``geoms`` whose footprints share a byte.

    ``geoms`` are the non-empty leaves of one storage group. Deterministic: the unions made do
    not depend on the order of ``geoms``.
    """
    reps: dict[Key, Geom] = {}
    dense: list[Geom] = []
    families: dict[Key, list[Geom]] = {}
    for g in geoms:
        if g.shape.dense:  # equal dense footprints meet in the sweep below
            dense.append(g)
            continue
        ident = (g.lo, g.shape.key)
        first = reps.get(ident)
        if first is not None:
            uf.union(first.leaf, g.leaf)
        else:
            reps[ident] = g
            families.setdefault(g.shape.key, []).append(g)
    # Dense leaves: each chained run of extents is one component covering [run_lo, run_hi).
    dense_runs: list[tuple[int, int, int]] = []
    if dense:
        los = [g.lo for g in dense]
        his = [g.hi for g in dense]
        order = sorted(range(len(dense)), key=lambda i: (los[i], his[i]))
        chained = runs(los, his, order)
        for run in chained:
            leaf = dense[run[0]].leaf
            for i in run[1:]:
                uf.union(leaf, dense[i].leaf)
        if families:  # the runs as byte intervals, lone extents included, by start
            alone = set(order).difference(i for run in chained for i in run)
            dense_runs = [
                (los[run[0]], max(his[i] for i in run), dense[run[0]].leaf) for run in chained
            ]
            dense_runs += [(los[i], his[i], dense[i].leaf) for i in alone]
            dense_runs.sort()
    if not families:
        return
    decided: set[Key] = set()
    for key, members in families.items():
        if len(members) > 1 and _family_components(members, uf):
            decided.add(key)
    others = [g for members in families.values() for g in members]
    find = uf.find
    # Non-dense against the dense runs: each run is one component and one interval of bytes.
    if dense_runs:
        run_los = [lo for lo, _, _ in dense_runs]
        for g in others:
            i = max(0, bisect_right(run_los, g.lo) - 1)
            while i < len(dense_runs) and dense_runs[i][0] < g.hi:
                lo, hi, leaf = dense_runs[i]
                if find(g.leaf) != find(leaf) and _touches(g, lo, hi):
                    uf.union(g.leaf, leaf)
                i += 1
    # Non-dense pairs not decided by a family: a sweep with one active list per family.
    if len(others) < 2 or (len(families) == 1 and decided):
        return
    others.sort(key=lambda g: (g.lo, g.shape.key))
    active: dict[Key, list[Geom]] = {}
    for g in others:
        lo = g.lo
        for key, live in active.items():
            if key == g.shape.key and key in decided:
                continue
            live[:] = [x for x in live if x.hi > lo]
            for x in live:
                if find(x.leaf) != find(g.leaf) and exact_overlap(x, g):
                    uf.union(x.leaf, g.leaf)
        active.setdefault(g.shape.key, []).append(g)
