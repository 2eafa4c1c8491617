"""A gate's inputs as the harness suite writes them: a run's address and a cell of a snapshot."""

from __future__ import annotations

from typing import Any

RUN = "https://github.com/owner/compat-matrix/actions/runs/42"
TEST = "tests/compat/sharing/test_sharing.py::test_save_round_trip_is_bit_identical[cpu]"


def snapshot_cell(status: str, tests: dict[str, str]) -> dict[str, Any]:
    return {
        "status": status,
        "reason": "",
        "tier": "core",
        "torch": "2.6",
        "torchao": "0.8",
        "backend": "cpu",
        "installed": {},
        "candidates": [],
        "tests": tests,
        "flaky": [],
        "skips": {},
    }
