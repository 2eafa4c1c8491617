"""Carried verdicts: the tests that never touch TorchAO run once per torch, and their verdicts
stand, as carried, in every TorchAO cell of that torch.

Which tests depend on TorchAO is measured, not declared. The first cell of a carrying group (the
*source*) first runs the whole suite with TorchAO blocked (``harness/cells/probe.py --block
torchao``: importing it, finding it or reading its metadata raises, and every attempt is recorded
with the test that made it). A test *depends* on TorchAO when it tried to reach it (even if it
swallowed the error), when its failure or skip names the block (a fixture cached the error), or when
an expected failure of ``matrix.toml`` applies to it in some cells of the group and not in others.
Every other test is *independent*: its verdict from the blocked run is the verdict of every cell of
the group. Each cell of the group, the source included, then runs only the dependent tests with
TorchAO installed, and its record holds both: run and carried, the carried ones naming the cell they
came from. A cell's status is judged on all its tests.

Carrying is refused, and every cell runs its whole suite as before, when the blocked run does
not finish cleanly or TorchAO is reached outside any test (while collecting): the reason is
recorded in each cell. A full run (``nox -s matrix -- --full``, the nightly) runs every test in
every cell; the first cell of each group also makes the blocked run and records the verdicts it
would have carried (``carry.independent`` in its cell.json). :func:`check` then compares each
of them with the real verdict of every cell of the group, from the records (so it works the same
on one machine and across GitHub's jobs, one per torch group, a group cut into two included): a
disagreement makes that cell a harness error naming the test and both cells (a wrong independence
class, caught).

Standard library only (it runs in the nox process). ``python -m harness.cells.carry --reports DIR``
runs :func:`check` over a run's records.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cells import evidence
from harness.cells.status import RAN_STATUSES
from harness.matrix import paths, spec
from harness.matrix.spec import Cell, Matrix

BLOCKED_DIR = "independent"  # the source cell's sub-folder for the TorchAO-blocked run
DESELECT_FILE = "carried.txt"  # the node ids a cell leaves out because it carries them
BLOCK_MARK = "is blocked in this run"  # in harness/cells/probe.py's Blocked message


@dataclass(frozen=True)
class Source:
    """What the blocked run of a group's first cell established."""

    cell: str  # its id
    log: evidence.TestLog  # the blocked run's evidence, kept to the independent tests
    dependent: tuple[str, ...]  # node ids every cell runs itself
    drift: Mapping[str, Any]  # the independent tests' drift observations


@dataclass
class Role:
    """A cell's part in carrying. ``source`` None: this cell makes it (its blocked run comes
    first). ``full``: run every test here and compare with the carried verdicts."""

    axis: str
    varying: tuple[str, ...]  # expected-failure patterns that differ across the group
    source: Source | None = None
    full: bool = False
    made: Source | None = None  # set by the source cell once its blocked run is judged
    refused: str = ""  # why carrying is off for the group, set by the source cell


def key(matrix: Matrix, cell: Cell) -> tuple[Any, ...] | None:
    """Cells with the same key differ only in TorchAO (same Python, torch pin, backend and
    requirements): the cells one blocked run stands for. None: the cell never carries (the
    matrix does not ask for it, or a downstream cell, whose libraries may reach TorchAO)."""
    if "torchao" not in matrix.carry or cell.group:
        return None
    reqs = tuple(matrix.requirements_for(cell))
    return (cell.python, cell.torch.pin, cell.backend.name, reqs)


def varying_patterns(matrix: Matrix, cells: Sequence[Cell]) -> tuple[str, ...]:
    """The expected-failure patterns that apply to some of ``cells`` and not to all: the tests
    they match depend on the axis that varies, whatever the blocked run saw."""
    sets: list[set[str]] = [
        {
            p
            for x in matrix.xfails_for(
                c.torch.label, c.torchao.label, c.backend.name, None, c.python
            )
            for p in x.tests
        }
        for c in cells
    ]
    if not sets:
        return ()
    everywhere = set(sets[0]).intersection(*sets[1:])
    return tuple(sorted(set().union(*sets) - everywhere))


