"""``compat._intervals``: the interval sweep and the union-find that every storage group, overlap
component and saved region is built on, judged against brute force.

``runs`` must return exactly the connected components of "the half-open intervals intersect" that
hold two intervals or more, in order of their first start and each in start order (ties by
index); ``UnionFind`` must keep the smallest index of each set as its root. A lone interval
returned as a run of one (at a break between runs, and at the end) fails here.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compat._intervals import UnionFind, runs

INTERVALS = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 12)).map(lambda p: (p[0], p[0] + p[1])),
    max_size=12,
)


def brute_runs(los: list[int], his: list[int]) -> list[list[int]]:
    """Components of the intersection graph, two intervals or more, in the promised order."""
    n = len(los)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if max(los[i], los[j]) < min(his[i], his[j]):  # they share a point
                parent[root(j)] = root(i)
    components: dict[int, list[int]] = {}
    for i in range(n):
        components.setdefault(root(i), []).append(i)
    by_start = [sorted(c, key=lambda i: (los[i], i)) for c in components.values() if len(c) > 1]
    return sorted(by_start, key=lambda c: (los[c[0]], c[0]))


@pytest.mark.examples(150)
@given(INTERVALS)
@settings(deadline=None)
def test_runs_are_the_intersection_components(intervals: list[tuple[int, int]]) -> None:
    los = [lo for lo, _ in intervals]
    his = [hi for _, hi in intervals]
    # Empty intervals intersect nothing; the sweep sees them as points, so leave them out here
    # exactly as every caller does (no empty footprint or storage reaches it).
    keep = [i for i in range(len(los)) if his[i] > los[i]]
    los = [los[i] for i in keep]
    his = [his[i] for i in keep]
    assert runs(los, his) == brute_runs(los, his)
    order = sorted(range(len(los)), key=los.__getitem__)
    assert runs(los, his, order) == brute_runs(los, his)


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([], []),
        ([(0, 4)], []),
        ([(0, 2), (5, 7), (9, 12)], []),  # all apart: no run of one anywhere
        ([(0, 2), (2, 4), (4, 6)], []),  # touching ends do not intersect
        ([(0, 3), (2, 5), (8, 9)], [[0, 1]]),  # a run, then a lone interval at the end
        ([(0, 1), (3, 6), (5, 8)], [[1, 2]]),  # a lone interval, then a run at the end
        ([(0, 1), (3, 6), (5, 8), (20, 21)], [[1, 2]]),  # a run between lone intervals
        ([(0, 10), (2, 3), (8, 12), (20, 22), (21, 23)], [[0, 1, 2], [3, 4]]),
    ],
)
def test_runs_at_their_limits(intervals: list[tuple[int, int]], expected: list[list[int]]) -> None:
    los = [lo for lo, _ in intervals]
    his = [hi for _, hi in intervals]
    assert runs(los, his) == expected == brute_runs(los, his)


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20),
        )
    )
)
@pytest.mark.examples(100)
@settings(deadline=None)
def test_union_find_roots_are_the_smallest_member(case: tuple[int, list[tuple[int, int]]]) -> None:
    n, pairs = case
    uf = UnionFind(n)
    sets = [{i} for i in range(n)]
    for i, j in pairs:
        uf.union(i, j)
        merged = sets[i] | sets[j]
        for k in merged:
            sets[k] = merged
    for i in range(n):
        assert uf.find(i) == min(sets[i])
