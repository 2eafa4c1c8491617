"""Cell records written the way the harness writes them, for the harness suite's report tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.cells import verdict
from harness.cells.record import CellResult
from harness.matrix import paths
from harness.report import pages as report


class Run:
    """Cell records written the way the harness writes them, and the run's manifest."""

    def __init__(self, reports: Path) -> None:
        self.reports = reports
        self.entries: list[dict[str, Any]] = []

    def cell(
        self,
        torch: str,
        ao: str,
        backend: str,
        status: str,
        group: str | None = None,
        python: str = "3.11",
        **extra: Any,
    ) -> str:
        named = f"py{python}-" if python != "3.11" else ""
        cid = f"torch{torch}-ao{ao}-{named}{f'ds{group}-' if group else ''}{backend}"
        tier = "downstream" if group else "core"
        self.entries.append(
            {
                "id": cid,
                "tier": tier,
                "python": python,
                "torch": torch,
                "torchao": ao,
                "backend": backend,
                "group": group,
                "pins": [f"torch=={torch}.0"],
            }
        )
        if status != "no-record":
            result = CellResult(
                cid, tier, python, torch, ao, backend, [f"torch=={torch}.0"], group, status=status
            )
            for key, value in extra.items():
                setattr(result, key, value)
            result.write(paths.cell_dir(self.reports, cid))
        return cid

    def expected(self) -> verdict.Expected:
        return verdict.Expected(list(self.entries), "this test's run")

    def write(self) -> dict[str, Any]:
        return report.write(self.reports, self.expected())
