"""The downstream grid of the report: per backend, one row per library, one column per
downstream cell, each entry saying whether the library's scenarios work alone and through compat.

Input: the cells' records (``cell.json``), whose ``scenarios`` name each downstream test's library,
scenario and route (``alone`` / ``compat``) with its outcome from the reportlog
(tests/downstream/conftest.py names them; harness/cells/evidence.py adds the outcomes). Below the
grid, the peers' own test suites (``peers`` in the records, tests/common/peers): per cell and suite
the release, both runs' counts, regressions, fixed and lifted tests, the skips with the peer's
reasons, and per group the cells where they ran and where the run deselected them
(:func:`peer_suites`). Standard library only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from harness.cells.status import format_counts

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
                "peers": peer_suites(columns),
            }
        )
    return out


def _run_text(run: Any) -> str:
    if not isinstance(run, dict):
        return "did not run"
    seconds = run.get("seconds")
    return format_counts(run.get("counts") or {}) + (f" ({seconds:.0f} s)" if seconds else "")


def _ids(entries: Any) -> list[str]:
    return [str(e.get("test", "")) for e in entries or [] if isinstance(e, dict)]


def _peer_row(cell: dict[str, Any], name: str, suite: dict[str, Any]) -> dict[str, Any]:
    """One suite in one cell, as the report shows it."""
    runs = suite.get("runs") or {}
    regressions = [
        f"{e.get('test')}: {e.get('message', '')}" for e in suite.get("regressions") or []
    ]
    stale = [f"{t}: stale lifted entry" for t in _ids(suite.get("stale"))]
    error = str(suite.get("error") or "")
    bad = bool(regressions or stale or error or not suite.get("ok"))
    return {
        "cell": cell["id"],
        "label": f"{cell['torch']} · {cell['torchao']}",
        "group": cell.get("group"),
        "suite": name,
        "release": str(suite.get("release", "?")),
        "plain": _run_text(runs.get("plain")),
        "compat": _run_text(runs.get("compat")),
        "regressions": regressions + stale,
        "error": error,
        "fixed": _ids(suite.get("fixed")),
        "lifted": _ids(suite.get("lifted")),
        "failing": _ids(suite.get("failing")),
        "skipped": len(suite.get("skips") or {}),
        "colour": "fail" if bad else "pass",
    }


def peer_suites(columns: list[dict[str, Any]]) -> dict[str, Any]:
    """The peer suites of one backend's downstream cells: ``rows`` (cell × suite), ``groups``
    (where each group's suites ran, where the run deselected them, where neither), ``lifted``
    and ``skips`` (by suite and release: each lifted test with its reason, each skip reason of
    the peer with how many tests it skipped in one run, the cells where)."""
    rows: list[dict[str, Any]] = []
    lifted: dict[tuple[str, str, str], dict[str, Any]] = {}
    skips: dict[tuple[str, str, str], set[str]] = {}
    counts: dict[tuple[str, str, str], int] = {}
    for cell in columns:
        for name, suite in sorted((cell.get("peers") or {}).items()):
            if not isinstance(suite, dict):
                continue
            rows.append(row := _peer_row(cell, name, suite))
            for entry in suite.get("lifted") or []:
                key = (name, row["release"], str(entry.get("test", "")))
                about = lifted.setdefault(key, {"reason": entry.get("reason", ""), "cells": []})
                about["cells"].append(cell["id"])
            for reason, n in Counter((suite.get("skips") or {}).values()).items():
                key = (name, row["release"], str(reason))
                skips.setdefault(key, set()).add(cell["id"])
                counts[key] = max(counts.get(key, 0), n)
    groups = []
    for group in sorted({str(c["group"]) for c in columns}):
        mine = [c for c in columns if c["group"] == group]
        ran = [c["id"] for c in mine if c.get("peers")]
        left = [c["id"] for c in mine if not c.get("peers") and c.get("deselected")]
        groups.append(
            {
                "group": group,
                "ran": ran,
                "deselected": left,
                "why": next(
                    (next(iter(c["deselected"].values())) for c in mine if c["id"] in left), ""
                ),
                "neither": [c["id"] for c in mine if c["id"] not in ran and c["id"] not in left],
            }
        )
    return {
        "rows": rows,
        "groups": groups if rows or any(g["deselected"] for g in groups) else [],
        "lifted": [
            {"suite": k[0], "release": k[1], "test": k[2], **v} for k, v in sorted(lifted.items())
        ],
        "skips": [
            {"suite": k[0], "release": k[1], "reason": k[2], "tests": counts[k], "cells": sorted(v)}
            for k, v in sorted(skips.items())
        ],
    }


def scenarios(cells: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Every scenario once (library, title, link), for the legend below the grid."""
    seen: dict[tuple[str, str], str] = {}
    for cell in cells:
        for s in (cell.get("scenarios") or {}).values():
            seen.setdefault((s["library"], s["scenario"]), s.get("link", ""))
    return [{"library": k[0], "scenario": k[1], "link": v} for k, v in sorted(seen.items())]
