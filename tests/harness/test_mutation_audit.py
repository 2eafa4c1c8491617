"""``nox -s mutation -- --audit N`` (harness/mutation/audit.py): which equivalents are drawn, how
a catalogued mutant is applied to a copy of compat/, and when the audit fails.

The fuzz itself (tests/common/differential.py) is run for real on a copy of compat/ with the plan's
control applied: it must find the difference, and find none between two equal copies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.matrix import paths, spec
from harness.matrix.errors import Refused
from harness.mutation import audit as mutation_audit
from harness.mutation import plan as mutation_plan

ROOT = paths.ROOT
PLAN = mutation_plan.load()


def catalogued(entry: mutation_plan.Equivalent, line: int, source: str) -> dict[str, Any]:
    return {
        "id": "m1",
        "module": entry.module,
        "function": entry.function,
        "line": line,
        "end_line": line,
        "before": source,
        "after": source.replace(entry.before.strip(), entry.after.strip()),
    }


def test_the_committed_plan_has_an_audit_whose_control_is_a_line_of_its_module() -> None:
    assert PLAN.audit is not None
    control = PLAN.audit.control
    text = (ROOT / control.module).read_text(encoding="utf-8")
    assert control.before in text and control.after not in text
    assert PLAN.audit.examples >= 100


def test_the_draw_is_the_same_for_a_seed_and_only_applicable_entries() -> None:
    cell = "torch2.3-ao0.6-cpu"
    first = mutation_audit.draw(PLAN, cell, 5, seed=7)
    assert first == mutation_audit.draw(PLAN, cell, 5, seed=7)
    assert all(not e.cells or cell in e.cells for e in first)
    assert len(set(first)) == 5
    assert mutation_audit.draw(PLAN, cell, 5, seed=8) != first
    pool = [e for e in PLAN.equivalents if not e.cells or cell in e.cells]
    with pytest.raises(Refused, match=rf"has {len(pool)} equivalents; accepted"):
        mutation_audit.draw(PLAN, cell, len(pool) + 1, seed=0)


def test_an_entry_must_name_a_catalogued_mutant() -> None:
    entry = PLAN.equivalents[0]
    line = "    " + entry.before.strip()
    mutant = catalogued(entry, 10, line)
    assert mutation_audit.match(entry, [mutant], "torch2.6-ao0.8-cpu") == mutant
    with pytest.raises(Refused, match="matches no catalogued mutant"):
        mutation_audit.match(entry, [], "torch2.6-ao0.8-cpu")
    # the same change twice in a function: the one nearest the entry's line
    far = {**mutant, "id": "far", "line": entry.line + 40, "end_line": entry.line + 40}
    near = {**mutant, "id": "near", "line": entry.line + 1, "end_line": entry.line + 1}
    assert mutation_audit.match(entry, [far, near], "torch2.6-ao0.8-cpu")["id"] == "near"


def test_apply_replaces_the_catalogued_lines_in_a_copy_only(tmp_path: Path) -> None:
    control = PLAN.audit.control if PLAN.audit else None
    assert control is not None
    shutil.copytree(ROOT / "compat", tmp_path / "orig" / "compat")
    lines = (ROOT / control.module).read_text(encoding="utf-8").splitlines()
    number = next(i for i, text in enumerate(lines, 1) if control.before in text)
    mutant = catalogued(control, number, lines[number - 1])
    mutation_audit.apply(tmp_path / "orig", mutant, tmp_path / "m")
    changed = (tmp_path / "m" / control.module).read_text(encoding="utf-8").splitlines()
    assert changed[number - 1] == mutant["after"]
    assert changed[: number - 1] == lines[: number - 1] and changed[number:] == lines[number:]
    assert (tmp_path / "orig" / control.module).read_text(encoding="utf-8").splitlines() == lines
    stale = {**mutant, "before": "something else"}
    with pytest.raises(Refused, match="the catalogue says 'something else'"):
        mutation_audit.apply(tmp_path / "orig", stale, tmp_path / "m2")


def row(role: str, verdict: str) -> dict[str, Any]:
    return {
        "role": role,
        "module": "compat/x.py",
        "line": 3,
        "function": "f",
        "before": "a",
        "after": "b",
        "verdict": verdict,
        "seconds": 1.0,
        "difference": {"api": "find_shared_tensors", "input": ["state dict: …"]}
        if verdict == "differs"
        else None,
    }


@pytest.mark.parametrize(
    ("rows", "fails"),
    [
        ([("control", "differs"), ("equivalent", "same")], []),
        ([("control", "same"), ("equivalent", "same")], ["the control mutant was not caught"]),
        ([("control", "differs"), ("equivalent", "differs")], ["not an equivalent"]),
        ([("control", "differs"), ("equivalent", "timeout")], ["not an equivalent"]),
        ([("control", "error"), ("equivalent", "error")], ["not caught", "not an equivalent"]),
    ],
)
def test_the_audit_fails_on_a_missed_control_or_a_difference(
    tmp_path: Path, rows: list[tuple[str, str]], fails: list[str]
) -> None:
    report = {"cell": "c", "drawn": 1, "examples": 3, "rows": [row(*r) for r in rows]}
    found = mutation_audit.problems(report)
    assert len(found) == len(fails) and all(f in p for f, p in zip(fails, found, strict=True))
    assert mutation_audit.finish(report, tmp_path) == (1 if fails else 0)
    assert json.loads((tmp_path / mutation_audit.REPORT_NAME).read_text())["rows"] == report["rows"]


def cell_python() -> Path | None:
    """A venv of the default cell with compat's test requirements, if one is built here: the
    mutation run's (harness/mutation/runner.py), ``nox -s tests``'s, or the cell's own session's
    (nox writes the dots of a session's name as dashes)."""
    cell = spec.load(paths.matrix_path()).default()
    for name in (f"mutation-{cell.id}", "tests", f"tests-{cell.id}".replace(".", "-")):
        python = ROOT / ".nox" / name / "bin" / "python"
        if python.exists():
            return python
    return None


def test_the_fuzz_catches_the_control_and_nothing_between_equal_copies(tmp_path: Path) -> None:
    """The real fuzz (tests/common/differential.py) in the default cell's venv: the plan's control is
    found, with its input, and two equal copies of compat/ never differ."""
    python = cell_python()
    if python is None:
        pytest.skip("no venv of the default cell here: `nox -s tests` builds one")
    assert PLAN.audit is not None
    control = PLAN.audit.control
    shutil.copytree(ROOT / "compat", tmp_path / "orig" / "compat")
    shutil.copytree(ROOT / "compat", tmp_path / "same" / "compat")
    lines = (ROOT / control.module).read_text(encoding="utf-8").splitlines()
    number = next(i for i, text in enumerate(lines, 1) if control.before in text)
    mutation_audit.apply(
        tmp_path / "orig", catalogued(control, number, lines[number - 1]), tmp_path / "ctrl"
    )
    verdicts = {}
    # the control is found within 120 inputs; a dozen show equal copies never differ (each input
    # runs every round of the module: the copies either agree on it or the fuzz is broken)
    for name, examples in (("ctrl", 120), ("same", 12)):
        env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
        verdicts[name] = mutation_audit.fuzz(
            python, ROOT, tmp_path / name, control.module, examples=examples, seed=0, env=env
        )
    assert verdicts["same"]["verdict"] == "same", verdicts["same"]
    assert verdicts["ctrl"]["verdict"] == "differs", verdicts["ctrl"]
    assert verdicts["ctrl"]["difference"]["input"]
