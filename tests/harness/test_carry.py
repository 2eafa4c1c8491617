"""Carried verdicts (harness/cells/carry.py), on real cells: a throwaway project whose three TorchAO
cells of torch 2.6 share a venv, run by the real noxfile. Each backend of its matrix.toml gives
the suite one behaviour (``CARRY`` in the backend's env): an independent test that fails, a test
that touches TorchAO while collecting, and a test that depends on TorchAO in a way the block
cannot see (it reads ``sys.modules``): the carried run takes that suite for a clean one, only a
full run catches it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.common.harness.faultproject import AO, Project, ao_pin, index_env

SUITE = '''
"""Tests whose dependence on TorchAO is known, and one that lies about it."""
import json, os, sys
from pathlib import Path

CELL = json.loads(Path(os.environ["COMPAT_MATRIX_CELL"]).read_text())
CARRY = os.environ.get("CARRY", "clean")
if CARRY == "collect":
    try:  # reached while collecting, even swallowed: nothing can be carried
        import torchao  # noqa: F401
    except Exception:
        pass


def test_plain():
    assert sum([1, 2]) == 3 or CARRY == "broken", "an independent failure"
    assert CARRY != "broken", "an independent failure"


def test_imports_torchao():
    import torchao

    assert torchao.__version__.startswith(CELL["torchao"])


def test_swallows_the_block():
    try:
        import torchao.quantization  # noqa: F401
    except Exception:
        return  # swallowed: the block still saw the attempt
    assert "torchao.quantization" in sys.modules


def test_varies():
    assert CELL["torchao"] != "0.7", "fails with TorchAO 0.7 only, without touching it"


def test_sly():
    assert CARRY != "sly" or "torchao" not in sys.modules, "depends on TorchAO unseen"
'''

# an independent test alone in its file, which logs each time pytest imports (collects) it: the
# cells that carry its verdict never collect it (their runs get only the dependent tests' files)
ALONE = """
import json, os
from pathlib import Path

CELL = json.loads(Path(os.environ["COMPAT_MATRIX_CELL"]).read_text())
with open(Path(__file__).with_name("collected.log"), "a") as log:
    log.write(CELL["id"] + "\\n")
# how many sessions the harness said share this cell's deadline (tests/common/budget.py splits by it)
with open(Path(__file__).with_name("sessions.log"), "a") as log:
    log.write(CELL["id"] + " " + os.environ.get("COMPAT_MATRIX_SESSIONS", "1") + "\\n")


def test_alone():
    pass
"""

# applies matrix.toml's expected failures, as the real suite's conftest does
CONFTEST = """
import fnmatch, json, os
from pathlib import Path

import pytest

CELL = json.loads(Path(os.environ["COMPAT_MATRIX_CELL"]).read_text())


def pytest_collection_modifyitems(items):
    for item in items:
        for entry in CELL["xfails"]:
            if any(fnmatch.fnmatchcase(item.nodeid, p) for p in entry["tests"]):
                item.add_marker(pytest.mark.xfail(reason=entry["reason"], strict=entry["strict"]))
