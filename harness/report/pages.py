"""Merge a run's cells into reports/matrix.{json,md,html}.

Input: the cells that should have run (:mod:`harness.cells.verdict`: the run's manifest, or the
``--tier`` / ``--backend`` selection of matrix.toml), each with its ``cell.json`` or shown as
"no record". Failing tests come from cell.json, which the cell took from its reportlog: pytest
node ids, rerun attempts collapsed. The page is built from parts (templates ``html/<part>.j2``
and ``md/<part>.j2``, in :data:`PARTS` order) whose data come from :data:`SECTIONS`; a new view
adds a part and, if it needs data, a section. With ``--history`` the earlier runs' matrix.json
files add the history part (:mod:`harness.report.history`).

    python -m harness.report.pages [--reports reports] [--tier T] [--backend B]
                                   [--matrix matrix.toml] [--history RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

from harness.cells import verdict
from harness.cells.status import BAD_STATUSES, colour, format_counts
from harness.matrix import limits, paths, spec
from harness.matrix.spec import label_key
from harness.report import downstream, drift, history, new_releases

TEMPLATES = Path(__file__).resolve().parent / "templates"
# what one step may append to $GITHUB_STEP_SUMMARY: half of GitHub's limit (harness.matrix.limits)
STEP_SUMMARY_LIMIT = limits.STEP_SUMMARY.room
# what the step that appends matrix.md may add beside it (matrix.yml: the judged line, at most a
# few hundred bytes): matrix.md is cut this much below the limit, never at it
SUMMARY_RESERVE = 8 * 1024
MAX_FAILURES_PER_CELL = 200
# the page, top to bottom: one template per part in templates/html and templates/md
PARTS = (
    "summary",
    "releases",
    "grids",
    "downstream",
    "history",
    "controls",
    "drift",
    "trackers",
    "failing",
)
# per-test data of cell.json the gate reads, not the page
BULKY = ("tests", "skips", "reruns", "carried")


def load_cells(reports: Path, want: verdict.Expected) -> list[dict[str, Any]]:
    cells = []
    for cell in verdict.judge(reports, want):
        for key in BULKY:
            cell.pop(key, None)
        cell["failures"] = cell["failures"][:MAX_FAILURES_PER_CELL]
        cell["colour"] = colour(cell["status"], cell["counts"])
        cells.append(cell)
    return cells


def _named_python(cell: dict[str, Any]) -> str | None:
    """The cell's Python where its id names it (not the default Python), else None."""
    python = cell.get("python")
    return python if python and f"-py{python}-" in str(cell["id"]) else None


