"""What the runner gives each cell's test process besides its pins (harness/runner.py)."""

from __future__ import annotations

from harness import runner


def test_cells_side_by_side_get_their_share_of_threads_unless_the_user_set_it() -> None:
    assert runner.thread_env(None, {}) == {}
    assert runner.thread_env(1, {}) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert runner.thread_env(2, {"OMP_NUM_THREADS": "4"}) == {"MKL_NUM_THREADS": "2"}
