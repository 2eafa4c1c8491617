"""History across runs: per-test timelines per cell, built from the ``matrix.json`` runs write.

    python -m harness.report.pages --reports reports --history RUN_DIR [RUN_DIR...]
    python -m harness.ci.gate check ... --history RUN_DIR [RUN_DIR...]

Each ``RUN_DIR`` holds a previous run's ``matrix.json`` (a downloaded report artifact; the file
itself may be given too). Runs are ordered by the time they were generated, the current run last.
``matrix.json`` lists a cell's failing tests (and its trackers' outcomes), not every passing one,
so a test's timeline holds, per run: its failure outcome (``failed``/``error``), its tracker
outcome, ``ok`` (the cell ran and the test did not fail), or nothing (the cell did not run then).

Between two consecutive runs in which a cell ran, a test whose failing state flipped is a change:

- **changed with <package> <old> → <new>** when the cell's installed versions (or its upstream
  candidates, or the repository commit, where the run recorded one) differ between the two runs;
- **flaky across runs** when they are all the same: nothing we know of moved, the outcome did.

The gate (``harness.ci.gate check --history``) reports a regression in a test that was flaky across
the previous runs as ``flaky``, naming the runs that show it; it never drops the row.

Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.matrix.errors import Refused
from harness.matrix.paths import ROOT
from harness.matrix.procs import answer

FAILING = frozenset({"failed", "error"})
RAN = frozenset({"passed", "failed"})  # cell statuses whose tests all ran to the end
MAX_CHANGES = 100
CURRENT = "this run"


class HistoryError(Refused):
    """A run folder without a readable matrix.json."""


def junit_key(nodeid: str) -> str:
    """One spelling for a test in both of the forms a report holds: the pytest node id
    (``tests/test_x.py::Class::test[p]``) and the JUnit one (``tests.test_x.Class::test[p]``)."""
    if "::" not in nodeid:
        return nodeid
    path, *rest = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".") if path.endswith(".py") else path
    *classes, name = rest
    return "::".join([".".join([module, *classes]), name])


def run_info() -> dict[str, str | None]:
    """What identifies the code a run tested: the commit (from CI, else git) and the CI run."""
    commit = os.environ.get("GITHUB_SHA") or answer(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], timeout=10
    )
    return {"commit": commit or None, "ci_run": os.environ.get("GITHUB_RUN_ID")}


@dataclass(frozen=True)
class Run:
    label: str
    generated: str
    commit: str | None
    cells: Mapping[str, Mapping[str, Any]]


def from_report(data: Mapping[str, Any], label: str) -> Run:
    """A run from a matrix.json document (untrusted: the fields history reads are checked)."""
    cells = data.get("cells")
    if not isinstance(cells, dict) or not isinstance(data.get("generated"), str):
        raise HistoryError(f"{label}: not a matrix.json (no 'cells' table or 'generated' time)")
    for cid, cell in cells.items():
        if not isinstance(cell, dict) or not isinstance(cell.get("status"), str):
            raise HistoryError(f"{label}: cell {cid!r} has no status")
    run = data.get("run")
    commit = run.get("commit") if isinstance(run, dict) else None
    return Run(label, data["generated"], commit if isinstance(commit, str) else None, cells)


def load_run(path: Path) -> Run:
    file = path / "matrix.json" if path.is_dir() else path
    label = (path if path.is_dir() else path.parent).name or str(path)
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise HistoryError(f"{file}: no readable matrix.json ({exc})") from None
    if not isinstance(data, dict):
        raise HistoryError(f"{file}: not a matrix.json")
    return from_report(data, label)


def load(paths: Iterable[Path], current: Mapping[str, Any] | None = None) -> list[Run]:
    """The runs in ``paths`` and, if given, the current run's report data, oldest first."""
    runs = [load_run(Path(p)) for p in paths]
    if current is not None:
        runs = [r for r in runs if r.generated != current.get("generated")]
        runs.append(from_report(current, CURRENT))
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):  # two folders of the same name: keep them apart
        runs = [
            Run(f"{r.label}#{i + 1}", r.generated, r.commit, r.cells) for i, r in enumerate(runs)
        ]
    return sorted(runs, key=lambda r: (r.generated, r.label == CURRENT))


