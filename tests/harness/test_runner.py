"""What the plan gives each cell's test process besides its pins (harness/cells/plan.py)."""

from __future__ import annotations

from harness.cells import plan


def test_cells_side_by_side_get_their_share_of_threads_unless_the_user_set_it() -> None:
    assert plan.thread_env(None, {}) == {}
    assert plan.thread_env(1, {}) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert plan.thread_env(2, {"OMP_NUM_THREADS": "4"}) == {"MKL_NUM_THREADS": "2"}
