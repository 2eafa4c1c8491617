"""View families: many views of one storage sharing a shape, decided by their start differences.

compat._overlap enumerates, per family, the start differences at which two members share a byte
(``S - S`` within the spread of the starts). These tests judge that against the byte-set oracle
on hypothesis-drawn families of many sizes, against brute force for the difference pieces
themselves, and check that the exact-solver fallback (a family with too many pieces) gives the
same answers. Speed is measured in bench/bench_sharing.py, never asserted here.
"""

from __future__ import annotations

import itertools
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import compat
from compat import _overlap
from tests.common import oracle
from tests.common.compat.roundtrip import (
    assert_groups_match_the_oracle,
    assert_round_trip,
    hyp,
    save_and_restore,
)
from tests.common.strategies import families


@hyp
@given(data=st.data())
def test_family_groups_match_the_byte_set_oracle(backend: str, data: st.DataObject) -> None:
    assert_groups_match_the_oracle(data.draw(families(backend), label="family"))


@hyp
@given(data=st.data())
def test_the_exact_solver_fallback_gives_the_same_groups(data: st.DataObject) -> None:
    case = data.draw(families("cpu"), label="family")
    fast = compat.find_overlapping_tensors(case.tensors)
    with mock.patch.object(_overlap, "_MAX_PIECES", -1):  # no family decided by its differences
        assert compat.find_overlapping_tensors(case.tensors) == fast


@pytest.mark.with_data
@hyp
@given(data=st.data())
def test_families_round_trip(backend: str, data: st.DataObject) -> None:
    case = data.draw(families(backend), label="family")
    _, _, restored = save_and_restore(case.tensors)
    assert_round_trip(case.tensors, restored, case.origins)


def brute_pieces(
    sizes: tuple[int, ...], bstrides: tuple[int, ...], e: int, window: int
) -> set[int]:
    """The differences d in 1..window at which a footprint and its translate by d share a byte."""
    ranges = [range(n) for n in sizes]
    footprint = {
        sum(k * b for k, b in zip(index, bstrides, strict=True)) + j
        for index in itertools.product(*ranges)
        for j in range(e)
    }
    return {d for d in range(1, window + 1) if footprint & {x + d for x in footprint}}


@pytest.mark.examples(100)
@given(
    dims=st.lists(st.tuples(st.integers(2, 4), st.integers(1, 40)), min_size=1, max_size=3),
    e=st.sampled_from([1, 2, 4, 8]),
    window=st.integers(1, 300),
)
@settings(deadline=None)
def test_difference_pieces_match_brute_force(
    dims: list[tuple[int, int]], e: int, window: int
) -> None:
    sizes = tuple(n for n, _ in dims)
    bstrides = tuple(s * e for _, s in dims)
    key = (e, *sorted((b, n) for n, b in zip(sizes, bstrides, strict=True)))
    pieces = _overlap._difference_pieces(key, window)
    expected = brute_pieces(sizes, bstrides, e, window)
    if pieces is None:  # too many pieces: left to the exact solver (allowed, never wrong)
        return
    got = {d for lo, hi in pieces for d in range(lo, hi + 1)}
    assert got == expected
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(pieces)), "sorted and disjoint"


@pytest.mark.parametrize(
    ("name", "build", "groups"),
    [
        ("columns", lambda w: {f"c{i}": w[:, i] for i in range(64)}, 0),
        (
            "windows with overlaps",
            lambda w: {f"w{i}": w.view(-1)[i : i + 40 : 10] for i in range(64)},
            10,
        ),
        ("interleaved", lambda w: {f"s{i}": w.view(-1)[i::64] for i in range(64)}, 0),
        ("batched", lambda w: {f"b{i}": w.view(4, 16, 4)[:, i // 4] for i in range(0, 64, 4)}, 0),
    ],
)
def test_large_families_are_exact(name: str, build, groups: int) -> None:  # type: ignore[no-untyped-def]
    w = torch.arange(256.0).view(4, 64)
    sd = build(w)
    got = compat.find_overlapping_tensors(sd)
    assert len(got) == groups, name
    assert set(got) == oracle.overlapping_groups(sd, {k: (0, 0) for k in sd})


def test_a_family_is_decided_without_the_solver() -> None:
    w = torch.arange(2048.0).view(8, 256)
    cases = [
        {f"c{i}": w[:, i] for i in range(256)},
        {f"w{i}": w.view(-1)[i : i + 400 : 100] for i in range(1024)},
    ]

    def no_solver(*args: object) -> bool:
        raise AssertionError("the exact solver was asked about a family pair")

    with mock.patch.object(_overlap, "_shares", no_solver):
        assert compat.find_overlapping_tensors(cases[0]) == []
        assert len(compat.find_overlapping_tensors(cases[1])) == 100