"""

# sly behaves as a clean suite wherever TorchAO is importable or blocked alike: the carried run
# cannot tell it from one (the tests below read it as the clean suite); only a full run can
BACKENDS = ("sly", "broken", "collect")


def matrix_text() -> str:
    lines = [
        "[run]",
        'python = ["3.11"]',
        "cell_timeout_s = 120",
        'default_cell = { torch = "2.6", torchao = "0.6", backend = "sly" }',
        'test_requirements = ["requirements/test.txt"]',
        'carry = ["torchao"]',
        "",
        "[[torch]]",
        'version = "2.6"',
        'pin = "2.6.0"',
    ]
    for ao in AO:
        lines += ["", "[[torchao]]", f'version = "{ao}"', f'pin = "{ao_pin(ao)}"']
        if ao == "0.8":
            lines.append('extra = ["setuptools"]')
    for name in BACKENDS:
        lines += [
            "",
            f"[backends.{name}]",
            'platforms = ["linux"]',
            'torch_probe = "torch.zeros(2).add(1).sum().item() == 2"',
            f'index_env = "{index_env()}"',  # torch from where the warm-up took it
            f'env = {{ CARRY = "{name}" }}',
        ]
    lines.append(
        textwrap.dedent(
            """
            [[xfail]]
            tests = ["tests/test_carry.py::test_varies"]
            torchao = ["0.7"]
            reason = "varies with TorchAO: must run in every cell, never be carried"
            """
        )
    )
    return "\n".join(lines) + "\n"


def cell_id(ao: str, backend: str) -> str:
    return f"torch2.6-ao{ao}-{backend}"


SOURCE = "0.6"  # the first cell of each group makes the blocked run
DEPENDENT = {"test_imports_torchao", "test_swallows_the_block", "test_varies"}
NODE = "tests/test_carry.py::"
ALONE_NODE = "tests/test_alone.py::test_alone"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, fault_envdir: Path) -> Project:
    root = tmp_path_factory.mktemp("carry") / "project"
    made = Project.create(root, fault_envdir, matrix_text())
    (root / "tests" / "test_fault.py").unlink()
    (root / "tests" / "conftest.py").write_text(CONFTEST)
    (root / "tests" / "test_carry.py").write_text(SUITE)
    (root / "tests" / "test_alone.py").write_text(ALONE)
    return made


@pytest.fixture(scope="module")
def carried(project: Project) -> dict[str, Any]:
    done = project.nox("-s", "matrix", "--", "--jobs", "2", timeout=600)
    cells = {cid: project.cell(cid) for cid in (cell_id(a, b) for a in AO for b in BACKENDS)}
    return {"done": done, "cells": cells, "matrix": project.matrix_json()}


def test_a_carry_sources_two_sessions_each_know_they_share_its_deadline(
    carried: dict[str, Any], project: Project
) -> None:
    """The blocked run and the source's own run share one deadline: each is told so, and the
    nightly's time budget (tests/common/budget.py) gives each half; a cell that runs once is told 1."""
    lines = (project.root / "tests" / "sessions.log").read_text().splitlines()
    told = [tuple(line.split()) for line in lines]
    assert (cell_id(SOURCE, "sly"), "2") in told  # the blocked run collects test_alone.py
    collect = sorted(t for t in told if t[0].endswith("-collect"))
    assert collect == sorted(
        [(cell_id(SOURCE, "collect"), "2")] * 2 + [(cell_id(ao, "collect"), "1") for ao in AO[1:]]
    )


def test_independent_verdicts_are_carried_and_named_with_their_source(
    carried: dict[str, Any],
) -> None:
    cells = carried["cells"]
    source = cell_id(SOURCE, "sly")
    assert cells[source]["status"] == "passed", cells[source]["reason"]
    assert cells[source]["carried"] == {}
    assert cells[source]["hypothesis_profile"] == "ci"  # the matrix's default Python
    assert cells[source]["carry"] == {"axis": "torchao", "source": source, "run": 6, "carried": 0}
    for ao in ("0.7", "0.8"):
        cell = cells[cell_id(ao, "sly")]
        assert cell["status"] == "passed", cell["reason"]
        assert cell["carried"] == {
            NODE + "test_plain": source,
            NODE + "test_sly": source,
            ALONE_NODE: source,
        }
        assert cell["carry"] == {"axis": "torchao", "source": source, "run": 3, "carried": 3}
        # a cell's record holds every test, carried ones included
        assert set(cell["tests"]) == {
            *(NODE + t for t in (*DEPENDENT, "test_plain", "test_sly")),
            ALONE_NODE,
        }


