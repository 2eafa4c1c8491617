"""reports/support.json and the README's support table: what passed, per Python, and the floors
pyproject.toml declares are the oldest versions a passing cell tested."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.matrix import project
from harness.matrix.errors import Refused
from harness.report import support

ROOT = Path(__file__).resolve().parents[2]


def cell(cid: str, python: str, torch: str, torchao: str, status: str = "passed") -> dict:
    return {
        "id": cid,
        "python": python,
        "status": status,
        "group": None,
        "installed": {"torch": f"{torch}+cu124", "torchao": torchao},
        "pins": [f"torch=={torch}", f"torchao=={torchao}"],
    }


def test_only_passed_cells_count_and_versions_sort_numerically() -> None:
    cells = [
        cell("a", "3.11", "2.10.0", "0.16.0"),
        cell("b", "3.11", "2.9.1", "0.14.1"),
        cell("c", "3.10", "2.3.1", "0.8.0"),
        cell("d", "3.13", "2.6.0", "0.8.0", status="failed"),
        cell("e", "3.12", "2.4.1", "0.8.0", status="skipped"),
        {**cell("f", "3.11", "2.5.1", "0.8.0"), "group": "2024.12"},  # downstream: not compat's
    ]
    doc = support.collect(cells, {"written": "w", "state": "finished", "tiers": ["core"]})
    assert doc["python"] == {
        "3.10": {"torch": ["2.3.1"], "torchao": ["0.8.0"]},
        "3.11": {"torch": ["2.9.1", "2.10.0"], "torchao": ["0.14.1", "0.16.0"]},
    }
    assert doc["floors"] == {"python": "3.10", "torch": "2.3.1"}
    assert doc["pairs"] == {
        "3.10": {"2.3.1": ["0.8.0"]},
        "3.11": {"2.9.1": ["0.14.1"], "2.10.0": ["0.16.0"]},
    }
    assert doc["downstream"] == {
        "2024.12": {"libraries": {}, "pairs": [["2.5.1", "0.8.0"]]},
    }


def test_pairs_share_a_row_where_they_passed_on_the_same_pythons() -> None:
    cells = [
        cell(f"{py}-{ao}", py, "2.6.0", ao)
        for py, ao in [("3.10", "0.7.0"), ("3.11", "0.7.0"), ("3.10", "0.8.0"), ("3.11", "0.8.0")]
    ]
    cells += [cell("only-311", "3.11", "2.6.0", "0.9.0"), cell("new", "3.12", "2.15.0", "0.18.0")]
    cells.append(cell("failed", "3.12", "2.15.0", "0.17.0", status="failed"))
    downstream = {**cell("ds", "3.11", "2.15.0", "0.18.0"), "group": "2026.12"}
    downstream["installed"] = {**downstream["installed"], "accelerate": "1.16.0", "peft": "0.21.2"}
    table = support.render_table(support.collect([*cells, downstream], {}))
    rows = [line for line in table.splitlines() if line.startswith("| 2.")]
    assert rows == [
        "| 2.6.0 | 0.7.0, 0.8.0 | 3.10, 3.11 |",
        "| 2.6.0 | 0.9.0 | 3.11 |",
        "| 2.15.0 | 0.18.0 | 3.12 |",
    ]
    assert "| 2026.12 | accelerate 1.16.0, peft 0.21.2 | 2.15.0 × 0.18.0 |" in table


def test_the_readme_table_is_rendered_between_its_markers() -> None:
    doc = support.collect([cell("c", "3.10", "2.3.1", "0.8.0")], {"tiers": ["core"]})
    text = f"before\n{support.BEGIN}\nstale\n{support.END}\nafter\n"
    out = support.replace_table(text, doc)
    assert out.startswith("before\n") and out.endswith("\nafter\n") and "stale" not in out
    assert "| 2.3.1 | 0.8.0 | 3.10 |" in out
    with pytest.raises(ValueError, match="support:begin"):
        support.replace_table("no markers", doc)


def test_the_committed_support_window_matches_the_readme_and_pyproject() -> None:
    doc = json.loads((ROOT / "reports" / "support.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert support.render_table(doc) in readme, "re-run python -m harness.report.support --readme"
    pyproject = (ROOT / "pyproject.toml").read_text()
    python_floor = re.search(r'requires-python = ">=([0-9.]+)"', pyproject)
    torch_floor = re.search(r'"torch>=([0-9.]+)"', pyproject)
    assert python_floor and torch_floor
    # the declared floors are exactly the oldest versions a passing cell tested
    assert python_floor.group(1) == doc["floors"]["python"]
    assert ".".join(doc["floors"]["torch"].split(".")[:2]) == torch_floor.group(1)


def test_the_changelog_names_the_pairs_of_the_current_release() -> None:
    """CHANGELOG.md's block for compat's written version is the committed support window's pairs
    (re-rendered by `python -m harness.report.support --changelog`), and a missing block is
    refused by name."""
    version = project.written_version(ROOT)
    doc = json.loads((ROOT / "reports" / "support.json").read_text())
    text = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {version}" in text, f"CHANGELOG.md has no section for {version}"
    assert support.render_release(doc, version) in text, (
        "CHANGELOG.md's pairs disagree with reports/support.json: run python -m"
        " harness.report.support --baseline reports/baseline.json --changelog CHANGELOG.md"
    )
    with pytest.raises(Refused, match=r"pairs 9\.9:begin"):
        support.replace_block(text, "", *support.release_markers("9.9"), "CHANGELOG.md")
