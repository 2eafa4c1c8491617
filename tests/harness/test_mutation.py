"""nox -s mutation (harness/mutation/runner.py): the plan, the refusals, choosing mutants, scoring, and
the committed report of a real run in both cells (reports/mutation.json, docs/mutation.md's table).

The refusals run the real command line (``python -m harness.mutation.runner``) against real git work
trees and a real interpreter that lacks the tool; the report is the one a real run wrote.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.matrix import paths, spec
from harness.matrix.errors import Refused
from harness.mutation import plan as mutation_plan
from harness.mutation import report as mutation_report
from harness.mutation import runner as mutation
from harness.mutation import tool as mutation_tool
from tests.common.python_module import run_module

ROOT = paths.ROOT
REPORT = ROOT / "reports" / mutation.REPORT_NAME


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_module("harness.mutation.runner", "run", *args, cwd=ROOT)


def git_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"],
    ):
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    return repo


def commit_all(repo: Path, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message],
        cwd=repo,
        check=True,
    )


# --- the plan -------------------------------------------------------------------------------------


def test_the_plan_mutates_every_module_and_branches_in_the_oldest() -> None:
    """Every compat module is mutated: in the default cell, but for the TorchAO format's module,
    which the newest cell mutates (its paths need TorchAO's format, 0.14 and later)."""
    matrix = spec.load()
    plan = mutation_plan.load()
    default, oldest = matrix.default(), matrix.cells()[0]
    newest = "torch2.15-ao0.18-cpu"  # the newest pinned pair (CI's `nox -t newest`)
    assert (oldest.torch.label, oldest.torchao.label) == ("2.3", "0.6")  # the oldest core pair
    assert list(plan.cells) == [default.id, newest, oldest.id]
    compat = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "compat").glob("*.py"))
    assert plan.modules(newest, ROOT) == ["compat/_torchao_format.py"]
    assert plan.modules(default.id, ROOT) == [m for m in compat if m != "compat/_torchao_format.py"]
    assert plan.modules(oldest.id, ROOT) == [
        "compat/_features.py",
        "compat/_move.py",
        "compat/device.py",
        "compat/params.py",
    ]
    assert set(plan.goal_modules) <= set(compat) and plan.goal == 0.95
    for entry in plan.equivalents:
        assert entry.module in compat, entry
        assert entry.why.strip() and "\n" not in entry.why.strip(), "one line on why"


