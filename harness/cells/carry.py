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

Carrying is three steps of a cell's run: planned (:func:`harness.cells.plan.carry_roles`: which
cells one blocked run stands for), run (:func:`harness.cells.cell.run_cell`: the blocked run,
then only the dependent tests) and read (:func:`harness.cells.evidence.read_blocked`, then
:func:`harness.cells.evidence.read_test_run`: the carried verdicts in the record). This module
is the check of a full run, over the records alone.

Standard library only (it runs in the nox process). ``python -m harness.cells.carry --reports DIR``
runs :func:`check` over a run's records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.cells.plan import key
from harness.cells.status import RAN_STATUSES
from harness.matrix import paths, spec
from harness.matrix.spec import Matrix


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
