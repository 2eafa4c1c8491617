"""The downstream grid of the report: per backend, one row per library, one column per
downstream cell, each entry saying whether the library's scenarios work alone and through compat.

Input: the cells' records (``cell.json``), whose ``scenarios`` name each downstream test's library,
scenario and route (``alone`` / ``compat``) with its outcome from the reportlog
(tests/downstream/conftest.py names them; harness/cells/cell.py adds the outcomes). Standard library
only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

BROKEN = ("xfailed", "failed", "error")  # xfailed: a known break (matrix.toml or a tracker)


def _summary(outcomes: dict[str, str], route: str) -> dict[str, Any]:
    """One route of one library in one cell: its verdict, colour and the scenarios behind it."""
    if not outcomes:
        return {"verdict": "none", "colour": "skip", "detail": [], "text": "—"}
    broken = sorted(s for s, o in outcomes.items() if o in BROKEN)
    unexpected = sorted(s for s, o in outcomes.items() if o in ("failed", "error", "absent"))
    ran = [s for s, o in outcomes.items() if o != "skipped"]
    if not ran:
        verdict, colour = "skipped", "skip"
    elif route == "compat":
        verdict = "fails" if broken or unexpected else "passes"
        colour = "fail" if broken or unexpected else "pass"
    elif unexpected:
        verdict, colour = "breaks (unexpected)", "fail"
    elif broken:
        verdict, colour = "breaks", "warn"  # a known break: yellow, not the pass-with-xfail green
    else:
        verdict, colour = "works", "pass"
    bad = len(set(broken) | set(unexpected))
    if not ran:
        text = verdict
    elif bad:
        text = f"{bad} of {len(ran)} {'breaks' if route == 'alone' else 'fails'}"
    else:
        text = f"{'works' if route == 'alone' else 'passes'} ({len(ran)})"
    return {
        "verdict": verdict,
        "colour": colour,
        "detail": sorted(f"{s}: {o}" for s, o in outcomes.items()),
        "text": text,
        "broken": sorted(set(broken) | set(unexpected)),
    }


def grid(
    cells: dict[str, dict[str, Any]], order: Callable[[dict[str, Any]], Any]
) -> list[dict[str, Any]]:
    """Per backend with downstream cells: columns (cell ids, in ``order``), libraries, and for each
    library and cell the alone and compat summaries."""
    mine = [c for c in cells.values() if c.get("group")]
    out = []
    for backend in sorted({c["backend"] for c in mine}, key=lambda b: (b != "cpu", b)):
        columns = sorted((c for c in mine if c["backend"] == backend), key=order)
        if all(c["status"] == "skipped" and not c.get("scenarios") for c in columns):
            continue
        libraries = sorted({s["library"] for c in columns for s in c.get("scenarios", {}).values()})
        rows = []
        for library in libraries:
            entries = {}
            for cell in columns:
                routes: dict[str, dict[str, str]] = {"alone": {}, "compat": {}}
                for scenario in cell.get("scenarios", {}).values():
                    if scenario["library"] == library:
                        routes[scenario["route"]][scenario["scenario"]] = scenario["outcome"]
                entries[cell["id"]] = {r: _summary(o, r) for r, o in routes.items()}
            rows.append({"library": library, "cells": entries})
        breaks: dict[tuple[str, str], list[str]] = {}
        for cell in columns:
            for scenario in cell.get("scenarios", {}).values():
                if scenario["route"] == "alone" and scenario["outcome"] in (*BROKEN, "absent"):
                    key = (scenario["library"], scenario["scenario"])
                    breaks.setdefault(key, []).append(cell["id"])
        out.append(
            {
                "backend": backend,
                # where each library breaks alone: (library, scenario) -> the cells
                "breaks": [
                    {
                        "library": k[0],
                        "scenario": k[1],
                        "cells": v,
                        "where": "every cell" if len(v) == len(columns) else ", ".join(v),
                    }
                    for k, v in sorted(breaks.items())
                ],
                "columns": [
                    {
                        "id": c["id"],
                        "label": f"{c['torch']} · {c['torchao']}",
                        "group": c["group"],
                        "status": c["status"],
                    }
                    for c in columns
                ],
                "rows": rows,
                "groups": sorted({c["group"] for c in columns}),
            }
        )
    return out


def scenarios(cells: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Every scenario once (library, title, link), for the legend below the grid."""
    seen: dict[tuple[str, str], str] = {}
    for cell in cells:
        for s in (cell.get("scenarios") or {}).values():
            seen.setdefault((s["library"], s["scenario"]), s.get("link", ""))
    return [{"library": k[0], "scenario": k[1], "link": v} for k, v in sorted(seen.items())]
