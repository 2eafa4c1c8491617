"""Scoring a mutation run and writing its report (``reports/mutation.json``, the table).

A mutant's status is mutmut's verdict (:data:`STATUS`); an entry of the plan's equivalents
takes it out of the score. The score of a module is (killed + timeout) / (mutants - equivalent).
Standard library only.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness.mutation.plan import Plan

TOOL: Final = "mutmut"
# what a mutmut verdict means here (mutmut's own status words, from its exit codes)
STATUS: Final = {
    "killed": "killed",
    "segfault": "killed",  # the test process died of a signal: the mutant did not pass
    "timeout": "timeout",
    "survived": "survived",
    "no tests": "not covered",
}
DETECTED: Final = frozenset({"killed", "timeout"})
SCORE: Final = (
    "(killed + timeout) / (mutants - equivalent); a crash of the test process counts as killed"
)
TIMEOUTS: Final = (
    f"{TOOL} stops a mutant's tests after (estimated time + 1 s) x 15 x 2 CPU seconds, or half "
    "that many seconds of wall time, and counts it as a timeout: detected (it changed behaviour)"
)
COUNTS: Final = (
    "mutants",
    "equivalent",
    "killed",
    "timeout",
    "survived",
    "not covered",
    "undecided",
)


@dataclass
class CellRun:
    """What one cell's run found: its mutants with mutmut's verdicts, and its timings."""

    cell: str
    modules: list[str]
    installed: dict[str, str | None]
    mode: str
    mutants: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    # a resurvey: the full run whose detected verdicts it carries (commit, seconds, counts)
    base: dict[str, Any] | None = None

    @property
    def every_mutant(self) -> bool:
        """Whether every mutant of the modules has a verdict: a full run, or a resurvey of one."""
        return self.mode == "full" or self.base is not None


def classify(
    plan: Plan, cell: str, mutants: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each mutant with its ``status`` and ``equivalent`` reason (or None); problems found."""
    problems: list[str] = []
    out = []
    for m in mutants:
        status = STATUS.get(m["tool_status"], "undecided")
        entry = next((e for e in plan.equivalents if e.matches(m, cell)), None)
        kept = {
            k: v
            for k, v in m.items()
            if k not in ("cell", "status", "equivalent", "listed_at_line")
        }
        row = {
            **kept,
            "cell": cell,
            "status": status,
            "tool_status": m["tool_status"],
            "equivalent": entry.why if entry else None,
        }
        if entry and entry.line != m["line"]:
            row["listed_at_line"] = entry.line
        if entry and status in DETECTED:
            problems.append(
                f"{cell}: {m['module']}:{m['line']} is listed as equivalent, but "
                f"{m.get('killed_by') or 'a test'} kills it ({m['after'].strip()})"
            )
        if status == "undecided" and not entry:
            problems.append(f"{cell}: {m['id']} was left undecided by {TOOL} ({m['tool_status']})")
        out.append(row)
    return out, problems


def stale(plan: Plan, rows: list[dict[str, Any]], cells: Mapping[str, Sequence[str]]) -> list[str]:
    """Equivalent entries that match no mutant of the cells they apply to (a full run): the
    cells of ``cells`` (cell -> the modules it mutated) that mutate the entry's module."""
    out = []
    for e in plan.equivalents:
        applies = [
            c
            for c, modules in cells.items()
            if (not e.cells or c in e.cells) and e.module in modules
        ]
        if applies and not any(e.matches(r, r["cell"]) for r in rows if r["cell"] in applies):
            out.append(
                f"{plan.path.name}: the equivalent {e.module}:{e.line} ({e.function}: "
                f"{e.after.strip()!r}) matches no mutant in {', '.join(applies)}"
            )
    return out


