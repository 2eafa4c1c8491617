"""The regression gate: a matrix run against the committed baseline.

    python -m harness.ci.gate baseline [--from reports] [--out reports/baseline.json]
    python -m harness.ci.gate check [--from reports] [--baseline reports/baseline.json]
                                 [--tier T] [--backend B] [--matrix matrix.toml]

A snapshot holds, for every cell the run should have run (:mod:`harness.cells.verdict`: the run's
manifest, or the ``--tier`` / ``--backend`` selection), how the cell ended and each test's
final outcome and skip reason, as its ``cell.json`` recorded them from the reportlog.
``check`` classifies every test and cell (docs/gate.md's table is :data:`CLASSES`) and exits 1
if any row fails the gate: nothing lost is ever silently green. Snapshots of schema 1 (no skip
reasons) are read as well. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.cells import verdict
from harness.cells.status import FAILING, RAN_STATUSES
from harness.matrix import limits, paths
from harness.matrix.backends import is_absence
from harness.matrix.errors import Refused
from harness.report import history

SCHEMA = 2
READABLE_SCHEMAS = (1, 2)
# class -> (what it means, whether it fails the gate)
CLASSES: dict[str, tuple[str, str]] = {
    "regression": ("failing now, not before (a new test that fails counts too)", "yes"),
    "missing": (
        "in the baseline, absent now; or a cell of this run without a complete result"
        " (no record, crashed, timeout, inconsistent…)",
        "yes",
    ),
    "fewer tests": ("a cell collected fewer tests than in the baseline", "yes"),
    "now skipped": (
        "ran before, skipped now (a test, or a whole cell)",
        "yes, unless the skip reason is an absent backend",
    ),
    "fixed": ("failing before, not now", "no"),
    "downstream impact": (
        "a downstream library's own scenario (tests/downstream, without compat) changed outcome:"
        " what the candidate does to that library's users; compat's route is judged as usual",
        "no",
    ),
    "flaky": ("failed, then passed on a rerun (`reruns` in matrix.toml)", "no"),
    "new": ("not in the baseline, not failing", "no"),
}
KEPT = ("passed", "xfailed")  # outcomes whose loss to a skip is a loss of coverage
# gate.md shows this much of a row's why (gate.json has it whole): a cell's install error, the
# installer's message included, fits (harness.cells.install.INSTALL_REASON_CHARS)
WHY_CHARS = 400
CUT = " … (cut: gate.json has it whole)"


def snapshot(reports: Path, want: verdict.Expected) -> dict[str, Any]:
    """Per expected cell: status, reason, axis values, candidates, each test's outcome."""
    cells: dict[str, Any] = {}
    for cell in verdict.judge(reports, want):
        tests = cell["tests"]
        cells[cell["id"]] = {
            "status": cell["status"],
            "reason": cell["reason"],
            "tier": cell["tier"],
            "python": cell["python"],
            "torch": cell["torch"],
            "torchao": cell["torchao"],
            "backend": cell["backend"],
            "installed": cell["installed"],
            "candidates": cell["candidates"],
            "tests": tests,
            "group": cell.get("group"),
            "scenarios": cell.get("scenarios", {}),
            "skips": cell["skips"],
            "flaky": sorted(n for n in cell["reruns"] if tests.get(n) not in FAILING),
            # verdicts this cell carried from another (harness/cells/carry.py): test -> that cell
            "carried": cell.get("carried", {}),
            # test paths the run's options left out of this cell: path -> why (--peer-suites)
            "deselected": cell.get("deselected", {}),
        }
    return {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "expected": want.source,
        "cells": cells,
    }


