"""What changed under us: merge each cell's drift probes and upstream-bug trackers.

A probe is an observation the test suite recorded in a cell (``drift.json``: probe → value, and
the axis the value depends on). Per probe, the table has one column per version of its axis
(torch, or TorchAO; peer probes follow torch), and a value is marked changed where it differs
from the neighbouring version to its left. Cells of one backend make one table (cpu first).
Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.matrix import paths

AXIS_FIELD = {"torch": "torch", "peer": "torch", "torchao": "torchao"}


def load(reports: Path, cells: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """probe -> {"axis", "about", "values": {cell id: value}}."""
    probes: dict[str, dict[str, Any]] = {}
    for cell in cells:
        path = paths.cell_dir(reports, cell["id"]) / "drift.json"
        try:
            found = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            continue  # a cell's file is untrusted: an unreadable one adds nothing
        for name, seen in found.items() if isinstance(found, dict) else ():
            if not isinstance(seen, dict) or seen.get("axis") not in AXIS_FIELD:
                continue
            entry = probes.setdefault(
                name, {"axis": seen["axis"], "about": seen.get("about", ""), "values": {}}
            )
            entry["values"][cell["id"]] = seen.get("value")
    return dict(sorted(probes.items()))


def table(
    probes: dict[str, dict[str, Any]],
    cells: dict[str, dict[str, Any]],
    backend: str,
    label_key: Callable[[str], Any],
) -> dict[str, Any]:
    """The "what changed" table of one backend: per axis, its columns and rows."""
    out: dict[str, Any] = {}
    for axis in ("torch", "torchao", "peer"):
        field = AXIS_FIELD[axis]
        mine = {k: v for k, v in probes.items() if v["axis"] == axis}
        if not mine:
            continue
        columns = sorted(
            {c[field] for c in cells.values() if c["backend"] == backend}, key=label_key
        )
        rows = []
        for name, probe in mine.items():
            per_version: dict[str, list[str]] = {}
            for cid, value in probe["values"].items():
                cell = cells.get(cid)
                if cell is None or cell["backend"] != backend:
                    continue
                shown = json.dumps(value) if not isinstance(value, str) else value
                per_version.setdefault(cell[field], [])
                if shown not in per_version[cell[field]]:
                    per_version[cell[field]].append(shown)
            values, changed, previous = [], [], None
            for column in columns:
                text = " | ".join(sorted(per_version.get(column, []))) or None
                values.append(text)
                changed.append(text is not None and previous is not None and text != previous)
                previous = text if text is not None else previous
            rows.append(
                {"probe": name, "about": probe["about"], "values": values, "changed": changed}
            )
        rows = [r for r in rows if any(v is not None for v in r["values"])]
        if not rows:
            continue
        out[axis] = {
            "columns": columns,
            "rows": rows,
            "changes": sum(sum(r["changed"]) for r in rows),
        }
    return out


def trackers(cells: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each upstream-bug tracker: its reason (with the link) and, per cell, whether the bug is
    still there (xfailed), was fixed upstream (fixed: the strict xfail passed), or the test
    failed another way (failed: the bug's failure mode changed)."""
    rows: dict[str, dict[str, Any]] = {}
    for cid, cell in cells.items():
        for nodeid, seen in cell.get("trackers", {}).items():
            row = rows.setdefault(nodeid, {"test": nodeid, "reason": seen["reason"], "cells": {}})
            row["cells"][cid] = seen["outcome"]
    for row in rows.values():
        outcomes = set(row["cells"].values())
        row["fixed_in"] = sorted(c for c, o in row["cells"].items() if o in ("fixed", "xpassed"))
        row["status"] = (
            "fixed upstream somewhere"
            if row["fixed_in"]
            else ("still present" if outcomes <= {"xfailed"} else "mixed")
        )
    return sorted(rows.values(), key=lambda r: r["test"])