# --- per-test timelines -------------------------------------------------------------------------


def ran(cell: Mapping[str, Any] | None) -> bool:
    return cell is not None and cell.get("status") in RAN


def test_outcomes(cell: Mapping[str, Any]) -> dict[str, str]:
    """The tests this run of the cell says something about: failures and tracker outcomes."""
    out: dict[str, str] = {}
    for nodeid, tracker in (cell.get("trackers") or {}).items():
        if isinstance(tracker, dict) and isinstance(tracker.get("outcome"), str):
            out[junit_key(nodeid)] = tracker["outcome"]
    for failure in cell.get("failures") or []:
        if isinstance(failure, dict) and isinstance(failure.get("nodeid"), str):
            out[junit_key(failure["nodeid"])] = str(failure.get("outcome", "failed"))
    return out


def versions(cell: Mapping[str, Any], commit: str | None) -> dict[str, str]:
    """What was installed and tested: the cell's installed versions, its candidates, the commit."""
    found = {str(k): str(v) for k, v in (cell.get("installed") or {}).items() if v is not None}
    for candidate in cell.get("candidates") or []:
        found[f"candidate {candidate}"] = "installed"
    if commit:
        found["commit"] = commit[:12]
    return found


def version_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[list[str]]:
    return [
        [name, before.get(name, "absent"), after.get(name, "absent")]
        for name in sorted(set(before) | set(after), key=lambda n: (n.startswith("candidate "), n))
        if before.get(name) != after.get(name)
    ]


def describe(changes: Sequence[Sequence[str]]) -> str:
    if not changes:
        return "flaky across runs (same installed versions)"
    parts = []
    for name, old, new in changes:
        if name.startswith("candidate "):
            parts.append(f"{name} {'added' if old == 'absent' else 'removed'}")
        else:
            parts.append(f"{name} {old} → {new}")
    return "changed with " + ", ".join(parts)


def timelines(runs: Sequence[Run]) -> dict[str, dict[str, list[str | None]]]:
    """cell -> test -> its outcome in each run (None: the cell did not run to the end then)."""
    out: dict[str, dict[str, list[str | None]]] = {}
    seen: dict[str, set[str]] = {}
    for run in runs:
        for cid, cell in run.cells.items():
            seen.setdefault(cid, set()).update(test_outcomes(cell))
    for cid, tests in sorted(seen.items()):
        rows: dict[str, list[str | None]] = {}
        for test in sorted(tests):
            row: list[str | None] = []
            for run in runs:
                this = run.cells.get(cid)
                row.append(test_outcomes(this).get(test, "ok") if this and ran(this) else None)
            rows[test] = row
        out[cid] = rows
    return out