def scores(plan: Plan, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    by_module: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = by_module.setdefault(r["module"], dict.fromkeys(COUNTS, 0))
        s["mutants"] += 1
        if r["equivalent"]:
            s["equivalent"] += 1
        else:
            s[r["status"]] += 1
    for module, s in by_module.items():
        scored = s["mutants"] - s["equivalent"]
        s["score"] = round((s["killed"] + s["timeout"]) / scored, 4) if scored else None
        s["goal"] = plan.goal if module in plan.goal_modules else None
        s["met"] = None if s["goal"] is None or s["score"] is None else s["score"] >= plan.goal
    return dict(sorted(by_module.items()))


def pool(by_module: Mapping[str, Mapping[str, Any]], modules: Sequence[str]) -> dict[str, Any]:
    """The counts of ``modules`` added up, and their score."""
    total = {k: sum(s[k] for m, s in by_module.items() if m in modules) for k in COUNTS}
    scored = total["mutants"] - total["equivalent"]
    total["score"] = round((total["killed"] + total["timeout"]) / scored, 4) if scored else None
    return total


def table(report: Mapping[str, Any]) -> str:
    """docs/mutation.md's table: score per module per cell (killed / non-equivalent), wall time."""
    cells = list(report["cells"])
    modules = sorted({m for c in cells for m in report["cells"][c]["scores"]})
    head = "| module | " + " | ".join(cells) + " |"
    lines = [head, "|---|" + "---|" * len(cells)]
    for module in modules:
        cols = []
        for c in cells:
            s = report["cells"][c]["scores"].get(module)
            if s is None:
                cols.append("—")
                continue
            scored = s["mutants"] - s["equivalent"]
            pct = "n/a" if s["score"] is None else f"{100 * s['score']:.1f}%"
            mark = " ❌" if s["met"] is False else ""
            cols.append(
                f"{pct} ({s['killed'] + s['timeout']}/{scored}; {s['equivalent']} eq.){mark}"
            )
        lines.append(f"| `{module}` | " + " | ".join(cols) + " |")
    walls = []
    for c in cells:
        wall = f"{report['cells'][c]['seconds']['wall']:.0f} s"
        base = report["cells"][c].get("base")
        if base is not None:  # a resurvey: its own time, and the full run's it builds on
            wall += f" (resurvey; the full run: {base['seconds']['wall']:.0f} s)"
        walls.append(wall)
    lines.append("| wall time | " + " | ".join(walls) + " |")
    for key, what in (
        ("changed_lines_together", "changed lines, goal modules (judged)"),
        ("sample_together", "the sample, goal modules (an estimate)"),
    ):
        if any(key in report["cells"][c] for c in cells):
            cols = []
            for c in cells:
                s = report["cells"][c].get(key)
                scored = 0 if s is None else s["mutants"] - s["equivalent"]
                cols.append(
                    "—"
                    if s is None or s["score"] is None
                    else f"{100 * s['score']:.1f}% ({s['killed'] + s['timeout']}/{scored})"
                )
            lines.append(f"| {what} | " + " | ".join(cols) + " |")
    return "\n".join(lines)


def write_report(path: Path, report: dict[str, Any]) -> None:
    """JSON with one line per mutant (the file stays diffable)."""
    mutants = report.pop("mutants")
    head = json.dumps(report, indent=1, ensure_ascii=False)
    body = ",\n".join("  " + json.dumps(m, ensure_ascii=False, sort_keys=True) for m in mutants)
    path.write_text(head[:-2] + ',\n "mutants": [\n' + body + "\n ]\n}\n", encoding="utf-8")
    report["mutants"] = mutants


def build_report(
    plan: Plan, runs: Sequence[CellRun], *, commit: str, jobs: int
) -> tuple[dict[str, Any], list[str]]:
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    cells: dict[str, Any] = {}
    for run in runs:
        classified, found = classify(plan, run.cell, run.mutants)
        rows += classified
        problems += found
        cells[run.cell] = {
            "mode": run.mode,
            "modules": run.modules,
            "installed": run.installed,
            "seconds": run.seconds,
            "scores": scores(plan, classified),
        }
        if run.base is not None:
            cells[run.cell]["base"] = run.base
    if all(r.every_mutant for r in runs):
        problems += stale(plan, rows, {r.cell: r.modules for r in runs})
    for run in runs:
        if run.every_mutant:  # the goal per module
            for module, s in cells[run.cell]["scores"].items():
                if s["met"] is False:
                    problems.append(
                        f"{run.cell}: {module} scores {100 * s['score']:.1f}%, "
                        f"below the goal of {100 * plan.goal:.0f}%"
                    )
            continue
        # incremental: the goal is judged over the mutants in changed lines of the goal modules
        # together (new code must be pinned down); the sample only estimates the full run's
        # score (a few mutants per module), so it is reported, and the full run judges per module
        for s in cells[run.cell]["scores"].values():
            s["met"] = None
        mine = [r for r in rows if r["cell"] == run.cell and r["module"] in plan.goal_modules]
        changed = pool(
            scores(plan, [r for r in mine if r.get("picked") == "changed"]), plan.goal_modules
        )
        sampled = pool(
            scores(plan, [r for r in mine if r.get("picked") == "sample"]), plan.goal_modules
        )
        cells[run.cell]["changed_lines_together"] = changed
        cells[run.cell]["sample_together"] = sampled
        if changed["score"] is not None and changed["score"] < plan.goal:
            survivors = [
                f"{r['module']}:{r['line']} ({r['after'].strip()})"
                for r in mine
                if r.get("picked") == "changed"
                and not r["equivalent"]
                and r["status"] not in DETECTED
            ]
            problems.append(
                f"{run.cell}: the mutants in changed lines of the goal modules score "
                f"{100 * changed['score']:.1f}% together, below the goal of "
                f"{100 * plan.goal:.0f}%; not detected: {'; '.join(survivors)}"
            )
    report = {
        "schema": 1,
        "tool": f"{TOOL} {runs[0].installed.get(TOOL) if runs else '?'}",
        "commit": commit,
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "jobs": jobs},
        "goal": plan.goal,
        "goal_modules": list(plan.goal_modules),
        "score": SCORE,
        "timeouts": TIMEOUTS,
        "cells": cells,
        "mutants": rows,
    }
    return report, problems
