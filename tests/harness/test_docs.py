"""The README's tables are the code's: statuses, gate classes, the fault count."""

from __future__ import annotations

import re
from pathlib import Path

from harness.gate import CLASSES
from harness.status import STATUSES
from tests.harness.test_faults import INJECTED

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def table(header: str) -> list[list[str]]:
    lines = README[README.index(header) :].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_status_table_is_status_py() -> None:
    rows = table("| status | its one cause |")
    assert {status: cause for status, cause in rows} == STATUSES


def test_the_gate_table_is_gate_py() -> None:
    rows = table("| class | meaning | fails the gate |")
    assert {k: (m, f) for k, m, f in rows} == CLASSES


def test_the_readme_counts_the_injected_faults() -> None:
    assert len(set(INJECTED)) == len(INJECTED)
    (count,) = re.findall(r"injects (\d+) faults", README)
    assert int(count) == len(INJECTED)