def keep_others(current: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """``current`` plus the cells of ``earlier`` (a baseline) it does not have, and says so: a
    baseline re-recorded for one tier keeps the others' last verdicts, each cell from one run."""
    if earlier.get("schema") not in READABLE_SCHEMAS:
        raise Refused(f"--keep: schema {earlier.get('schema')!r} is not readable")
    kept = {cid: cell for cid, cell in earlier["cells"].items() if cid not in current["cells"]}
    if not kept:
        return current
    return {
        **current,
        "cells": {**kept, **current["cells"]},
        "expected": f"{current['expected']}; {len(kept)} other cells kept from the baseline of "
        f"{earlier.get('created')} ({earlier.get('expected')})",
    }


def deselected_by_the_run(cell: dict[str, Any], test: str) -> str:
    """Why the run's options left ``test`` out of ``cell`` (a node id under one of the cell's
    ``deselected`` paths, as pytest's --deselect matches it), or ""."""
    paths: dict[str, str] = cell.get("deselected") or {}
    return next((why for path, why in paths.items() if test.startswith(path)), "")


def without_deselected(
    baseline: dict[str, Any], current: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """``baseline`` without the tests that are absent from their cell of ``current`` because the
    run's options deselected them there (``--peer-suites first``: a downstream group's peer suites
    ran in another of its cells, whose record has them), and how many it left out."""
    cells = dict(baseline.get("cells") or {})
    count = 0
    for cid, cur in current["cells"].items():
        base = cells.get(cid)
        if not base or not cur.get("deselected") or cur["status"] not in RAN_STATUSES:
            continue
        tests: dict[str, str] = base.get("tests") or {}
        gone = {t for t in tests if t not in cur["tests"] and deselected_by_the_run(cur, t)}
        if gone:
            cells[cid] = {**base, "tests": {t: o for t, o in tests.items() if t not in gone}}
            count += len(gone)
    return {**baseline, "cells": cells}, count


def compare(baseline: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """Classify every test of every cell of ``current`` (the cells this run should have run). A
    baseline test the run deselected in its cell (:func:`without_deselected`) is not compared:
    neither missing nor a fall in collected tests; ``deselected`` counts them."""
    kept, left_out = without_deselected(baseline, current)
    return {**_classify(kept, current), "deselected": left_out}


def _classify(baseline: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """:func:`compare` on a baseline without the deselected tests."""
    schema = baseline.get("schema")
    if schema not in READABLE_SCHEMAS:
        raise Refused(f"baseline schema {schema!r} is not one of {list(READABLE_SCHEMAS)}")
    rows: list[dict[str, Any]] = []

    def row(kind: str, cell: str, test: str, before: str, after: str, **more: Any) -> None:
        fatal = more.get("fatal", CLASSES[kind][1] == "yes")
        rows.append(
            {
                "class": kind,
                "cell": cell,
                "test": test,
                "before": before,
                "after": after,
                "fatal": bool(fatal),
                "why": more.get("why", ""),
                # the cell whose run gave ``after`` when this one carried it, else ""
                "carried_from": current["cells"][cell].get("carried", {}).get(test, ""),
            }
        )

    for cid, cur in sorted(current["cells"].items()):
        base = baseline["cells"].get(cid)
        if base is not None and base.get("python") not in (None, cur.get("python")):
            base = None  # the same id on another Python (default_python moved): not like with like
        base_ran = base is not None and base["status"] in RAN_STATUSES
        before_cell = "absent" if base is None else base["status"]
        if cur["status"] == "skipped":
            if base_ran:
                absent = is_absence(cur["reason"])
                row(
                    "now skipped",
                    cid,
                    "*",
                    before_cell,
                    "skipped",
                    fatal=not absent,
                    why=cur["reason"],
                )
            continue
        if cur["status"] not in RAN_STATUSES:
            row("missing", cid, "*", before_cell, cur["status"], why=cur["reason"])
            continue
        known: dict[str, str] = base["tests"] if base_ran and base is not None else {}
        flaky = set(cur.get("flaky", ()))
        for test, before in sorted(known.items()):
            after = cur["tests"].get(test)
            if after is None:
                row("missing", cid, test, before, "absent")
            elif after in FAILING and before not in FAILING:
                row("regression", cid, test, before, after)
            elif before in FAILING and after not in FAILING:
                row("fixed", cid, test, before, after)
            elif before in KEPT and after == "skipped":
                why = cur.get("skips", {}).get(test, "")
                row("now skipped", cid, test, before, after, fatal=not is_absence(why), why=why)
            elif test in flaky:
                row("flaky", cid, test, before, after)
        for test, after in sorted(cur["tests"].items()):
            if test not in known:
                row("regression" if after in FAILING else "new", cid, test, "absent", after)
        if known and len(cur["tests"]) < len(known):
            row("fewer tests", cid, "*", f"{len(known)} tests", f"{len(cur['tests'])} tests")
    rows = [_downstream_impact(r, current["cells"].get(r["cell"], {})) for r in rows]
    summary = Counter(r["class"] for r in rows)
    candidates = sorted({c for cell in current["cells"].values() for c in cell["candidates"]})
    order = list(CLASSES)
    carried = sum(len(cell.get("carried", {})) for cell in current["cells"].values())
    return {
        "carried": carried,
        "ok": not any(r["fatal"] for r in rows),
        "summary": {k: summary[k] for k in CLASSES},
        "failing_rows": sum(r["fatal"] for r in rows),
        "candidates": candidates,
        "baseline_created": baseline.get("created"),
        "expected": current.get("expected", ""),
        "rows": sorted(rows, key=lambda r: (order.index(r["class"]), r["cell"], r["test"])),
    }


def _downstream_impact(row: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    """A change of an ``alone`` downstream scenario is the candidate's impact on that library's
    users, not a verdict on compat: it is reported, with the outcome of the same scenario through
    compat in that cell, and never fails the gate."""
    scenarios: dict[str, dict[str, str]] = cell.get("scenarios") or {}
    about = scenarios.get(row["test"])
    if row["class"] not in ("regression", "fixed") or not about or about["route"] != "alone":
        return row
    through = [
        cell["tests"].get(nodeid, "absent")
        for nodeid, other in sorted(scenarios.items())
        if other["route"] == "compat"
        and (other["library"], other["scenario"]) == (about["library"], about["scenario"])
    ]
    if row["before"] == "xfailed":  # a strict expected failure that passed: the library fixed it
        change = "now works (its expected failure passed)"
    else:
        change = "breaks" if row["class"] == "regression" else "works again"
    compat_route = ", ".join(through) or "no compat route"
    return {
        **row,
        "class": "downstream impact",
        "fatal": False,
        "why": f"{about['library']}: {about['scenario']} {change} without compat; through "
        f"compat: {compat_route}",
        "library": about["library"],
        "scenario": about["scenario"],
        "through_compat": compat_route,
    }


def table_cell(text: object, limit: int | None = None, *, code: bool = False) -> str:
    """``text`` as the content of one Markdown table cell that cannot break its row.

    Every run of whitespace (line breaks included) and every other control character becomes
    one space; a text longer than ``limit`` characters is cut and ends in :data:`CUT` (``limit``
    counts the text, not the escapes); every ``|`` is escaped so that no pipe of the text ends
    the cell (GitHub shows it as ``|``, in a code span too; backslashes just before a pipe are
    doubled so that the escape stands). Outside a ``code`` span a ``<`` that could open an HTML
    tag (before a letter, ``/``, ``!`` or ``?``) is written ``&lt;``, so that ``File "<string>"``
    is not swallowed as a tag; ``<0.20`` stays as it is.
    """
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    if limit is not None and len(flat) > limit:
        flat = flat[: max(limit - len(CUT), 0)].rstrip() + CUT
    flat = re.sub(r"(\\*)\|", lambda m: m.group(1) * 2 + "\\|", flat)
    return flat if code else re.sub(r"<(?=[A-Za-z/!?])", "&lt;", flat)


def _after(row: dict[str, Any]) -> str:
    carried = row.get("carried_from")
    return f"{row['after']} (carried from {carried})" if carried else str(row["after"])


def render_markdown(
    result: dict[str, Any], limit_rows: int = 500, limit_bytes: int = limits.STEP_SUMMARY.room
) -> str:
    """gate.md: the verdict, the counts per class, the candidates, the downstream impact and
    every row but ``new`` ones, at most ``limit_rows`` of each table and ``limit_bytes`` in all
    (it goes to a step summary: half of GitHub's limit by default; a cut says where the rest
    is). Each row is one table row: its fields go through :func:`table_cell`, the why (a whole
    cell's reason: why it did not install, crashed, ...) cut to :data:`WHY_CHARS`."""
    verdict_line = "✅ no regressions" if result["ok"] else "❌ the gate fails"
    lines = [
        f"# Regression gate: {verdict_line}",
        "",
        " · ".join(f"{k}: {v}" for k, v in result["summary"].items()),
    ]
    if result.get("carried"):
        lines += [
            "",
            f"{result['carried']} verdicts were carried from another cell of the same torch"
            " (tests that never touch TorchAO run once per torch); a row says where.",
        ]
    if result.get("deselected"):
        lines += [
            "",
            f"{result['deselected']} tests of the baseline were deselected in their cells by this"
            " run's options (`--peer-suites first`: a downstream group's peer suites run in one"
            " of its cells) and not compared; each cell's record says where they ran.",
        ]
    if result["candidates"]:
        lines += ["", "Candidates: " + ", ".join(f"`{c}`" for c in result["candidates"])]
    impact = [r for r in result["rows"] if r["class"] == "downstream impact"]
    if impact:
        lines += [
            "",
            "## Downstream impact: the libraries alone, without compat",
            "",
            "The verdict above is compat's own; these scenarios of downstream libraries changed"
            " outcome when run alone:",
            "",
            "| library | scenario | cell | before | after | through compat |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            "| "
            + " | ".join(
                table_cell(r[k])
                for k in ("library", "scenario", "cell", "before", "after", "through_compat")
            )
            + " |"
            for r in impact[:limit_rows]
        ]
    shown = [r for r in result["rows"] if r["class"] not in ("new", "downstream impact")]
    if shown:
        lines += [
            "",
            "| class | cell | test | before | after | fails the gate | why |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['class']} | {table_cell(r['cell'])} | `{table_cell(r['test'], code=True)}` |"
            f" {table_cell(r['before'])} | {table_cell(_after(r))} |"
            f" {'yes' if r['fatal'] else 'no'} | {table_cell(r['why'], WHY_CHARS)} |"
            for r in shown[:limit_rows]
        ]
        if len(shown) > limit_rows:
            lines.append(f"\n… {len(shown) - limit_rows} more rows in gate.json")
    return _capped(lines, limit_bytes)


def _capped(lines: list[str], limit: int) -> str:
    """``lines`` joined, the lines past ``limit`` bytes dropped for one saying so."""
    note = "\n… cut to fit the step summary; every row is in gate.json\n"
    kept: list[str] = []
    size = len(note.encode())
    for line in lines:
        size += len(line.encode()) + 1
        if size > limit:
            return "\n".join(kept) + note
        kept.append(line)
    return "\n".join(kept) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.ci.gate")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("baseline", "record the run's cells as the baseline"),
        ("check", "compare the run's cells with the baseline"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--from", dest="source", type=Path, default=paths.DEFAULT_REPORTS)
        cmd.add_argument("--matrix", type=Path, default=None, help="default: $COMPAT_MATRIX_TOML")
        cmd.add_argument("--tier", action="append", default=[], help="expect this tier's cells")
        cmd.add_argument("--backend", action="append", default=[], help="expect these backends'")
        cmd.add_argument("--cell", action="append", default=[], help="expect the matching cells")
    default_baseline = paths.DEFAULT_REPORTS / "baseline.json"
    sub.choices["baseline"].add_argument("--out", type=Path, default=default_baseline)
    sub.choices["baseline"].add_argument(
        "--keep",
        type=Path,
        default=None,
        help="an earlier baseline whose cells this run did not expect are kept (re-record a tier)",
    )
    check = sub.choices["check"]
    check.add_argument("--baseline", type=Path, default=default_baseline)
    check.add_argument("--out", type=Path, default=None, help="default: the --from folder")
    check.add_argument(
        "--history",
        nargs="+",
        type=Path,
        default=[],
        help="earlier runs' report folders: a regression in a test flaky across them is flaky",
    )
    args = parser.parse_args(argv)

    if not paths.cell_records(args.source):
        print(f"no cell results under {paths.cells_dir(args.source)}: run the matrix first")
        return 2
    want = verdict.expected(
        args.source,
        matrix_path=args.matrix,
        tiers=args.tier,
        backends=args.backend,
        patterns=args.cell,
    )
    current = snapshot(args.source, want)
    if args.command == "baseline":
        out = args.out
        if args.keep is not None:
            current = keep_others(current, json.loads(args.keep.read_text()))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
        ran = sum(c["status"] in RAN_STATUSES for c in current["cells"].values())
        print(f"baseline: {len(current['cells'])} cells ({ran} ran) → {out}")
        return 0
    baseline_path = args.baseline
    if not baseline_path.exists():
        print(f"no baseline at {baseline_path}: record one with `nox -s baseline`")
        return 2
    result = compare(json.loads(baseline_path.read_text()), current)
    if args.history:
        try:
            previous = history.load(args.history)
        except history.HistoryError as exc:
            print(f"--history: {exc}")
            return 2
        result = history.reclassify(result, previous)
        order = list(CLASSES)
        result["rows"].sort(key=lambda r: (order.index(r["class"]), r["cell"], r["test"]))
    out = args.out or args.source
    out.mkdir(parents=True, exist_ok=True)
    (out / "gate.json").write_text(json.dumps(result, indent=2) + "\n")
    md = render_markdown(result)
    (out / "gate.md").write_text(md)
    sys.stdout.write(md)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