def test_the_blocked_run_prints_one_line_and_no_expected_failure(
    carried: dict[str, Any], project: Project
) -> None:
    out = carried["done"].stdout
    # the dependent tests fail under the block by design: in the cell's log, not the terminal
    assert "Blocked: import torchao" not in out and "test_imports_torchao FAILED" not in out
    source = project.reports / "cells" / cell_id(SOURCE, "sly")
    assert "Blocked: import torchao" in (source / "output.log").read_text()
    said = "[carry] the suite with torchao blocked: 3 tests never reach it and are carried to"
    assert out.count(said) == 2, out  # sly and broken; collect's carrying is refused
    assert "; 3 reach it (their failures under the block are expected)" in out
    assert "[carry] torchao blocked: carrying refused (TorchAO was reached outside any test" in out
    # an independent test that fails reads as failed, once, with the cells it fails
    assert (
        out.count("[carry] FAILED, carried to every cell: 1 (tests/test_carry.py::test_plain)") == 1
    )


def test_a_run_of_dependent_tests_collects_only_their_files(project: Project) -> None:
    # pytest imported test_alone.py in the blocked run, never in a run of dependent tests:
    # those collect only tests/test_carry.py
    log = (project.root / "tests" / "collected.log").read_text().split()
    assert sorted(c for c in log if c.endswith("-sly")) == [cell_id(SOURCE, "sly")]
    # carrying refused: the blocked run and every cell's own run collect everything
    assert sorted(c for c in log if c.endswith("-collect")) == sorted(
        [cell_id(SOURCE, "collect"), *(cell_id(ao, "collect") for ao in AO)]
    )


def test_a_test_that_reaches_torchao_runs_in_every_cell_even_when_it_swallows_the_block(
    carried: dict[str, Any], project: Project
) -> None:
    leaks = json.loads(
        (
            project.reports / "cells" / cell_id(SOURCE, "sly") / "independent" / "leaks.json"
        ).read_text()
    )["leaks"]
    assert {x["test"] for x in leaks} == {
        NODE + "test_imports_torchao",
        NODE + "test_swallows_the_block",
    }
    for ao in AO:
        cell = carried["cells"][cell_id(ao, "sly")]
        for name in DEPENDENT:
            assert NODE + name not in cell["carried"]
        # run with TorchAO present: the swallowing test saw the real module
        assert cell["tests"][NODE + "test_swallows_the_block"] == "passed"
        assert cell["tests"][NODE + "test_imports_torchao"] == "passed"


def test_an_expected_failure_that_varies_with_torchao_keeps_its_test_out_of_carrying(
    carried: dict[str, Any],
) -> None:
    outcomes = {
        ao: carried["cells"][cell_id(ao, "sly")]["tests"][NODE + "test_varies"] for ao in AO
    }
    assert outcomes == {"0.6": "passed", "0.7": "xfailed", "0.8": "passed"}


def test_a_carried_failure_fails_every_cell_it_stands_for(carried: dict[str, Any]) -> None:
    source = cell_id(SOURCE, "broken")
    for ao in AO:
        cell = carried["cells"][cell_id(ao, "broken")]
        assert cell["status"] == "failed"
        assert cell["reason"] == "1 failed, 0 errors"
        assert [f["nodeid"] for f in cell["failures"]] == [NODE + "test_plain"]
        assert "an independent failure" in cell["failures"][0]["message"]
        if ao != SOURCE:
            assert cell["carried"][NODE + "test_plain"] == source
    assert carried["done"].returncode != 0


def test_torchao_reached_while_collecting_refuses_carrying_and_every_cell_runs_everything(
    carried: dict[str, Any],
) -> None:
    for ao in AO:
        cell = carried["cells"][cell_id(ao, "collect")]
        assert cell["status"] == "passed", cell["reason"]
        assert cell["carried"] == {}
        assert cell["carry"]["refused"] == (
            "TorchAO was reached outside any test (import torchao): no test can be carried"
        )
        assert len(cell["tests"]) == 6


