"""Strided views against runs of dense views, judged byte by byte by ``tests/common/oracle.py``.

``compat.find_overlapping_tensors`` decides a strided (non-dense) view against each chained run
of dense views by a range test: the run just before the view, one the view only straddles, and
one whose bytes fall between the view's; dense views keyed out of start order; and strided views
of two shapes (two families) that meet across families. Each case fails if a run before the view
is taken as touching it, the range test has the wrong width or step, runs are built in key order,
a run's start is taken from its second view, or cross-family pairs are skipped.
"""

from __future__ import annotations

import pytest
import torch

import compat
from tests.common import oracle

X = torch.arange(64, dtype=torch.uint8)

CASES = {
    # a dense run of bytes 0..9, then a strided view from byte 20: apart
    "run-before-the-view": {"run": X[0:10], "strided": X[20:40:2]},
    # a dense run of bytes 5..6 inside the span of a view of every 4th byte from 3 (3, 7, 11...)
    "run-between-its-bytes": {"run": X[5:7], "strided": X[3::4]},
    # the same run against a view of every 4th byte from 1 (1, 5, 9...): they share byte 5
    "run-on-one-of-its-bytes": {"run": X[5:7], "strided": X[1::4]},
    # two runs, the first ending before the view, the second inside its span, between its bytes
    "two-runs": {"early": X[0:2], "late": X[9:11], "strided": X[4:60:4]},
    # as above, but the second run holds one of the view's bytes
    "two-runs-one-hit": {"early": X[0:2], "late": X[11:13], "strided": X[4:60:4]},
    # dense views keyed out of start order; the strided view only sends them down this path
    "dense-out-of-order": {"c": X[20:30], "a": X[0:6], "b": X[5:10], "s": X[40:60:2]},
    # a strided view that meets only the first view of a chained run (bytes 0, 2, 4)
    "run-met-at-its-start": {"a": X[0:6], "b": X[5:10], "s": X[0:5:2]},
    # two families (stride 2 and stride 3); the stride-2 family is decided on its own, the
    # stride-3 view meets both of its members
    "across-families": {"a0": X[0:20:2], "a1": X[1:21:2], "b": X[10:40:3]},
    # as above, with the stride-3 view starting between the two stride-2 ones
    "across-families-interleaved": {"a0": X[0:20:2], "b": X[1:31:3], "a1": X[3:23:2]},
}
TOUCHING = {
    "run-on-one-of-its-bytes",
    "two-runs-one-hit",
    "dense-out-of-order",
    "run-met-at-its-start",
    "across-families",
    "across-families-interleaved",
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_strided_view_against_dense_runs_matches_the_byte_sets(name: str) -> None:
    sd = CASES[name]
    expected = oracle.overlapping_groups(sd, oracle.address_origins(sd))
    expected = {g for g in expected if len(g) > 1}
    assert set(compat.find_overlapping_tensors(sd)) == expected
    assert bool(expected) == (name in TOUCHING)


# A view that reads its storage many times over: 2**60 int64 elements over the 131069 elements
# from its start (four dims of 2**15, every stride 1). Its footprint is those 131069 elements, one
# run of bytes, but NumPy cannot describe it as an array (2**63 bytes, "array is too big"): a run
# that shares its first or last byte with it, or that its extent misses, must be decided by the
# range test alone.
RUNS_BESIDE_A_REREAD_VIEW = {
    # (first and end element of the dense run, storage offset of the view): do they meet?
    "run-ends-before-the-view": ((0, 10), 100, False),
    "run-ends-where-the-view-starts": ((0, 100), 100, False),
    "run-holds-the-view's-first-byte": ((0, 200), 100, True),
    "run-starts-with-the-view": ((100, 200), 100, True),
    "run-holds-the-view's-last-byte": ((100000, 140000), 0, True),
    "run-ends-with-the-view": ((100000, 131069), 0, True),
}


@pytest.mark.parametrize("name", list(RUNS_BESIDE_A_REREAD_VIEW))
def test_a_run_beside_a_view_too_big_for_numpy_is_decided_by_its_range(name: str) -> None:
    """A dense run against a strided view whose NumPy description would pass 2**63 bytes: the
    answer comes from the extents (apart, or touching at one end: no; the run holds the view's
    first or last byte: yes), the same as for any strided view, and no error is raised."""
    (lo, hi), offset, meet = RUNS_BESIDE_A_REREAD_VIEW[name]
    x = torch.zeros(2**18, dtype=torch.int64)
    view = x.as_strided((2**15,) * 4, (1,) * 4, offset)
    assert view.numel() * view.element_size() == 2**63
    expected = [frozenset({"run", "view"})] if meet else []
    assert compat.find_overlapping_tensors({"run": x[lo:hi], "view": view}) == expected