def _by_version(cells: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Torch, then the default Python's cells before each other Python's, then TorchAO."""

    def key(c: dict[str, Any]) -> tuple[Any, ...]:
        py = _named_python(c)
        return (
            label_key(c["torch"]),
            py is not None,
            label_key(py or "0.0"),
            label_key(c["torchao"]),
        )

    return sorted(cells, key=key)


def _backend_order(names: Iterable[str]) -> list[str]:
    return sorted(set(names), key=lambda b: (b != "cpu", b))


def _row(cell: dict[str, Any]) -> str:
    """A grid row: the torch label, then the Python where it is not the default one (a row of
    its own under its torch's); an installed cell's own row says so (harness/cells/installed.py)."""
    where = cell.get("environment", {}).get("label")
    py = _named_python(cell)
    row = f"{cell['torch']} · Python {py}" if py else str(cell["torch"])
    return f"{row} ({where})" if where else row


def grids(cells: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per backend that ran, its cells by torch version (each row: that torch's TorchAO cells);
    per backend that did not run at all, one line: why, and how many cells. The downstream tier's
    cells have a grid of their own (:func:`add_downstream`)."""
    out, absent = [], []
    cells = [c for c in cells if not c.get("group")]
    for backend in _backend_order(c["backend"] for c in cells):
        mine = [c for c in cells if c["backend"] == backend]
        if all(c["status"] == "skipped" for c in mine):
            reasons = sorted({c["reason"] for c in mine})
            absent.append({"backend": backend, "reasons": reasons, "cells": len(mine)})
            continue
        rows: dict[str, dict[str, str]] = {}
        row_torch: dict[str, str] = {}
        for cell in _by_version(mine):
            rows.setdefault(_row(cell), {})[cell["torchao"]] = cell["id"]
            row_torch[_row(cell)] = cell["torch"]
        torchao = sorted({c["torchao"] for c in mine}, key=label_key)
        # a torch's rows (one per Python) share its TorchAO columns, so that a Python corner's
        # card stands under the same TorchAO's card of the default Python's row
        columns: dict[str, set[str]] = {}
        for row, by_ao in rows.items():
            columns.setdefault(row_torch[row], set()).update(by_ao)
        out.append(
            {
                "backend": backend,
                # cells: in TorchAO order; slots: the torch's columns, None where the row has
                # no cell (the HTML cards); by_ao: for the Markdown table
                "rows": [
                    {
                        "torch": t,
                        "cells": list(by_ao.values()),
                        "slots": [
                            by_ao.get(ao) for ao in sorted(columns[row_torch[t]], key=label_key)
                        ],
                        "by_ao": by_ao,
                    }
                    for t, by_ao in rows.items()
                ],
                "torchao": torchao,
            }
        )
    return out, absent


def not_published(entries: Iterable[dict[str, str]]) -> list[dict[str, Any]]:
    """The manifest's combinations without a wheel, one line per torch × TorchAO and missing
    release: the Pythons it lacks (``pythons``) beside the releases that lack them."""
    lines: dict[tuple[str, str, str], list[str]] = {}
    for n in entries:
        lines.setdefault((n["torch"], n["torchao"], n["lacking"]), []).append(n["python"])
    return [
        {"torch": t, "torchao": a, "lacking": lacking, "pythons": sorted(pys, key=label_key)}
        for (t, a, lacking), pys in sorted(
            lines.items(), key=lambda kv: (label_key(kv[0][0]), label_key(kv[0][1]), kv[0][2])
        )
    ]


def controls(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per backend, the negative controls: one row per cell, one column per control."""
    out = []
    for backend in _backend_order(c["backend"] for c in cells if c.get("controls")):
        mine = _by_version(c for c in cells if c["backend"] == backend and c.get("controls"))
        names = sorted({name for c in mine for name in c["controls"]})
        out.append(
            {
                "backend": backend,
                "names": names,
                "cells": [c["id"] for c in mine],
                "labels": control_labels(mine),
            }
        )
    return out


def control_labels(cells: list[dict[str, Any]]) -> dict[str, str]:
    """Each cell's row label, "torch / TorchAO", with its Python where several cells of the
    table share the pair (a core torch's Python corners), so that no two rows read alike."""
    pairs = Counter((c["torch"], c["torchao"]) for c in cells)
    return {
        c["id"]: f"{c['torch']} / {c['torchao']}"
        + (f" · Python {c['python']}" if pairs[(c["torch"], c["torchao"])] > 1 else "")
        for c in cells
    }


def build(cells: list[dict[str, Any]], want: verdict.Expected) -> dict[str, Any]:
    """The report's data (a JSON document: the pages are rendered from exactly this)."""
    tests: Counter[str] = Counter()
    for cell in cells:
        tests.update(cell["counts"])
    statuses = Counter(cell["status"] for cell in cells)
    carried = sum(int((cell.get("carry") or {}).get("carried", 0)) for cell in cells)
    grid_list, absent = grids(cells)
    run = want.run
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "run": {
            "expected": want.source,
            "state": run.get("state", "records"),
            "signal": run.get("signal"),
            "candidates": run.get("candidates", []),
            **history.run_info(),  # the commit and CI run, so history can name a code change
        },
        "parts": list(PARTS),
        "cells": {cell["id"]: cell for cell in cells},
        "order": [cell["id"] for cell in cells],
        "grids": grid_list,
        "absent": absent,
        "not_published": not_published(run.get("not_published", [])),
        "controls": controls(cells),
        "drift": [],  # filled by the sections below
        "downstream": [],
        "downstream_scenarios": [],
        "trackers": [],
        "probes": {},
        "totals": {
            "cells": len(cells),
            "by_status": dict(sorted(statuses.items())),
            "bad_cells": sum(statuses[s] for s in BAD_STATUSES),
            "tests": dict(tests),
            # properties a time budget stopped (the nightly profile): shown, never hidden
            "budget_cuts": sum(len(cell.get("budget_cuts") or {}) for cell in cells),
            "budget_cells": sum(1 for cell in cells if cell.get("budget_cuts")),
            # cells whose tests ran under another Hypothesis profile than ci: profile -> cells
            "profiles": dict(
                sorted(
                    Counter(
                        c["hypothesis_profile"]
                        for c in cells
                        if c.get("hypothesis_profile") not in (None, "", "ci")
                    ).items()
                )
            ),
            # tests whose verdict a cell carried from another (harness/cells/carry.py), and run
            "carried": carried,
            "ran": sum(sum(cell["counts"].values()) for cell in cells) - carried,
        },
    }


def add_drift(data: dict[str, Any], reports: Path) -> None:
    """The "what changed" tables (per backend that ran) and the upstream-bug trackers."""
    cells = data["cells"]
    probes = drift.load(reports, cells.values())
    tables = [
        {"backend": g["backend"], "axes": drift.table(probes, cells, g["backend"], label_key)}
        for g in data["grids"]
    ]
    data["drift"] = [t for t in tables if t["axes"]]
    data["trackers"] = drift.trackers(cells)
    data["probes"] = probes


def add_downstream(data: dict[str, Any], reports: Path) -> None:
    """The downstream grid (library × downstream cell: alone / through compat) and its legend."""
    cells = data["cells"]

    def order(cell: dict[str, Any]) -> tuple[Any, ...]:
        return (cell["group"], label_key(cell["torch"]), label_key(cell["torchao"]))

    data["downstream"] = downstream.grid(cells, order)
    data["downstream_scenarios"] = downstream.scenarios(c for c in cells.values() if c.get("group"))


def add_new_releases(data: dict[str, Any], reports: Path) -> None:
    """Versions a ``latest`` or prerelease cell installed above every pin of the repository
    (:mod:`harness.report.new_releases`), each with its one-line text."""
    try:
        matrix = spec.load(paths.matrix_path())
    except (OSError, spec.MatrixSpecError):  # a report of results alone: nothing to compare
        data["new_releases"] = []
        return
    found = new_releases.seen(matrix, data["cells"].values())
    data["new_releases"] = [{**f, "line": new_releases.line(f)} for f in found]


# data producers run in order after build(); each adds what its parts render
SECTIONS: list[Callable[[dict[str, Any], Path], None]] = [
    add_drift,
    add_downstream,
    add_new_releases,
]


def canonical(data: dict[str, Any]) -> dict[str, Any]:
    """The data as matrix.json holds it: the pages render from this, so re-rendering a saved
    matrix.json gives the same bytes (the screenshot's provenance relies on it)."""
    return dict(json.loads(json.dumps(data, sort_keys=True)))


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        # the pages show what tests printed: everything is escaped in the HTML templates
        autoescape=jinja2.select_autoescape(["html.j2"], default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["counts"] = format_counts
    env.filters["extract"] = lambda key, container: container[key]  # ids | map("extract", cells)
    return env


def render_markdown(data: dict[str, Any], limit: int = STEP_SUMMARY_LIMIT - SUMMARY_RESERVE) -> str:
    """The Markdown summary, truncated (with a note) to stay under ``limit`` bytes: by default
    :data:`SUMMARY_RESERVE` below GitHub's per-step limit, so the step may add its own lines."""
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


def write(
    reports: Path, want: verdict.Expected, history_runs: Iterable[Path] = ()
) -> dict[str, Any]:
    data = build(load_cells(reports, want), want)
    for section in SECTIONS:
        section(data, reports)
    if history_runs:  # earlier runs' matrix.json: per-test timelines and recent changes
        data["history"] = history.build(history.load(history_runs, current=data))
    data = canonical(data)
    reports.mkdir(parents=True, exist_ok=True)
    drift_doc = {k: data[k] for k in ("probes", "drift", "trackers", "generated")}
    (reports / "drift.json").write_text(json.dumps(drift_doc, indent=2, sort_keys=True) + "\n")
    (reports / "matrix.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    (reports / "matrix.md").write_text(render_markdown(data))
    (reports / "matrix.html").write_text(render_html(data))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.pages")
    parser.add_argument("--reports", type=Path, default=paths.DEFAULT_REPORTS)
    parser.add_argument("--matrix", type=Path, default=None, help="default: $COMPAT_MATRIX_TOML")
    parser.add_argument("--tier", action="append", default=[], help="expect this tier's cells")
    parser.add_argument("--backend", action="append", default=[], help="expect these backends'")
    parser.add_argument("--cell", action="append", default=[], help="expect the matching cells")
    parser.add_argument(
        "--history", nargs="+", type=Path, default=[], help="earlier runs' report folders"
    )
    args = parser.parse_args(argv)
    want = verdict.expected(
        args.reports,
        matrix_path=args.matrix,
        tiers=args.tier,
        backends=args.backend,
        patterns=args.cell,
    )
    try:
        data = write(args.reports, want, args.history)
    except history.HistoryError as exc:
        print(f"--history: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write((args.reports / "matrix.md").read_text())
    totals = data["totals"]
    print(f"\n{totals['cells']} cells: {totals['by_status']} → {args.reports / 'matrix.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