def read_leaks(path: Path) -> list[dict[str, str]] | None:
    """The blocked run's record of who reached the blocked distribution; None if unreadable."""
    try:
        doc = json.loads(path.read_text())
        leaks = doc["leaks"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(leaks, list) or not all(isinstance(x, dict) for x in leaks):
        return None
    return [{"test": str(x.get("test", "")), "what": str(x.get("what", ""))} for x in leaks]


def classify_tests(
    log: evidence.TestLog, leaks: Sequence[Mapping[str, str]], varying: Sequence[str]
) -> tuple[list[str], str]:
    """(the dependent node ids, why carrying is refused or ``""``) from a blocked run."""
    outside = [x["what"] for x in leaks if not x["test"]]
    if outside:
        return [], f"TorchAO was reached outside any test ({outside[0]}): no test can be carried"
    broken = sorted(n for n, o in log.outcomes.items() if "::" not in n)
    if broken:
        return [], f"the TorchAO-blocked run did not collect {broken[0]}: no test can be carried"
    marked = {n for n, text in [*log.messages.items(), *log.skips.items()] if BLOCK_MARK in text}
    dependent = {x["test"] for x in leaks} | marked
    dependent |= {n for n in log.outcomes if any(fnmatch.fnmatchcase(n, p) for p in varying)}
    return sorted(dependent), ""


def keep(log: evidence.TestLog, nodeids: set[str]) -> evidence.TestLog:
    """``log`` with only the given tests (the session's own facts kept)."""

    def only(d: Mapping[str, Any]) -> dict[str, Any]:
        return {n: v for n, v in d.items() if n in nodeids}

    return dataclasses.replace(
        log,
        outcomes=only(log.outcomes),
        reruns=only(log.reruns),
        messages=only(log.messages),
        skips=only(log.skips),
        unfinished=[n for n in log.unfinished if n in nodeids],
        trackers=only(log.trackers),
        budget_cuts=only(log.budget_cuts),
    )


def merge(run: evidence.TestLog, carried: evidence.TestLog) -> evidence.TestLog:
    """One log of a cell's tests: those it ran and those carried (a test it ran wins); the
    session's own facts are the run's."""
    return dataclasses.replace(
        run,
        outcomes={**carried.outcomes, **run.outcomes},
        reruns={**carried.reruns, **run.reruns},
        messages={**carried.messages, **run.messages},
        skips={**carried.skips, **run.skips},
        trackers={**carried.trackers, **run.trackers},
        budget_cuts={**carried.budget_cuts, **run.budget_cuts},
    )


def judge(
    verdict: evidence.Verdict,
    merged: evidence.TestLog,
    stale: Sequence[str],
    *,
    asked_for_none: bool = False,
) -> evidence.Verdict:
    """The cell's status from its run's verdict and all its tests, carried ones included: a
    run that ended cleanly (passed or failed; no tests when every test was carried) is judged
    again on the merged outcomes."""
    clean = (*RAN_STATUSES, "no-tests") if asked_for_none else RAN_STATUSES
    if verdict.status not in clean:
        return verdict
    return evidence.outcome_verdict(merged.counts(), stale)


def disagreements(
    source: str, carried: Mapping[str, str], outcomes: Mapping[str, str]
) -> list[dict[str, str]]:
    """Each test whose real outcome in a full run differs from the one ``source`` would carry."""
    return [
        {"test": n, "carried": want, "source": source, "real": outcomes.get(n, "absent")}
        for n, want in sorted(carried.items())
        if outcomes.get(n, "absent") != want
    ]


def disagreement_reason(cell: str, found: Sequence[Mapping[str, str]]) -> str:
    first = found[0]
    more = f" (and {len(found) - 1} more: cell.json's carry lists them)" if len(found) > 1 else ""
    return (
        f"a carried verdict disagrees with a real run: {first['test']} is {first['carried']} in"
        f" {first['source']} with TorchAO blocked (carried) but {first['real']} when run in"
        f" {cell}{more}; the test depends on TorchAO in a way the block did not see"
    )


def check(matrix: Matrix, reports: Path) -> list[str]:
    """Compare the verdicts each full run's blocked run would have carried with the real ones of
    every cell of its group (the records in ``reports``); a cell with a disagreement becomes a
    ``harness-error`` naming the test and both cells, every compared cell records ``checked``
    and ``disagree`` in its ``carry``. Returns the ids of the cells it made harness errors."""
    known = {c.id: c for c in matrix.cells(tiers=spec.TIERS)}
    records: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in sorted(paths.cells_dir(reports).glob(f"*/{paths.CELL_FILE}")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # an unreadable record is the report's "no record", not this check's
        if isinstance(doc, dict) and doc.get("id") in known:
            records[doc["id"]] = (path, doc)
    sources = {
        key(matrix, known[cid]): (cid, doc["carry"]["independent"])
        for cid, (_, doc) in records.items()
        if isinstance(doc.get("carry"), dict) and doc["carry"].get("independent")
    }
    bad = []
    for cid, (path, doc) in records.items():
        found_source = sources.get(key(matrix, known[cid]))
        if found_source is None or doc.get("status") not in RAN_STATUSES:
            continue
        source, carried = found_source
        found = disagreements(source, carried, doc.get("tests") or {})
        doc["carry"] = {
            **(doc.get("carry") or {}),
            "axis": "torchao",
            "source": source,
            "checked": len(carried),
            "disagree": found,
        }
        if found:
            doc["status"], doc["reason"] = "harness-error", disagreement_reason(cid, found)
            bad.append(cid)
        path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return bad


def narrowed(
    pytest_args: Sequence[str], tests: Sequence[str], dependent: Sequence[str]
) -> list[str]:
    """A dependent run's arguments: the files that hold dependent tests in place of the
    cell's test paths, so that pytest imports and collects only those (the carried tests are
    deselected as well). Safe because a blocked run that reached TorchAO while collecting
    refuses carrying: the tests collected with TorchAO installed are the blocked run's, so
    no test outside these files is left uncollected. No dependent test: the arguments as
    they are (every test deselected)."""
    files = sorted({nodeid.split("::")[0] for nodeid in dependent})
    if not files:
        return list(pytest_args)
    return [*files, *(a for a in pytest_args if a not in tests)]


def read_drift(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def write_drift(path: Path, carried: Mapping[str, Any]) -> None:
    """The cell's drift.json: the carried observations, then its own (which win)."""
    own = read_drift(path)
    merged = {**carried, **own}
    if merged:
        path.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.cells.carry")
    parser.add_argument("--reports", type=Path, default=paths.reports_path())
    parser.add_argument("--matrix", type=Path, default=paths.matrix_path())
    args = parser.parse_args(argv)
    bad = check(spec.load(args.matrix), args.reports)
    for cid in bad:
        print(f"[carry] {cid}: a carried verdict disagrees with a real run (cell.json says which)")
    if not bad:
        print("[carry] every verdict a blocked run would have carried agrees with the real runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