BAD_PLANS = {
    "unknown cell": (
        '[[cell]]\ncell = "torch9.9-ao0.6-cpu"\nmodules = ["compat/*.py"]',
        "cell[0].cell",
        "'torch9.9-ao0.6-cpu'",
    ),
    "not a cpu cell": (
        '[[cell]]\ncell = "torch2.6-ao0.8-cuda"\nmodules = ["compat/*.py"]',
        "cell[0].cell",
        "'torch2.6-ao0.8-cuda'",
    ),
    "not compat": (
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["harness/*.py"]',
        "cell[0].modules",
        "['harness/*.py']",
    ),
    "no why": (
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["compat/*.py"]\n[[equivalent]]\n'
        'module = "compat/device.py"\nfunction = "f"\nline = 3\nbefore = "a"\nafter = "b"',
        "equivalent[0].why",
        "is required",
    ),
    "audit without a control": (
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["compat/*.py"]\n[audit]\n'
        "examples = 3\nseed = 0",
        "audit.control",
        "is required",
    ),
    "audit with no inputs": (
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["compat/*.py"]\n[audit]\n'
        'control = { module = "compat/a.py", function = "f", before = "a", after = "b" }\n'
        "examples = 0\nseed = 0",
        "audit.examples",
        "is not a whole number >= 1 (got 0)",
    ),
    "audit control without its change": (
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["compat/*.py"]\n[audit]\n'
        'control = { module = "compat/a.py", function = "f", before = "a" }\n'
        "examples = 3\nseed = 0",
        "audit.control.after",
        "is required",
    ),
    "unknown cell of an entry": (
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["compat/*.py"]\n[[equivalent]]\n'
        'module = "compat/device.py"\nfunction = "f"\nline = 3\nbefore = "a"\nafter = "b"\n'
        'why = "w"\ncells = ["torch2.4-ao0.7-cpu"]',
        "equivalent[0].cells",
        "torch2.4-ao0.7-cpu",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_a_bad_plan_is_refused_naming_the_field_and_the_value(tmp_path: Path, case: str) -> None:
    body, field_name, value = BAD_PLANS[case]
    plan = tmp_path / "mutation.toml"
    plan.write_text(
        '[run]\ngoal = 0.95\ngoal_modules = ["compat/device.py"]\ntests = ["tests"]\n' + body
    )
    with pytest.raises(Refused) as info:
        mutation_plan.load(plan)
    assert field_name in str(info.value) and value in str(info.value)
    done = cli("--plan", str(plan))
    assert done.returncode == mutation.REFUSED and field_name in done.stderr


def test_a_goal_out_of_range_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "mutation.toml"
    plan.write_text('[run]\ngoal = 1.5\ngoal_modules = ["compat/device.py"]\ntests = ["tests"]\n')
    with pytest.raises(Refused, match=r"run\.goal: is not a number in \(0, 1\] \(got 1\.5\)"):
        mutation_plan.load(plan)


# --- refusals before anything is installed -----------------------------------------------------------


def test_an_unsupported_cell_is_refused() -> None:
    done = cli("--cell", "torch2.5-ao0.7-cpu")
    assert done.returncode == mutation.REFUSED
    assert (
        "unsupported cell 'torch2.5-ao0.7-cpu': mutation.toml mutates in torch2.6-ao0.8-cpu, "
        "torch2.15-ao0.18-cpu, torch2.3-ao0.6-cpu only" in done.stderr
    )


def test_a_dirty_work_tree_is_refused(tmp_path: Path) -> None:
    repo = git_repo(tmp_path, {"compat/x.py": "a = 1\n"})
    (repo / "compat" / "x.py").write_text("a = 2\n")
    (repo / "new.txt").write_text("untracked\n")
    done = cli("--root", str(repo))
    assert done.returncode == mutation.REFUSED
    assert "the working tree differs from HEAD (2 path(s): compat/x.py, new.txt)" in done.stderr
    assert "commit or stash first" in done.stderr
    (repo / "new.txt").unlink()
    subprocess.run(["git", "checkout", "-q", "compat/x.py"], cwd=repo, check=True)
    (repo / "reports").mkdir()
    (repo / "reports" / mutation.REPORT_NAME).write_text("{}")  # the run's own output
    assert (
        mutation.check_clean(repo)
        == subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
    )


def test_an_interpreter_without_the_cell_or_the_tool_is_refused(tmp_path: Path) -> None:
    # a real, empty venv: neither torch nor mutmut
    venv = ("--without-pip", tmp_path / "v")
    run_module("venv", *venv, cwd=None, check=True, text=False, capture=False)
    python = tmp_path / "v" / "bin" / "python"
    repo = git_repo(tmp_path, {"compat/x.py": "a = 1\n"})
    done = cli("--cell", "torch2.6-ao0.8-cpu", "--python", str(python), "--root", str(repo))
    assert done.returncode == mutation.REFUSED
    pin = mutation.tool_pin()
    assert (
        f"torch==2.6.0 (found nothing), torchao==0.8.0 (found nothing), mutmut=={pin} (found nothing)"
        in done.stderr
    )
    assert "nox -s mutation builds one" in done.stderr


def test_a_sample_without_since_is_refused() -> None:
    done = cli("--sample", "5")
    assert done.returncode == mutation.REFUSED and "give --since REF too" in done.stderr


def test_since_with_no_changed_line_of_compat_stops_before_installing_anything(
    tmp_path: Path,
) -> None:
    # a real, empty venv: reached (and refused) only once a line of compat/ changed
    venv = ("--without-pip", tmp_path / "v")
    run_module("venv", *venv, cwd=None, check=True, text=False, capture=False)
    python = str(tmp_path / "v" / "bin" / "python")
    repo = git_repo(tmp_path, {"compat/x.py": "a = 1\n", "tests/test_x.py": "A = 1\n"})

    def commit(rel: str, text: str) -> subprocess.CompletedProcess[str]:
        (repo / rel).write_text(text)
        git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost"]
        subprocess.run([*git, "commit", "-q", "-am", rel], check=True)
        args = ("--cell", "torch2.6-ao0.8-cpu", "--python", python, "--root", str(repo))
        return cli(*args, "--since", "HEAD~1")

    done = commit("tests/test_x.py", "A = 2\n")
    assert done.returncode == 0, done.stderr
    assert "[mutation] no line of compat/ changed since HEAD~1: no mutant to judge" in done.stdout
    done = commit("compat/x.py", "a = 2\n")
    assert done.returncode == mutation.REFUSED and "(found nothing)" in done.stderr


# --- choosing mutants --------------------------------------------------------------------------------


def test_changed_lines_are_those_of_head_since_the_merge_base(tmp_path: Path) -> None:
    repo = git_repo(
        tmp_path, {"compat/x.py": "".join(f"line{i}\n" for i in range(1, 11)), "other.py": "x\n"}
    )
    subprocess.run(["git", "checkout", "-q", "-b", "work"], cwd=repo, check=True)
    lines = (repo / "compat" / "x.py").read_text().splitlines()
    lines[2] = "changed3"  # line 3 changed
    lines[6:7] = ["new7a", "new7b"]  # line 7 replaced by two
    (repo / "compat" / "x.py").write_text("\n".join(lines) + "\n")
    (repo / "other.py").write_text("y\n")  # outside compat/: never mutated
    commit_all(repo, "work")
    assert mutation.changed_lines(repo, "main") == {"compat/x.py": {3, 7, 8}}


def entries(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"m{i:02d}", "module": "compat/x.py", "line": i, "end_line": i + (i == 5)}
        for i in range(1, n + 1)
    ]


def test_select_takes_changed_lines_and_a_fixed_seeded_sample() -> None:
    mutants = entries(30)
    assert mutation.select(mutants, None, 0, 0) == [m["id"] for m in mutants]
    assert mutation.select(mutants, {"compat/x.py": {6}}, 0, 0) == ["m05", "m06"]  # m05 spans 5-6
    sampled = mutation.select(mutants, {"compat/x.py": {6}}, 4, 0)
    assert {"m05", "m06"} <= set(sampled) and len(sampled) == 6
    assert mutation.select(mutants, {"compat/x.py": {6}}, 4, 0) == sampled  # the same each time
    assert mutation.select(mutants, {}, 40, 0) == sorted(m["id"] for m in mutants)  # all there are


# --- scoring --------------------------------------------------------------------------------------


def mutant(i: int, status: str, after: str = "x = 2", **extra: Any) -> dict[str, Any]:
    return {
        "id": f"compat.x.x_f__mutmut_{i}",
        "module": "compat/x.py",
        "function": "f",
        "line": 10,
        "end_line": 10,
        "before": "x = 1",
        "after": after,
        "tool_status": status,
        "killed_by": None,
        **extra,
    }


def small_plan(tmp_path: Path, equivalents: str = "") -> mutation_plan.Plan:
    plan = tmp_path / "mutation.toml"
    plan.write_text(
        '[run]\ngoal = 0.95\ngoal_modules = ["compat/x.py"]\ntests = ["tests"]\n'
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["compat/*.py"]\n' + equivalents
    )
    return mutation_plan.load(plan)


EQUIVALENT = '[[equivalent]]\nmodule = "compat/x.py"\nfunction = "f"\nline = 12\nbefore = "x = 1"\nafter = "  x = 3  "\nwhy = "x is never read"\n'


def test_the_score_is_over_the_non_equivalent_mutants_and_timeouts_count_as_detected(
    tmp_path: Path,
) -> None:
    plan = small_plan(tmp_path, EQUIVALENT)
    rows = [mutant(i, "killed") for i in range(17)] + [
        mutant(17, "timeout"),
        mutant(18, "segfault"),
        mutant(19, "survived", "x = 3"),
    ]
    classified, problems = mutation_report.classify(plan, "torch2.6-ao0.8-cpu", rows)
    assert problems == []
    assert (
        classified[-1]["equivalent"] == "x is never read" and classified[-1]["listed_at_line"] == 12
    )
    (score,) = mutation_report.scores(plan, classified).values()
    assert (score["mutants"], score["equivalent"], score["killed"], score["timeout"]) == (
        20,
        1,
        18,
        1,
    )
    assert score["score"] == 1.0 and score["met"] is True
    # one survivor that is not listed: 19 of 20
    classified, _ = mutation_report.classify(
        plan, "torch2.6-ao0.8-cpu", [*rows[:-1], mutant(19, "survived", "x = 4")]
    )
    (score,) = mutation_report.scores(plan, classified).values()
    assert score["score"] == 0.95 and score["met"] is True
    classified, _ = mutation_report.classify(
        plan,
        "torch2.6-ao0.8-cpu",
        [*rows[:-2], mutant(18, "no tests"), mutant(19, "survived", "x = 4")],
    )
    (score,) = mutation_report.scores(plan, classified).values()
    assert score["not covered"] == 1 and score["score"] == 0.9 and score["met"] is False


def test_a_listed_mutant_a_test_kills_or_one_matching_nothing_fails_the_run(tmp_path: Path) -> None:
    plan = small_plan(tmp_path, EQUIVALENT)
    killed = mutant(1, "killed", "x = 3", killed_by="tests/test_x.py::test_x")
    _, problems = mutation_report.classify(plan, "torch2.6-ao0.8-cpu", [killed])
    assert problems == [
        "torch2.6-ao0.8-cpu: compat/x.py:10 is listed as equivalent, but tests/test_x.py::test_x kills it (x = 3)"
    ]
    classified, _ = mutation_report.classify(
        plan, "torch2.6-ao0.8-cpu", [mutant(1, "survived", "x = 4")]
    )
    mutated = {"torch2.6-ao0.8-cpu": ["compat/x.py"]}
    assert mutation_report.stale(plan, classified, mutated) == [
        "mutation.toml: the equivalent compat/x.py:12 (f: 'x = 3') matches no mutant in torch2.6-ao0.8-cpu"
    ]
    # a cell that does not mutate the entry's module has nothing to match (a --cell run of it)
    assert mutation_report.stale(plan, [], {"torch2.3-ao0.6-cpu": ["compat/device.py"]}) == []
    _, problems = mutation_report.classify(plan, "torch2.6-ao0.8-cpu", [mutant(2, "suspicious")])
    assert problems == [
        "torch2.6-ao0.8-cpu: compat.x.x_f__mutmut_2 was left undecided by mutmut (suspicious)"
    ]


def test_an_incremental_run_judges_the_changed_lines_and_only_reports_the_sample(
    tmp_path: Path,
) -> None:
    plan = small_plan(tmp_path)
    mode = "changed lines since the merge base, plus 2 sampled (seed 0)"

    def run(*rows: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        one = mutation_report.CellRun("torch2.6-ao0.8-cpu", ["compat/x.py"], {}, mode, list(rows))
        one.seconds["wall"] = 1.0
        return mutation_report.build_report(plan, [one], commit="0" * 40, jobs=2)

    changed = [mutant(i, "killed", picked="changed") for i in range(3)]
    sample_survivor = mutant(9, "survived", "x = 9", picked="sample")
    report, problems = run(*changed, sample_survivor, mutant(8, "killed", picked="sample"))
    assert problems == []  # a surviving sampled mutant is an estimate, not a verdict
    cell = report["cells"]["torch2.6-ao0.8-cpu"]
    assert cell["changed_lines_together"]["score"] == 1.0
    assert cell["sample_together"]["score"] == 0.5
    assert cell["scores"]["compat/x.py"]["met"] is None  # no per-module verdict from a few
    shown = mutation_report.table(report)
    assert "| changed lines, goal modules (judged) | 100.0% (3/3) |" in shown
    assert "| the sample, goal modules (an estimate) | 50.0% (1/2) |" in shown
    # a survivor in a changed line fails the run, named with its line and change
    _, problems = run(*changed, mutant(5, "survived", "x = 5", picked="changed"))
    assert problems == [
        "torch2.6-ao0.8-cpu: the mutants in changed lines of the goal modules score 75.0%"
        " together, below the goal of 95%; not detected: compat/x.py:10 (x = 5)"
    ]


# --- a resurvey -----------------------------------------------------------------------------------


def base_report(repo: Path, cell: str = "torch2.6-ao0.8-cpu") -> Path:
    """A full run's report of ``repo``'s HEAD: one detected mutant, one survivor."""
    commit = mutation.git(repo, "rev-parse", "HEAD").strip()
    rows = [
        {**mutant(1, "killed"), "cell": cell, "status": "killed", "equivalent": None},
        {**mutant(2, "survived", "x = 3"), "cell": cell, "status": "survived", "equivalent": None},
    ]
    cells = {cell: {"mode": "full", "installed": {"torch": "2.6.0"}, "seconds": {"wall": 9.0}}}
    path = repo.parent / "base.json"
    path.write_text(json.dumps({"commit": commit, "cells": cells, "mutants": rows}))
    return path


def resurvey_plan(tmp_path: Path) -> mutation_plan.Plan:
    plan = tmp_path / "mutation.toml"
    plan.write_text(
        '[run]\ngoal = 0.95\ngoal_modules = ["compat/x.py"]\n'
        'tests = ["tests/compat", "--deselect=tests/compat/test_x.py::test_slow"]\n'
        '[[cell]]\ncell = "torch2.6-ao0.8-cpu"\nmodules = ["compat/*.py"]\n'
    )
    return mutation_plan.load(plan)


def test_a_resurvey_carries_only_what_the_full_run_detected(tmp_path: Path) -> None:
    files = {"compat/x.py": "x = 1\n", "tests/compat/test_x.py": "", "tests/harness/test_h.py": ""}
    repo = git_repo(tmp_path, files)
    report, plan = base_report(repo), resurvey_plan(tmp_path)
    (repo / "tests" / "compat" / "test_new.py").write_text("def test_new() -> None: ...\n")
    (repo / "tests" / "harness" / "test_h.py").write_text("# the plan does not run these\n")
    commit_all(repo, "new tests only")
    (base,) = mutation.load_base(report, repo, plan, ["torch2.6-ao0.8-cpu"]).values()
    catalog = [mutant(1, "killed"), mutant(2, "survived", "x = 3")]
    carried = mutation.carry(base, catalog)
    assert [m["id"] for m in carried] == ["compat.x.x_f__mutmut_1"]
    assert carried[0]["carried_from"] == base["commit"]
    with pytest.raises(RuntimeError, match="other mutants than this catalogue"):
        mutation.carry(base, [*catalog, mutant(3, "killed")])
    with pytest.raises(RuntimeError, match="other mutants"):
        mutation.carry(base, [catalog[0], mutant(2, "survived", "x = 4")])  # another change
    # a resurvey judges every mutant: the goal is judged per module, as in a full run
    one = mutation_report.CellRun("torch2.6-ao0.8-cpu", ["compat/x.py"], {}, "resurvey")
    one.base = {"commit": base["commit"], "seconds": {"wall": 9.0}, "carried": 1, "run_again": 1}
    one.mutants = [*carried, mutant(2, "survived", "x = 3")]
    one.seconds["wall"] = 2.0
    built, problems = mutation_report.build_report(plan, [one], commit="0" * 40, jobs=2)
    assert problems == ["torch2.6-ao0.8-cpu: compat/x.py scores 50.0%, below the goal of 95%"]
    assert "| wall time | 2 s (resurvey; the full run: 9 s) |" in mutation_report.table(built)


TESTS_BASE = """\"\"\"Tests of x.\"\"\"

import pytest

from compat.x import x

LIMIT = 2


@pytest.fixture
def value():
    return x


def test_x(value):
    assert value == 1
"""

GROWN = (
    TESTS_BASE.replace('"""Tests of x."""', '"""Tests of x, more."""')
    + """

import math

# a comment


def test_x_is_finite(value):
    assert math.isfinite(value)
"""
)


@pytest.mark.parametrize(
    ("change", "text", "refusal"),
    [
        (
            "tests/compat/test_x.py",
            TESTS_BASE.replace("== 1", "== 1 or True"),
            r"tests/compat/test_x\.py \(M: line 15 of the old file changed or went\)",
        ),
        (
            "tests/compat/test_x.py",
            TESTS_BASE.replace("LIMIT = 2\n", ""),
            r"\(M: line 7 of the old file changed or went\)",
        ),
        (
            "tests/compat/test_x.py",
            TESTS_BASE + "\nLIMIT2 = 3\n",
            r"\(M: line 18 adds a statement that is not a definition or an import\)",
        ),
        (
            "tests/compat/test_x.py",
            TESTS_BASE + "\n\ndef value():\n    return 2\n",
            r"\(M: line 19 binds value again\)",
        ),
        (
            "tests/compat/test_x.py",
            TESTS_BASE + "\n\nfrom compat.y import x\n",
            r"\(M: line 19 binds x again\)",
        ),
        (
            "tests/compat/test_x.py",
            TESTS_BASE + "\n\n@pytest.fixture(autouse=True)\ndef other():\n    yield\n",
            r"\(M: line 20 adds an autouse fixture\)",
        ),
        (
            "tests/compat/test_x.py",
            TESTS_BASE + "\n\ndef pytest_runtest_setup(item):\n    pass\n",
            r"\(M: line 19 adds a hook\)",
        ),
        (
            "tests/compat/test_x.py",
            TESTS_BASE + "\ndef broken(:\n",
            r"\(M: does not parse \(invalid syntax\)\)",
        ),
        (
            "tests/compat/sub/conftest.py",
            "x = 2\n",
            r"tests/compat/sub/conftest\.py \(an added conftest\)",
        ),
        ("tests/compat/data.txt", "other", r"tests/compat/data\.txt \(M\)"),
        ("tests/common/helper.py", "x = 3\n", r"tests/common/helper\.py \(M"),
    ],
)
def test_a_resurvey_refuses_a_base_whose_tests_changed(
    tmp_path: Path, change: str, text: str, refusal: str
) -> None:
    files = {
        "compat/x.py": "x = 1\n",
        "tests/compat/test_x.py": TESTS_BASE,
        "tests/compat/data.txt": "data",
        "tests/common/helper.py": "x = 2\n",
    }
    repo = git_repo(tmp_path, files)
    report, plan = base_report(repo), resurvey_plan(tmp_path)
    (repo / change).parent.mkdir(parents=True, exist_ok=True)
    (repo / change).write_text(text)
    commit_all(repo, "a change")
    with pytest.raises(mutation.Refused, match=r"tests changed since \w{12}: " + f".*{refusal}"):
        mutation.load_base(report, repo, plan, ["torch2.6-ao0.8-cpu"])


def test_a_resurvey_builds_on_a_base_whose_tests_only_grew(tmp_path: Path) -> None:
    """New tests in an old file (an import, a test, a new docstring, comments) and a new test
    file: the tests that killed the base's mutants are all there unchanged."""
    files = {"compat/x.py": "x = 1\n", "tests/compat/test_x.py": TESTS_BASE}
    repo = git_repo(tmp_path, files)
    report, plan = base_report(repo), resurvey_plan(tmp_path)
    (repo / "tests/compat/test_x.py").write_text(GROWN)
    (repo / "tests/compat/test_y.py").write_text("def test_y():\n    pass\n")
    commit_all(repo, "more tests")
    bases = mutation.load_base(report, repo, plan, ["torch2.6-ao0.8-cpu"])
    assert list(bases) == ["torch2.6-ao0.8-cpu"]


X_BASE = """\"\"\"A module.\"\"\"

LIMIT = 3


def f(a):
    \"\"\"Doc.\"\"\"
    return a + 1


class C:
    size = 2

    def g(self, a):
        return a * 2
"""


def fg_rows(cell: str = "torch2.6-ao0.8-cpu") -> list[dict[str, Any]]:
    """Detected mutants of f and C.g, and a survivor of f, as a full run reports them."""
    rows = []
    for i, (function, before, after, status) in enumerate(
        [
            ("f", "return a + 1", "return a - 1", "killed"),
            ("f", "return a + 1", "return a + 2", "survived"),
            ("C.g", "return a * 2", "return a / 2", "killed"),
        ]
    ):
        rows.append(
            {
                "id": f"compat.x.m_{function}__mutmut_{i}",
                "module": "compat/x.py",
                "function": function,
                "line": 10,
                "end_line": 10,
                "before": before,
                "after": after,
                "cell": cell,
                "status": status,
                "tool_status": status,
                "killed_by": None,
                "equivalent": None,
            }
        )
    return rows


@pytest.mark.parametrize(
    ("edit", "changed", "carried"),
    [
        # comments, docstrings and layout are not code: everything detected is carried
        (
            lambda t: t.replace('"""Doc."""', '"""Other words."""').replace(
                "LIMIT = 3", "# a comment\nLIMIT = 3  # why"
            ),
            {},
            ["compat.x.m_f__mutmut_0", "compat.x.m_C.g__mutmut_2"],
        ),
        # one method changed: its mutants run again, the other function's are carried
        (
            lambda t: t.replace("return a * 2", "return a * 2 + 0"),
            {"compat/x.py": {"C.g"}},
            ["compat.x.m_f__mutmut_0"],
        ),
        # a constant or a class attribute any function may read: the module runs again
        (lambda t: t.replace("LIMIT = 3", "LIMIT = 4"), {"compat/x.py": None}, []),
        (lambda t: t.replace("size = 2", "size = 5"), {"compat/x.py": None}, []),
    ],
    ids=["comments-and-docstrings", "one-method", "a-constant", "a-class-attribute"],
)
def test_a_resurvey_carries_per_function(
    tmp_path: Path, edit: Any, changed: dict[str, Any], carried: list[str]
) -> None:
    repo = git_repo(tmp_path, {"compat/x.py": X_BASE, "tests/test_x.py": ""})
    commit = mutation.git(repo, "rev-parse", "HEAD").strip()
    report = tmp_path / "base.json"
    cells = {"torch2.6-ao0.8-cpu": {"mode": "full", "installed": {}, "seconds": {"wall": 9.0}}}
    report.write_text(json.dumps({"commit": commit, "cells": cells, "mutants": fg_rows()}))
    (repo / "compat" / "x.py").write_text(edit(X_BASE))
    commit_all(repo, "an edit")
    (base,) = mutation.load_base(report, repo, resurvey_plan(tmp_path), list(cells)).values()
    assert base["changed"] == changed
    # the catalogue of today: the same mutants, f's two lines further down
    catalog = [{**m, "line": m["line"] + (2 if m["function"] == "f" else 0)} for m in fg_rows()]
    got = mutation.carry(base, catalog)
    assert [m["id"] for m in got] == carried
    assert all(m["carried_from"] == commit for m in got)
    assert all(m["line"] == 12 for m in got if m["function"] == "f")


def test_a_resurvey_refuses_an_unchanged_function_whose_mutants_differ(tmp_path: Path) -> None:
    base = {"commit": "a" * 40, "rows": fg_rows(), "changed": {"compat/x.py": {"C.g"}}}
    catalog = fg_rows()
    catalog[1] = {**catalog[1], "after": "return a + 3"}  # f did not change, its mutant did
    with pytest.raises(RuntimeError, match="in the functions that did not change"):
        mutation.carry(base, catalog)
    # a changed function's mutants may differ: they run again
    catalog = [*fg_rows()[:2], {**fg_rows()[2], "after": "return a // 2"}]
    assert [m["id"] for m in mutation.carry(base, catalog)] == ["compat.x.m_f__mutmut_0"]


def test_a_resurvey_refuses_a_report_it_cannot_build_on(tmp_path: Path) -> None:
    repo = git_repo(tmp_path, {"compat/x.py": "x = 1\n"})
    plan = resurvey_plan(tmp_path)
    report = base_report(repo)
    cells = ["torch2.6-ao0.8-cpu"]
    with pytest.raises(mutation.Refused, match=r"holds no full run of torch2\.3-ao0\.6-cpu"):
        mutation.load_base(report, repo, plan, ["torch2.3-ao0.6-cpu"])
    report.write_text(json.dumps({"commit": "f" * 40, "cells": {}}))
    with pytest.raises(mutation.Refused, match="ffffffffffff is not an ancestor of HEAD"):
        mutation.load_base(report, repo, plan, cells)
    report.write_text(json.dumps({"commit": "HEAD"}))
    with pytest.raises(mutation.Refused, match="no 'commit' of 40 hex digits in it; got 'HEAD'"):
        mutation.load_base(report, repo, plan, cells)
    report.write_text("{not json")
    with pytest.raises(mutation.Refused, match="not a readable JSON report"):
        mutation.load_base(report, repo, plan, cells)


def test_resurvey_and_since_together_are_refused() -> None:
    done = cli("--resurvey", "reports/mutation.json", "--since", "main")
    assert done.returncode == mutation.REFUSED
    assert "--resurvey judges every mutant and --since only some: give one" in done.stderr


def test_change_lines_rewrites_only_the_node() -> None:
    lines = ["def f(x):\n", "    return g(x, 1)  # note\n"]
    assert mutation_tool.change_lines(lines, (2, 16), (2, 17), "2") == (
        "    return g(x, 1)  # note",
        "    return g(x, 2)  # note",
    )
    two = ["    y = (a +\n", "         b)\n"]
    assert mutation_tool.change_lines(two, (1, 9), (2, 10), "None") == (
        "    y = (a +\n         b)",
        "    y = (None)",
    )


def test_the_mutmut_configuration_names_the_modules_the_tests_and_the_plugin(
    tmp_path: Path,
) -> None:
    for name in ("compat", "tests", "harness", "docs"):
        (tmp_path / name).mkdir()
    (tmp_path / "README.md").write_text("")
    plan = mutation_plan.load()
    text = mutation.mutmut_config(plan, ["compat/device.py"], tmp_path)
    config = tomllib.loads(text)["tool"]["mutmut"]
    assert config["only_mutate"] == ["compat/device.py"]
    assert config["pytest_add_cli_args_test_selection"] == list(plan.tests)
    assert config["pytest_add_cli_args"][:2] == ["-p", "harness.mutation.tool"]
    assert config["also_copy"] == ["README.md", "docs/", "harness/"]


# --- the committed report ---------------------------------------------------------------------------


def committed_report() -> dict[str, Any]:
    return dict(json.loads(REPORT.read_text(encoding="utf-8")))


def test_the_committed_report_is_a_full_run_in_every_cell_of_the_plan() -> None:
    report = committed_report()
    plan = mutation_plan.load()
    matrix = spec.load()
    assert list(report["cells"]) == list(plan.cells)
    assert re.fullmatch(r"[0-9a-f]{40}", report["commit"])
    for cell_id, cell in report["cells"].items():
        pins = next(c for c in matrix.cells(tiers=spec.TIERS) if c.id == cell_id)
        if cell["mode"] != "full":  # a resurvey carries the detected verdicts of a full run
            assert cell["mode"].startswith("resurvey of the full run at ")
            assert cell["base"]["seconds"]["wall"] > 0
        assert (
            cell["installed"]["torch"] == pins.torch.pin
            and cell["installed"]["torchao"] == pins.torchao.pin
        )
        assert cell["seconds"]["wall"] > 0
        mine = [m for m in report["mutants"] if m["cell"] == cell_id]
        assert {m["module"] for m in mine} <= set(cell["modules"])
        assert all(m["status"] in ("killed", "timeout", "survived", "not covered") for m in mine)
        assert sum(s["mutants"] for s in cell["scores"].values()) == len(mine)


def git_out(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def test_the_committed_report_is_of_a_commit_of_this_history() -> None:
    report = committed_report()
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{report['commit']}^{{commit}}"], cwd=ROOT, check=False
    )
    if known.returncode != 0 and (
        git_out("rev-parse", "--is-shallow-repository") == "true"
        or git_out("rev-list", "--count", "HEAD") == "1"
    ):
        pytest.skip(
            f"the report's commit {report['commit'][:12]} is not in this checkout: a shallow "
            "clone (actions/checkout fetches one commit) or a one-commit copy has no history"
        )
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", report["commit"], "HEAD"], cwd=ROOT, check=False
    )
    assert ancestor.returncode == 0, "the report's commit is in this branch's history"
    for cell in report["cells"].values():
        if cell["mode"] != "full":
            base = subprocess.run(
                [
                    "git",
                    "diff",
                    "--quiet",
                    cell["base"]["commit"],
                    report["commit"],
                    "--",
                    "compat/",
                ],
                cwd=ROOT,
                check=False,
            )
            assert base.returncode == 0, "the full run it builds on tested the same compat/"


def test_the_committed_report_scored_with_the_equivalents_meets_the_goal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # re-scored with today's mutation.toml: every entry still matches, no goal module is short
    assert mutation.score(["--from", str(REPORT)]) == 0, capsys.readouterr().err


def test_the_documented_table_is_the_committed_report() -> None:
    readme = (ROOT / "docs" / "mutation.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- mutation table -->\n(.*?)\n<!-- /mutation table -->", readme, re.S)
    assert found, "docs/mutation.md holds the table between <!-- mutation table --> markers"
    assert found.group(1).strip() == mutation_report.table(committed_report()).strip()
