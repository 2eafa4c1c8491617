"""The decision paths of compat._overlap, pinned case by case against byte sets.

- :func:`compat._overlap.exact_overlap` on explicit pairs of views (disjoint and touching
  extents, a shared first or last byte, a dense view holding the other's first or last byte, a
  dense view inside the other's gap, interleaved and page-apart windows, mixed element sizes,
  size-1 dims with odd strides, stride-0 dims), in both argument orders, judged by
  ``tests/common/oracle.py``;
- :func:`compat._overlap._difference_pieces`: its two budgets, the partial sums visited
  (``_MAX_NODES``, counted by hand below) and the pieces returned (``_MAX_PIECES``), at and just
  past each bound;
- view families decided through their difference pieces (narrow pieces by hash, wide ones by
  bisection and chaining, a piece exactly ``_NARROW`` wide, a family with too many pieces left to
  the exact solver), through :func:`compat.find_overlapping_tensors` against the oracle, and
  :func:`compat._overlap._family_components` directly on many deterministic start sets against
  brute-force byte sets.
"""

from __future__ import annotations

import itertools
import random
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pytest
import torch

import compat
from compat import _overlap
from compat._intervals import UnionFind
from tests.common import oracle

View = tuple[tuple[int, ...], tuple[int, ...], int]  # sizes, strides (elements), storage offset


def _views(base: torch.Tensor, specs: list[View]) -> list[torch.Tensor]:
    return [base.as_strided(sizes, strides, offset) for sizes, strides, offset in specs]


def _geoms(tensors: list[torch.Tensor]) -> list[_overlap.Geom]:
    return _overlap.geometries(range(len(tensors)), tensors, lambda leaf: 0, str)


