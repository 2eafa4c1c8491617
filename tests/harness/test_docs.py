"""The documented tables are the code's: statuses, gate classes, the fault count (docs/)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.cells.status import STATUSES
from harness.ci.gate import CLASSES
from tests.common.harness.fault_catalog import INJECTED

DOCS = Path(__file__).resolve().parents[2] / "docs"
REPORT = (DOCS / "report.md").read_text()  # statuses and fault injection
GATE = (DOCS / "gate.md").read_text()


def table(text: str, header: str) -> list[list[str]]:
    lines = text[text.index(header) :].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_status_table_is_status_py() -> None:
    rows = table(REPORT, "| status | its one cause |")
    assert {status: cause for status, cause in rows} == STATUSES


def test_the_gate_table_is_gate_py() -> None:
    rows = table(GATE, "| class | meaning | fails the gate |")
    assert {k: (m, f) for k, m, f in rows} == CLASSES


def test_the_docs_count_the_injected_faults() -> None:
    assert len(set(INJECTED)) == len(INJECTED)
    (count,) = re.findall(r"inject (\d+) faults", REPORT)
    assert int(count) == len(INJECTED)