def test_the_report_counts_run_and_carried_tests(carried: dict[str, Any]) -> None:
    totals = carried["matrix"]["totals"]
    # broken and sly carry 3 tests into two cells each; collect carries nothing
    assert totals["carried"] == 2 * 2 * 3
    assert totals["ran"] == 9 * 6 - 12


def test_a_full_run_catches_a_wrong_independence_class_naming_the_test_and_both_cells(
    carried: dict[str, Any], project: Project
) -> None:
    # the carried run cannot see it: test_sly passed with TorchAO blocked, so it was carried
    for ao in AO:
        assert carried["cells"][cell_id(ao, "sly")]["status"] == "passed"
    done = project.nox(
        "-s", "matrix", "--", "--full", "--cell", "*-sly", "--cell", "*-broken", timeout=600
    )
    assert done.returncode != 0
    source = cell_id(SOURCE, "sly")
    for ao in AO:
        cell = project.cell(cell_id(ao, "sly"))
        assert cell["status"] == "harness-error"
        assert cell["reason"].startswith(
            f"a carried verdict disagrees with a real run: {NODE}test_sly is passed in {source}"
            f" with TorchAO blocked (carried) but failed when run in {cell_id(ao, 'sly')};"
        )
        assert cell["carried"] == {}
        assert [d["test"] for d in cell["carry"]["disagree"]] == [NODE + "test_sly"]
        # broken's failure is the same blocked and real: it agrees, and stays a failure
        broken = project.cell(cell_id(ao, "broken"))
        assert broken["status"] == "failed", broken["reason"]
        assert broken["carry"]["checked"] == 3 and broken["carry"]["disagree"] == []
    # what the blocked run would have carried, kept in the first cell's record for the check
    assert project.cell(source)["carry"]["independent"] == {
        NODE + "test_plain": "passed",
        NODE + "test_sly": "passed",
        ALONE_NODE: "passed",
    }


def test_the_check_reads_records_from_separate_jobs(tmp_path: Path) -> None:
    """GitHub runs each cell in its own job: the aggregate job checks the downloaded records
    (``python -m harness.cells.carry``), the first cell's blocked verdicts against every sibling."""
    from harness.cells.cell import new_result
    from harness.matrix import paths, spec
    from tests.common.python_module import run_module

    matrix = spec.load()
    ids = ["torch2.6-ao0.6-cpu", "torch2.6-ao0.7-cpu", "torch2.6-ao0.8-cpu", "torch2.5-ao0.6-cpu"]
    cells = {c.id: c for c in matrix.cells() if c.id in ids}
    for cid, real in zip(ids, ["passed", "passed", "failed", "failed"], strict=True):
        result = new_result(cells[cid])
        result.tests = {"tests/a.py::t": real, "tests/a.py::u": "passed"}
        result.status = real
        if cid == ids[0]:
            result.carry = {
                "axis": "torchao",
                "source": cid,
                "independent": {"tests/a.py::t": "passed"},
            }
        result.write(paths.cell_dir(tmp_path, cid))
    done = run_module("harness.cells.carry", "--reports", tmp_path, check=True)
    assert "torch2.6-ao0.8-cpu: a carried verdict disagrees" in done.stdout

    def record(cid: str) -> dict[str, Any]:
        return dict(json.loads((paths.cell_dir(tmp_path, cid) / "cell.json").read_text()))

    assert [record(c)["status"] for c in ids] == ["passed", "passed", "harness-error", "failed"]
    assert record(ids[2])["reason"].startswith(
        "a carried verdict disagrees with a real run: tests/a.py::t is passed in"
        " torch2.6-ao0.6-cpu with TorchAO blocked (carried) but failed when run in"
        " torch2.6-ao0.8-cpu;"
    )
    assert record(ids[1])["carry"]["checked"] == 1 and record(ids[1])["carry"]["disagree"] == []
    assert "carry" not in record(ids[3]) or not record(ids[3])["carry"]  # another torch: unchecked
