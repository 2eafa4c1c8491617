"""Merge per-cell results into reports/matrix.{json,md,html}.

Input: ``reports/cells/<cell>/cell.json`` (what the cell was and how it ended) and, when
present, ``junit.xml`` (the failing tests with their messages, read with junitparser; rerun
duplicates collapse to the last attempt). Each cell says what it is; matrix.toml is not re-read.

    python -m harness.report [--reports reports]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from junitparser import Error, Failure, JUnitXml, TestCase

from harness import drift, history
from harness.cell import BAD_STATUSES
from harness.spec import label_key

TEMPLATES = Path(__file__).resolve().parent / "templates"
STEP_SUMMARY_LIMIT = 1024 * 1024  # GitHub rejects a larger $GITHUB_STEP_SUMMARY
MAX_FAILURES_PER_CELL = 200


def colour(cell: dict[str, Any]) -> str:
    """pass / fail / xfail / skip / error: the class a cell is drawn with."""
    status = cell["status"]
    if status == "failed":
        return "fail"
    if status in BAD_STATUSES:
        return "error"
    if status == "skipped":
        return "skip"
    return "xfail" if cell["counts"].get("xfailed") else "pass"


def junit_failures(path: Path) -> list[dict[str, str]] | None:
    """Failing test cases from a JUnit file, rerun duplicates collapsed (last attempt wins)."""
    if not path.exists():
        return None
    try:
        xml = JUnitXml.fromfile(str(path))
    except Exception:  # a cell killed mid-write leaves a truncated file; cell.json still holds
        return None
    last: dict[tuple[str, str], dict[str, str] | None] = {}
    suites = [xml] if xml._tag == "testsuite" else list(xml)
    for suite in suites:
        for case in suite:
            if not isinstance(case, TestCase):
                continue
            key = (case.classname or "", case.name or "")
            bad = [r for r in case.result if isinstance(r, Failure | Error)]
            last[key] = (
                {
                    "nodeid": f"{key[0]}::{key[1]}",
                    "outcome": "error" if isinstance(bad[0], Error) else "failed",
                    "message": (bad[0].message or "").strip()[:2000],
                }
                if bad
                else None
            )
    return [f for f in last.values() if f is not None]


def load_cells(reports: Path) -> list[dict[str, Any]]:
    cells = []
    for path in sorted((reports / "cells").glob("*/cell.json")):
        cell = json.loads(path.read_text())
        from_junit = junit_failures(path.parent / "junit.xml")
        if from_junit is not None and cell["status"] in ("failed", "passed"):
            cell["failures"] = from_junit
        cell["colour"] = colour(cell)
        cells.append(cell)
    return cells


def _sorted_versions(values: Iterable[str]) -> list[str]:
    return sorted(set(values), key=label_key)


def build(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's data: per backend a torch × TorchAO grid, the negative controls, totals."""
    cells_by_id = {cell["id"]: cell for cell in cells}
    grids: dict[str, dict[str, Any]] = {}
    for cell in cells:
        grid = grids.setdefault(cell["backend"], {"rows": {}, "torch": [], "torchao": []})
        grid["rows"].setdefault(cell["torch"], {})[cell["torchao"]] = cell["id"]
        grid["torch"].append(cell["torch"])
        grid["torchao"].append(cell["torchao"])
        if cell["status"] == "skipped":
            grid.setdefault("skip_reasons", set()).add(cell["reason"])
    for grid in grids.values():
        grid["torch"] = _sorted_versions(grid["torch"])
        grid["torchao"] = _sorted_versions(grid["torchao"])
        grid["skip_reasons"] = sorted(grid.get("skip_reasons", ()))
    controls: dict[str, dict[str, Any]] = {}
    for cell in cells:
        if not cell.get("controls"):
            continue
        table = controls.setdefault(cell["backend"], {"cells": [], "rows": {}})
        table["cells"].append(cell["id"])
        for name, outcome in cell["controls"].items():
            table["rows"].setdefault(name, {})[cell["id"]] = outcome
    for table in controls.values():
        table["cells"].sort(
            key=lambda cid: (
                label_key(cells_by_id[cid]["torch"]),
                label_key(cells_by_id[cid]["torchao"]),
            )
        )
    tests: Counter[str] = Counter()
    for cell in cells:
        tests.update(cell["counts"])
    statuses = Counter(cell["status"] for cell in cells)
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "cells": {cell["id"]: cell for cell in cells},
        "grids": dict(sorted(grids.items(), key=lambda kv: (kv[0] != "cpu", kv[0]))),
        "controls": controls,
        "drift": {},  # filled by with_drift() from the cells' drift.json files
        "trackers": [],
        "probes": {},
        "totals": {
            "cells": len(cells),
            "by_status": dict(sorted(statuses.items())),
            "bad_cells": sum(statuses[s] for s in BAD_STATUSES),
            "tests": dict(tests),
        },
    }


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["counts"] = format_counts
    return env


def format_counts(counts: dict[str, int]) -> str:
    order = ("passed", "failed", "error", "xfailed", "xpassed", "skipped")
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)) or "no tests"


def render_markdown(data: dict[str, Any], limit: int = STEP_SUMMARY_LIMIT) -> str:
    """The Markdown summary, truncated (with a note) to stay under ``limit`` bytes."""
    text: str = _env().get_template("matrix.md.j2").render(**data)
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    note = (
        "\n\n… truncated to fit the step summary; the full list is in matrix.html / matrix.json\n"
    )
    cut = encoded[: limit - len(note.encode()) - 4].decode(errors="ignore")
    return cut[: cut.rfind("\n")] + note


def render_html(data: dict[str, Any]) -> str:
    return _env().get_template("matrix.html.j2").render(**data)


def with_drift(data: dict[str, Any], reports: Path) -> dict[str, Any]:
    """Add the drift tables (per backend) and the upstream-bug trackers to the report data."""
    probes = drift.load(reports, data["cells"].values())
    tables = {b: drift.table(probes, data["cells"], b, label_key) for b in data["grids"]}
    data["drift"] = {backend: t for backend, t in tables.items() if t}
    data["trackers"] = drift.trackers(data["cells"])
    data["probes"] = probes
    return data


def write(reports: Path, history_runs: Iterable[Path] = ()) -> dict[str, Any]:
    data = with_drift(build(load_cells(reports)), reports)
    data["run"] = history.run_info()
    if history_runs:  # earlier runs' matrix.json: per-test timelines and recent changes
        data["history"] = history.build(history.load(history_runs, current=data))
    reports.mkdir(parents=True, exist_ok=True)
    drift_doc = {k: data[k] for k in ("probes", "drift", "trackers", "generated")}
    (reports / "drift.json").write_text(json.dumps(drift_doc, indent=2, sort_keys=True) + "\n")
    (reports / "matrix.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    (reports / "matrix.md").write_text(render_markdown(data))
    (reports / "matrix.html").write_text(render_html(data))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report")
    parser.add_argument("--reports", type=Path, default=Path("reports"))
    parser.add_argument(
        "--history", nargs="+", type=Path, default=[], help="earlier runs' report folders"
    )
    args = parser.parse_args(argv)
    try:
        data = write(args.reports, args.history)
    except history.HistoryError as exc:
        print(f"--history: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write((args.reports / "matrix.md").read_text())
    totals = data["totals"]
    print(f"\n{totals['cells']} cells: {totals['by_status']} → {args.reports / 'matrix.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