def changes(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Every flip of a test's failing state between consecutive runs in which its cell ran,
    newest first, each with the version changes that came with it (none: flaky across runs)."""
    found: list[dict[str, Any]] = []
    for cid, rows in timelines(runs).items():
        for test, row in rows.items():
            last: int | None = None
            for i, outcome in enumerate(row):
                if outcome is None:
                    continue
                if last is not None and (row[last] in FAILING) != (outcome in FAILING):
                    before_run, after_run = runs[last], runs[i]
                    moved = version_changes(
                        versions(before_run.cells[cid], before_run.commit),
                        versions(after_run.cells[cid], after_run.commit),
                    )
                    found.append(
                        {
                            "cell": cid,
                            "test": test,
                            "before_run": before_run.label,
                            "after_run": after_run.label,
                            "generated": after_run.generated,
                            "before": row[last],
                            "after": outcome,
                            "flaky": not moved,
                            "versions": moved,
                            "cause": describe(moved),
                        }
                    )
                last = i
    return sorted(found, key=lambda c: (c["generated"], c["cell"], c["test"]), reverse=True)


def flaky_tests(runs: Sequence[Run]) -> dict[tuple[str, str], list[str]]:
    """(cell, test) -> the runs that show it flaky across runs (both sides of each flip)."""
    out: dict[tuple[str, str], list[str]] = {}
    for change in changes(runs):
        if change["flaky"]:
            shown = out.setdefault((change["cell"], change["test"]), [])
            for label in (change["before_run"], change["after_run"]):
                if label not in shown:
                    shown.append(label)
    order = {r.label: i for i, r in enumerate(runs)}
    return {key: sorted(labels, key=order.__getitem__) for key, labels in out.items()}


def strips(runs: Sequence[Run]) -> dict[str, list[dict[str, str] | None]]:
    """cell -> its verdict in each run (colour, status, installed versions), oldest first."""
    ids = sorted({cid for run in runs for cid in run.cells})
    out: dict[str, list[dict[str, str] | None]] = {}
    for cid in ids:
        row: list[dict[str, str] | None] = []
        for run in runs:
            cell = run.cells.get(cid)
            if cell is None:
                row.append(None)
                continue
            installed = ", ".join(f"{k} {v}" for k, v in sorted(versions(cell, None).items()))
            failing = sum(1 for o in test_outcomes(cell).values() if o in FAILING)
            row.append(
                {
                    "run": run.label,
                    "colour": str(cell.get("colour") or _colour(cell)),
                    "status": str(cell["status"]),
                    "title": f"{run.label} ({run.generated}): {cell['status']}"
                    + (f", {failing} failing" if failing else "")
                    + (f" — {installed}" if installed else ""),
                }
            )
        out[cid] = row
    return out


def _colour(cell: Mapping[str, Any]) -> str:
    status = cell["status"]
    if status == "passed":
        return "xfail" if (cell.get("counts") or {}).get("xfailed") else "pass"
    return {"failed": "fail", "skipped": "skip"}.get(status, "error")


def grouped(found: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The changes as the report lists them: one entry per (runs, cell, outcomes, cause), with
    its tests, newest first."""
    groups: dict[tuple[str, ...], dict[str, Any]] = {}
    for c in found:
        key = (c["generated"], c["before_run"], c["after_run"], c["cell"], c["before"], c["after"])
        entry = groups.setdefault(
            (*key, c["cause"]),
            {
                k: c[k]
                for k in ("cell", "before_run", "after_run", "before", "after", "flaky", "cause")
            }
            | {"tests": []},
        )
        entry["tests"].append(c["test"])
    return list(groups.values())


def build(runs: Sequence[Run]) -> dict[str, Any]:
    """The history section of the report: runs, a strip per cell, the recent changes."""
    found = changes(runs)
    return {
        "groups": grouped(found[:MAX_CHANGES]),
        "runs": [{"label": r.label, "generated": r.generated, "commit": r.commit} for r in runs],
        "strips": strips(runs),
        "timelines": timelines(runs),
        "changes": found[:MAX_CHANGES],
        "changes_total": len(found),
        "flaky": [
            {"cell": cell, "test": test, "runs": labels}
            for (cell, test), labels in sorted(flaky_tests(runs).items())
        ],
    }


# --- the gate -----------------------------------------------------------------------------------


def reclassify(result: dict[str, Any], previous: Sequence[Run]) -> dict[str, Any]:
    """Gate rows classed ``regression`` whose test was flaky across the ``previous`` runs become
    ``flaky`` (no longer failing the gate), with those runs named; every other row is left as it
    was, and the verdict is recomputed from the rows' ``fatal`` flags."""
    flaky = flaky_tests(previous)
    for row in result["rows"]:
        runs = flaky.get((row["cell"], junit_key(row["test"])))
        if row["class"] == "regression" and runs:
            row["class"] = "flaky"
            row["fatal"] = False
            row["why"] = f"flaky across runs: {', '.join(runs)}"
    summary = {k: 0 for k in result["summary"]}
    for row in result["rows"]:
        summary[row["class"]] = summary.get(row["class"], 0) + 1
    result["summary"] = summary
    result["failing_rows"] = sum(bool(r["fatal"]) for r in result["rows"])
    result["ok"] = not result["failing_rows"]
    result["history_runs"] = [r.label for r in previous]
    return result
