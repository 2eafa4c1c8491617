"""Strided views against runs of dense views, judged byte by byte by ``tests/oracle.py``.

``compat.find_overlapping_tensors`` decides a strided (non-dense) view against each chained run
of dense views by a range test: the run just before the view, one the view only straddles, and
one whose bytes fall between the view's. Written against the mutants of the full mutation run at
``a8a9c52`` that no test killed (a run before the view taken as touching it, and a range test of
the wrong width or step).
"""

from __future__ import annotations

import pytest
import torch

import compat
from tests import oracle

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
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_strided_view_against_dense_runs_matches_the_byte_sets(name: str) -> None:
    sd = CASES[name]
    expected = oracle.overlapping_groups(sd, oracle.address_origins(sd))
    expected = {g for g in expected if len(g) > 1}
    assert set(compat.find_overlapping_tensors(sd)) == expected
    assert bool(expected) == (name in ("run-on-one-of-its-bytes", "two-runs-one-hit"))
