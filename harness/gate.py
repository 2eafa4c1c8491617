"""The regression gate: a matrix run against the committed baseline.

    python -m harness.gate baseline [--from reports] [--out reports/baseline.json]
    python -m harness.gate check [--from reports] [--baseline reports/baseline.json]

A snapshot holds, per cell, how the cell ended and each test's final outcome (read from the
cell's pytest-reportlog, so reruns are seen). ``check`` classifies every test:

============  =============================================================================
regression    failed or errored now, did not before (a new test that fails counts here too)
fixed         failed or errored before, does not now
flaky         failed, then passed on a rerun (pytest-rerunfailures)
new           not in the baseline, not failing
missing       in the baseline, absent now; or a whole cell that ran in the baseline and did
              not run now (absent, install-error, crashed, timeout, skipped)
============  =============================================================================

It writes ``gate.json`` and ``gate.md`` and exits 1 on any regression or anything missing:
missing is never silently green. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import history
from harness.cell import read_reportlog

BAD = frozenset({"failed", "error"})
RAN = frozenset({"passed", "failed"})  # cell statuses whose tests all ran to the end
CLASSES = ("regression", "missing", "fixed", "flaky", "new")
FATAL = frozenset({"regression", "missing"})


def snapshot(reports: Path) -> dict[str, Any]:
    """Per cell: status, axis values, candidates, and each test's final outcome and reruns."""
    cells: dict[str, Any] = {}
    for path in sorted((reports / "cells").glob("*/cell.json")):
        cell = json.loads(path.read_text())
        log = read_reportlog(path.parent / "log.jsonl")
        cells[cell["id"]] = {
            "status": cell["status"],
            "tier": cell.get("tier", "core"),
            "torch": cell["torch"],
            "torchao": cell["torchao"],
            "backend": cell["backend"],
            "installed": cell.get("installed", {}),
            "candidates": cell.get("candidates", []),
            "tests": dict(sorted(log.outcomes.items())),
            "flaky": sorted(n for n, k in log.reruns.items() if log.outcomes.get(n) not in BAD),
        }
    return {
        "schema": 1,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "cells": cells,
    }


def compare(
    baseline: dict[str, Any], current: dict[str, Any], tiers: list[str] | None = None
) -> dict[str, Any]:
    """Classify every test; with ``tiers``, only baseline cells of those tiers are expected."""
    rows: list[dict[str, str]] = []

    def row(kind: str, cell: str, test: str, before: str, after: str) -> None:
        rows.append({"class": kind, "cell": cell, "test": test, "before": before, "after": after})

    base_cells, cur_cells = baseline["cells"], current["cells"]
    for cid, base in sorted(base_cells.items()):
        cur = cur_cells.get(cid)
        if base["status"] not in RAN:
            continue  # the baseline expected nothing from this cell (e.g. no GPU there)
        if tiers and base.get("tier", "core") not in tiers:
            continue  # this run did not select the cell's tier
        if cur is None or cur["status"] not in RAN:
            row("missing", cid, "*", base["status"], "absent" if cur is None else cur["status"])
            continue
        flaky = set(cur.get("flaky", ()))
        for test, before in sorted(base["tests"].items()):
            after = cur["tests"].get(test)
            if after is None:
                row("missing", cid, test, before, "absent")
            elif after in BAD and before not in BAD:
                row("regression", cid, test, before, after)
            elif before in BAD and after not in BAD:
                row("fixed", cid, test, before, after)
            elif test in flaky:
                row("flaky", cid, test, before, after)
    for cid, cur in sorted(cur_cells.items()):
        base = base_cells.get(cid)
        known = base["tests"] if base is not None and base["status"] in RAN else {}
        for test, after in sorted(cur["tests"].items()):
            if test in known:
                continue
            row("regression" if after in BAD else "new", cid, test, "absent", after)
    summary = Counter(r["class"] for r in rows)
    candidates = sorted({c for cell in cur_cells.values() for c in cell.get("candidates", [])})
    return {
        "ok": not any(summary[k] for k in FATAL),
        "summary": {k: summary[k] for k in CLASSES},
        "candidates": candidates,
        "baseline_created": baseline.get("created"),
        "rows": sorted(rows, key=lambda r: (CLASSES.index(r["class"]), r["cell"], r["test"])),
    }


def render_markdown(result: dict[str, Any], limit_rows: int = 500) -> str:
    verdict = "✅ no regressions" if result["ok"] else "❌ regressions or missing results"
    lines = [
        f"# Regression gate: {verdict}",
        "",
        " · ".join(f"{k}: {v}" for k, v in result["summary"].items()),
    ]
    if result["candidates"]:
        lines += ["", "Candidates: " + ", ".join(f"`{c}`" for c in result["candidates"])]
    shown = [r for r in result["rows"] if r["class"] != "new"]
    if shown:
        lines += ["", "| class | cell | test | before | after |", "|---|---|---|---|---|"]
        lines += [
            f"| {r['class']} | {r['cell']} | `{r['test']}` | {r['before']} | {r['after']} |"
            for r in shown[:limit_rows]
        ]
        if len(shown) > limit_rows:
            lines.append(f"\n… {len(shown) - limit_rows} more rows in gate.json")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.gate")
    sub = parser.add_subparsers(dest="command", required=True)
    base = sub.add_parser("baseline", help="record reports/cells/* as the baseline")
    base.add_argument("--from", dest="source", type=Path, default=Path("reports"))
    base.add_argument("--out", type=Path, default=Path("reports/baseline.json"))
    check = sub.add_parser("check", help="compare reports/cells/* with the baseline")
    check.add_argument("--from", dest="source", type=Path, default=Path("reports"))
    check.add_argument("--baseline", type=Path, default=Path("reports/baseline.json"))
    check.add_argument("--out", type=Path, default=None, help="default: the --from folder")
    check.add_argument(
        "--tier", action="append", help="expect only baseline cells of these tiers (default: all)"
    )
    check.add_argument(
        "--history",
        nargs="+",
        type=Path,
        default=[],
        help="earlier runs' report folders: a regression in a test flaky across them is flaky",
    )
    args = parser.parse_args(argv)

    current = snapshot(args.source)
    if not current["cells"]:
        print(f"no cell results under {args.source / 'cells'}: run the matrix first")
        return 2
    if args.command == "baseline":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
        ran = sum(c["status"] in RAN for c in current["cells"].values())
        print(f"baseline: {len(current['cells'])} cells ({ran} ran) → {args.out}")
        return 0
    if not args.baseline.exists():
        print(f"no baseline at {args.baseline}: record one with `nox -s baseline`")
        return 2
    result = compare(json.loads(args.baseline.read_text()), current, args.tier)
    if args.history:
        try:
            previous = history.load(args.history)
        except history.HistoryError as exc:
            print(f"--history: {exc}")
            return 2
        result = history.reclassify(result, previous, FATAL)
        result["rows"].sort(key=lambda r: (CLASSES.index(r["class"]), r["cell"], r["test"]))
    out = args.out or args.source
    out.mkdir(parents=True, exist_ok=True)
    (out / "gate.json").write_text(json.dumps(result, indent=2) + "\n")
    md = render_markdown(result)
    (out / "gate.md").write_text(md)
    sys.stdout.write(md)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
