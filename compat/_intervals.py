"""Union-find and the one interval sweep that compat.sharing and compat.saving build on.

:func:`runs` answers "which half-open intervals chain into one another": sorted by start, an
interval joins the current run when it starts before the largest end seen in that run (a running
maximum, not the previous interval's end: safetensors' B1 bug). Storage merging, dense overlap
components, the contiguous fast path and the planning of saved regions all use it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["UnionFind", "runs"]


class UnionFind:
    """Disjoint sets over ``0..n-1`` with path halving; the smaller index is always the root."""

    __slots__ = ("parent",)

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            if ri < rj:
                self.parent[rj] = ri
            else:
                self.parent[ri] = rj


def runs(los: Sequence[int], his: Sequence[int], order: list[int] | None = None) -> list[list[int]]:
    """Indices of the intervals ``[los[i], his[i])`` that chain into another, grouped by chain.

    Two intervals are in one chain when a sequence of intervals, each starting before the running
    maximum end of the ones before it, links them: exactly the connected components of "the
    intervals intersect" (touching ends do not intersect). Only chains of two or more intervals
    are returned (an interval alone intersects nothing), in order of their first start, each in
    start order. ``order`` is the indices sorted by start when the caller already has it;
    otherwise they are sorted here (ties keep index order, so the result is deterministic).
    O(n) after the sort, and no allocation per lone interval.
    """
    if order is None:
        order = sorted(range(len(los)), key=los.__getitem__)
    out: list[list[int]] = []
    start = 0
    run_hi = his[order[0]] if order else 0
    for pos in range(1, len(order)):
        i = order[pos]
        if los[i] < run_hi:
            if his[i] > run_hi:
                run_hi = his[i]
        else:
            if pos - start > 1:
                out.append(order[start:pos])
            start = pos
            run_hi = his[i]
    if len(order) - start > 1:
        out.append(order[start:])
    return out