def _truth(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(oracle.byte_set(a, (0, 0)) & oracle.byte_set(b, (0, 0)))


@contextmanager
def _no_solver() -> Iterator[None]:
    def refuse(*args: object) -> bool:
        raise AssertionError("the exact solver was asked about a pair")

    with mock.patch.object(_overlap, "_shares", refuse):
        yield


# --- exact_overlap -------------------------------------------------------------------------------

U8 = torch.uint8
PAIRS: list[tuple[str, torch.dtype, View, torch.dtype, View, bool]] = [
    ("disjoint dense", U8, ((16,), (1,), 0), U8, ((16,), (1,), 32), False),
    ("touching dense", U8, ((16,), (1,), 0), U8, ((16,), (1,), 16), False),
    ("touching strided", U8, ((2, 4), (8, 1), 0), U8, ((3,), (5,), 12), False),
    ("same first byte", U8, ((4,), (1,), 0), U8, ((2, 2), (8, 1), 0), True),
    ("same last byte", U8, ((4,), (1,), 6), U8, ((2, 2), (8, 1), 0), True),
    ("strided, same first byte", U8, ((3,), (7,), 2), U8, ((2,), (11,), 2), True),
    ("dense holds the first byte", U8, ((16,), (1,), 0), U8, ((3, 2), (12, 1), 8), True),
    ("dense holds the last byte", U8, ((16,), (1,), 20), U8, ((3, 2), (12, 1), 0), True),
    ("dense inside a gap", U8, ((2, 4), (16, 1), 0), U8, ((8,), (1,), 4), False),
    ("dense across a row", U8, ((2, 4), (16, 1), 0), U8, ((4,), (1,), 14), True),
    ("dense spans a row", U8, ((3, 2), (16, 1), 0), U8, ((6,), (1,), 15), True),
    ("interleaved", U8, ((4,), (2,), 0), U8, ((4,), (2,), 1), False),
    ("interleaved rows", U8, ((3, 2), (6, 1), 0), U8, ((3, 2), (6, 1), 2), False),
    ("windows, one shared byte", U8, ((3, 2), (6, 1), 0), U8, ((3, 2), (6, 1), 5), True),
    ("a page apart", U8, ((2, 4), (8192, 1), 0), U8, ((2, 4), (8192, 1), 4096), False),
    ("a page apart, shared", U8, ((2, 4), (8192, 1), 0), U8, ((2, 8), (4094, 1), 4096), True),
    ("size-1 odd strides", U8, ((1, 4), (7777, 2), 0), U8, ((4, 1), (2, 999), 1), False),
    ("stride-0 dim", U8, ((3, 4), (0, 2), 0), U8, ((4,), (2,), 3), False),
    ("stride-0 dim, shared", U8, ((3, 4), (0, 3), 0), U8, ((2,), (4,), 2), True),
    ("float32 over bytes", torch.float32, ((4,), (3,), 1), U8, ((5,), (6,), 9), False),
    ("float32 over bytes, shared", torch.float32, ((4,), (3,), 1), U8, ((5,), (6,), 10), True),
    ("int16 and float64", torch.int16, ((5,), (7,), 1), torch.float64, ((2,), (3,), 1), False),
    (
        "int16 and float64, shared",
        torch.int16,
        ((5,), (7,), 1),
        torch.float64,
        ((3,), (2,), 1),
        True,
    ),
]


def _pair(dtype_a: torch.dtype, a: View, dtype_b: torch.dtype, b: View) -> list[torch.Tensor]:
    storage = torch.zeros(3 * 8192, dtype=U8)
    return [
        _views(storage.view(dtype_a), [a])[0],
        _views(storage.view(dtype_b), [b])[0],
    ]


@pytest.mark.parametrize(
    ("dtype_a", "a", "dtype_b", "b", "expected"),
    [case[1:] for case in PAIRS],
    ids=[case[0] for case in PAIRS],
)
def test_exact_overlap_matches_the_byte_sets(
    dtype_a: torch.dtype, a: View, dtype_b: torch.dtype, b: View, expected: bool
) -> None:
    ta, tb = _pair(dtype_a, a, dtype_b, b)
    assert _truth(ta, tb) is expected  # the hand-computed answer, confirmed byte by byte
    ga, gb = _geoms([ta, tb])
    assert _overlap.exact_overlap(ga, gb) is expected
    assert _overlap.exact_overlap(gb, ga) is expected


def test_the_exact_solver_runs_on_a_numpy_without_numpy_exceptions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NumPy < 1.25 has TooHardError at its top level and no ``numpy.exceptions`` (the matrix
    installs NumPy >= 1.26, so that namespace is recreated here)."""
    np = pytest.importorskip("numpy")
    old_numpy = types.ModuleType("numpy")  # what _shares uses, laid out as NumPy 1.24 had it
    old_numpy.asarray = np.asarray  # type: ignore[attr-defined]
    old_numpy.shares_memory = np.shares_memory  # type: ignore[attr-defined]
    old_numpy.TooHardError = np.exceptions.TooHardError  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "numpy", old_numpy)
    storage = torch.zeros(64, dtype=U8)
    evens, odds = storage[0::2], storage[1::2]  # interleaved: only the solver can say no
    ga, gb = _geoms([evens, odds])
    assert _overlap.exact_overlap(ga, gb) is False
    assert _overlap.exact_overlap(ga, _geoms([storage[2::4]])[0]) is True


def test_every_order_of_a_pair_gives_one_answer() -> None:
    storage = torch.zeros(512, dtype=U8)
    specs: list[View] = [
        ((4,), (2,), 0),
        ((4,), (2,), 1),
        ((3, 2), (6, 1), 2),
        ((2, 4), (16, 1), 3),
        ((8,), (1,), 4),
        ((2, 3), (9, 2), 5),
        ((5,), (7,), 6),
        ((2, 2), (20, 1), 30),
    ]
    tensors = _views(storage, specs)
    geoms = _geoms(tensors)
    for i, j in itertools.permutations(range(len(specs)), 2):
        assert _overlap.exact_overlap(geoms[i], geoms[j]) is _truth(tensors[i], tensors[j]), (i, j)


# --- _difference_pieces: the two budgets ---------------------------------------------------------

# (1, (2, 10)): bytes 0, 2, ..., 18. Window 9: the one dim visits c = 1..4 (4 partial sums).
ONE_DIM = (1, (2, 10))
# (1, (3, 2), (10, 2)): bytes {0, 3, 10, 13}, D ∩ [1, 13] = {3, 7, 10, 13}. Window 13, largest
# stride first: c in {0, 1} (2 sums), then under 10: c in {-1, 0, 1} (3), under 0: c = 1 (1): 6.
# Window 1: c = 0 (1 sum), then under 0 no multiple of 3 lands in [1, 1] (0): 1.
TWO_DIMS = (1, (3, 2), (10, 2))


@pytest.mark.parametrize(
    ("key", "window", "cap", "expected"),
    [
        (ONE_DIM, 9, 4, [(2, 2), (4, 4), (6, 6), (8, 8)]),
        (ONE_DIM, 9, 3, None),
        (TWO_DIMS, 13, 6, [(3, 3), (7, 7), (10, 10), (13, 13)]),
        (TWO_DIMS, 13, 5, None),
        (TWO_DIMS, 1, 1, []),
        (TWO_DIMS, 1, 0, None),
    ],
)
def test_the_node_budget_counts_the_partial_sums_visited(
    key: tuple[int | tuple[int, int], ...], window: int, cap: int, expected: object
) -> None:
    with mock.patch.object(_overlap, "_MAX_NODES", cap):
        assert _overlap._difference_pieces(key, window) == expected


def test_the_largest_stride_is_enumerated_first() -> None:
    # bytes 2k (k < 3000) and 100000 + 2k: largest stride first, 1 + 5 partial sums; smallest
    # first would visit all 5999 multiples of 2 before the large stride could prune them.
    key = (1, (2, 3000), (100000, 2))
    assert _overlap._difference_pieces(key, 10) == [(d, d) for d in range(2, 11, 2)]


@pytest.mark.parametrize(("cap", "decided"), [(4, True), (3, False)])
def test_the_piece_budget(cap: int, decided: bool) -> None:
    with mock.patch.object(_overlap, "_MAX_PIECES", cap):
        got = _overlap._difference_pieces(ONE_DIM, 9)
    assert got == ([(2, 2), (4, 4), (6, 6), (8, 8)] if decided else None)


def test_too_many_pieces_is_none_at_the_default_budget() -> None:
    # 99 separate differences 2, 4, ..., 198: past _MAX_PIECES, though only 99 sums are visited
    assert _overlap._difference_pieces((1, (2, 100)), 200) is None
    assert _overlap._difference_pieces((1, (2, 60)), 200) == [(d, d) for d in range(2, 119, 2)]


# --- families, through find_overlapping_tensors --------------------------------------------------


def _family(
    sizes: tuple[int, ...], strides: tuple[int, ...], starts: list[int], dtype: torch.dtype = U8
) -> dict[str, torch.Tensor]:
    base = torch.zeros(4096, dtype=U8).view(dtype)
    return {f"s{lo}": base.as_strided(sizes, strides, lo) for lo in starts}


def _groups(names: list[list[int]]) -> set[frozenset[str]]:
    return {frozenset(f"s{lo}" for lo in group) for group in names}


# Rows of 32 bytes 100 apart: D = [1, 31] ∪ [69, 131], both wide. Rows of 9 bytes 40 apart:
# D = [1, 8] ∪ [32, 48], the second exactly _NARROW wide. Rows of 4 bytes 40 apart:
# D = [1, 3] ∪ [37, 43], both narrow.
FAMILIES: list[tuple[str, tuple[int, ...], tuple[int, ...], list[int], list[list[int]]]] = [
    ("wide, one pair", (2, 32), (100, 1), [0, 20], [[0, 20]]),
    ("wide, second piece only", (2, 32), (100, 1), [0, 40, 100], [[0, 100]]),
    ("wide, a gap between partners", (2, 32), (100, 1), [0, 80, 120], [[0, 80, 120]]),
    ("wide, a chain", (2, 32), (100, 1), [0, 4, 8, 12, 16], [[0, 4, 8, 12, 16]]),
    (
        "wide, three chains",
        (2, 32),
        (100, 1),
        [0, 10, 50, 60, 300, 310],
        [[0, 10], [50, 60], [300, 310]],
    ),
    ("wide, below is apart", (2, 32), (100, 1), [0, 200, 210], [[200, 210]]),
    ("a piece _NARROW wide", (2, 9), (40, 1), [0, 48, 100], [[0, 48]]),
    ("narrow, top of the first piece", (2, 4), (40, 1), [0, 3], [[0, 3]]),
    ("narrow, top of the second piece", (2, 4), (40, 1), [0, 43, 100], [[0, 43]]),
    ("narrow, one byte past", (2, 4), (40, 1), [0, 44, 100], []),
]


@pytest.mark.parametrize(
    ("sizes", "strides", "starts", "expected"),
    [case[1:] for case in FAMILIES],
    ids=[case[0] for case in FAMILIES],
)
def test_a_family_is_decided_by_its_differences(
    sizes: tuple[int, ...], strides: tuple[int, ...], starts: list[int], expected: list[list[int]]
) -> None:
    sd = _family(sizes, strides, starts)
    assert oracle.overlapping_groups(sd, {k: (0, 0) for k in sd}) == _groups(expected)
    with _no_solver():  # one family, decided by its difference pieces alone
        assert set(compat.find_overlapping_tensors(sd)) == _groups(expected)


def test_a_family_with_few_pieces_in_its_spread_is_decided_alone() -> None:
    # 100 bytes 2 apart: D has 99 pieces in all, but only {2} within the starts' spread of 3.
    sd = _family((100,), (2,), [0, 1, 2, 3])
    expected = _groups([[0, 2], [1, 3]])
    assert oracle.overlapping_groups(sd, {k: (0, 0) for k in sd}) == expected
    with _no_solver():
        assert set(compat.find_overlapping_tensors(sd)) == expected


def test_a_family_with_too_many_pieces_goes_to_the_exact_solver() -> None:
    # spread 199: D ∩ [1, 199] is the 99 even numbers, past _MAX_PIECES.
    sd = _family((100,), (2,), [0, 1, 2, 3, 199])
    expected = _groups([[0, 2], [1, 3, 199]])
    assert oracle.overlapping_groups(sd, {k: (0, 0) for k in sd}) == expected
    assert set(compat.find_overlapping_tensors(sd)) == expected


def test_a_float_family_with_wide_pieces() -> None:
    # float32 rows of 8 (32 bytes) 30 elements (120 bytes) apart: D = [1, 31] ∪ [89, 151]
    starts = [0, 5, 30, 31, 60, 200]  # element offsets: 0, 20, 120, 124, 240, 800 bytes
    sd = _family((2, 8), (30, 1), starts, torch.float32)
    expected = oracle.overlapping_groups(sd, {k: (0, 0) for k in sd})
    assert expected == _groups([[0, 5, 30, 31, 60]])
    with _no_solver():
        assert set(compat.find_overlapping_tensors(sd)) == expected


# --- _family_components on many start sets, against brute force ----------------------------------

SHAPES: list[tuple[tuple[int, ...], tuple[int, ...], torch.dtype]] = [
    ((2, 32), (100, 1), U8),  # D = [1, 31] ∪ [69, 131]
    ((3, 20), (50, 1), U8),  # D = [1, 19] ∪ [31, 69] ∪ [81, 119]
    ((2, 8), (30, 1), torch.float32),  # D = [1, 31] ∪ [89, 151]
    ((2, 9), (40, 1), U8),  # D = [1, 8] ∪ [32, 48]
    ((3, 4), (10, 1), U8),  # narrow pieces only
    ((2, 2, 6), (60, 13, 1), U8),  # two moving outer dims
]


def _footprint(shape: _overlap.Shape, lo: int) -> set[int]:
    e = shape.dtype.itemsize
    ranges = [range(n) for n in shape.sizes]
    return {
        lo + sum(k * b for k, b in zip(index, shape.bstrides, strict=True)) + j
        for index in itertools.product(*ranges)
        for j in range(e)
    }


def _partition(uf: UnionFind, n: int) -> set[frozenset[int]]:
    out: dict[int, set[int]] = {}
    for i in range(n):
        out.setdefault(uf.find(i), set()).add(i)
    return {frozenset(s) for s in out.values()}


def _start_sets() -> Iterator[tuple[int, list[int]]]:
    rng = random.Random(20240611)
    for shape_index in range(len(SHAPES)):
        for _ in range(120):
            count = rng.randint(2, 9)
            spread = rng.choice([20, 60, 160, 320])
            starts = rng.sample(range(spread), min(count, spread))
            step = rng.choice([1, 1, 2, 4])
            yield shape_index, [1000 + step * s for s in starts]


@pytest.mark.parametrize("shape_index", range(len(SHAPES)))
def test_family_components_match_brute_force(shape_index: int) -> None:
    sizes, strides, dtype = SHAPES[shape_index]
    shape = _overlap.Shape(sizes, strides, dtype)
    assert not shape.dense
    dummy = torch.empty(0)
    cases = [starts for index, starts in _start_sets() if index == shape_index]
    for starts in cases:
        starts = sorted(set(starts))
        order = starts[::-1] if len(starts) % 2 else starts  # members need not come sorted
        members = [_overlap.Geom(starts.index(lo), dummy, lo, shape) for lo in order]
        uf = UnionFind(len(starts))
        assert _overlap._family_components(members, uf), starts
        prints = [_footprint(shape, lo) for lo in starts]
        truth = UnionFind(len(starts))
        for i, j in itertools.combinations(range(len(starts)), 2):
            if prints[i] & prints[j]:
                truth.union(i, j)
        assert _partition(uf, len(starts)) == _partition(truth, len(starts)), starts


# A view that reads its storage many times over: 2**60 int64 elements over the 131069 elements
# from its start (four dims of 2**15, every stride 1); NumPy cannot describe it as an array
# (2**63 bytes, "array is too big").
def _reread(base: torch.Tensor, offset: int) -> torch.Tensor:
    return base.as_strided((2**15,) * 4, (1,) * 4, offset)


@pytest.mark.parametrize(
    ("other", "shared"),
    [(slice(0, None, 2), "first"), (slice(2, 131069, 2), "last")],
    ids=["same-first-byte", "same-last-byte"],
)
def test_strided_views_sharing_a_first_or_a_last_byte_overlap_without_numpy(
    other: slice, shared: str
) -> None:
    """Two strided views (two families) with the same first byte, or the same last byte, overlap
    whatever their other bytes: answered from those bytes even when one of them is too big for
    NumPy to describe (it would refuse with "array is too big")."""
    x = torch.zeros(2**18, dtype=torch.int64)
    view, strided = _reread(x, 0), x[other]
    assert view.numel() * view.element_size() == 2**63
    ga, gb = _geoms([view, strided])
    assert (ga.lo == gb.lo) is (shared == "first")
    assert (ga.hi == gb.hi) is (shared == "last")
    assert compat.find_overlapping_tensors({"view": view, "strided": strided}) == [
        frozenset({"view", "strided"})
    ]


def test_a_decided_family_keeps_its_disjoint_members_apart_beside_another_family() -> None:
    """Two same-shape strided meta views, on the even and on the odd elements of one span, are
    decided disjoint by their family's difference pieces; another family in the storage (a view
    past them) does not send the pair to NumPy's solver, which could not even describe them
    (2**60 int64 elements each: "array is too big")."""
    m = torch.empty(2**52 + 2**11, dtype=torch.int64, device="meta")
    even, odd = (m.as_strided((2**51, 2**9), (2, 2), offset) for offset in (0, 1))
    beyond = m.as_strided((2,), (2,), 2**52 + 2**10 + 10)
    assert even.numel() * even.element_size() == 2**63
    assert compat.find_overlapping_tensors({"even": even, "odd": odd, "beyond": beyond}) == []
