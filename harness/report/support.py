"""The support window, machine-readable: reports/support.json and the README's support table.

From a run's results (the cells its manifest says should have run, each judged by
:mod:`harness.cells.verdict`), or from the baseline (``reports/baseline.json``: the last recorded
run of each tier, the one the gate holds every run to), per Python: the torch and TorchAO releases
whose cells passed there, and the pairs (``pairs``: Python -> torch -> the TorchAO releases that
passed with it, as users read compatibility, pytorch/ao#2919); per downstream group
(``downstream``): the libraries its passing cells installed and the torch x TorchAO pairs they
passed on. A baseline cell recorded before the Python axis names no Python; it ran on
the default one. Only a passed cell counts; a skipped, failed or missing one says nothing about
support. The README's table between the ``support`` markers is rendered from the JSON, so the two
never disagree (tests/harness/test_support.py also checks that pyproject.toml's floors are the
oldest versions a passing cell tested).

    python -m harness.report.support (--from reports | --baseline reports/baseline.json)
                              [--out reports/support.json] [--readme README.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from harness.cells import verdict
from harness.matrix import paths, spec
from harness.matrix.errors import Refused
from harness.matrix.project import written_version

SCHEMA = 2  # 2 added pairs and downstream
BEGIN, END = "<!-- support:begin -->", "<!-- support:end -->"
# the downstream libraries support.json names per group, in the table's order
LIBRARIES = (
    "accelerate",
    "transformers",
    "diffusers",
    "peft",
    "safetensors",
    "open_clip_torch",
    "timm",
    "torchvision",
)


def _py_key(python: str) -> tuple[int, ...]:
    return tuple(int(part) for part in python.split("."))


def _release_key(pin: str) -> Version:
    return Version(pin)


def _pin(cell: Mapping[str, Any], dist: str) -> str | None:
    """The release a cell installed (its record), else its pin from the manifest."""
    installed = (cell.get("installed") or {}).get(dist)
    if installed:
        return str(installed).split("+")[0]
    for pin in cell.get("pins", ()):
        if str(pin).startswith(f"{dist}=="):
            return str(pin).split("==", 1)[1]
    return None


def _downstream(passed: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per downstream group: the libraries its passing cells installed (a release per library,
    or each one where cells differ) and the torch x TorchAO pairs they passed on."""
    groups: dict[str, dict[str, Any]] = {}
    for cell in passed:
        group = cell.get("group")
        torch, torchao = _pin(cell, "torch"), _pin(cell, "torchao")
        if not group or not torch or not torchao:
            continue
        mine = groups.setdefault(str(group), {"libraries": {}, "pairs": set()})
        mine["pairs"].add((torch, torchao))
        for dist in LIBRARIES:
            release = (cell.get("installed") or {}).get(dist)
            if release:
                mine["libraries"].setdefault(dist, set()).add(str(release))
    return {
        name: {
            "libraries": {
                dist: sorted(found["libraries"][dist], key=_release_key)
                for dist in LIBRARIES
                if dist in found["libraries"]
            },
            "pairs": sorted(
                ([t, a] for t, a in found["pairs"]),
                key=lambda p: (_release_key(p[0]), _release_key(p[1])),
            ),
        }
        for name, found in sorted(groups.items())
    }


def collect(
    cells: Iterable[Mapping[str, Any]], run: Mapping[str, Any], default_python: str | None = None
) -> dict[str, Any]:
    """support.json's document from judged cells (compat's own; downstream cells name their
    libraries in the downstream report instead); a cell naming no Python ran on
    ``default_python``."""
    by_python: dict[str, dict[str, set[str]]] = {}
    pairs: dict[str, dict[str, set[str]]] = {}
    passed = [c for c in cells if c.get("status") == "passed"]
    for cell in passed:
        python = cell.get("python") or default_python
        if cell.get("group") or not python:
            continue
        mine = by_python.setdefault(str(python), {"torch": set(), "torchao": set()})
        for dist in ("torch", "torchao"):
            pin = _pin(cell, dist)
            if pin:
                mine[dist].add(pin)
        torch, torchao = _pin(cell, "torch"), _pin(cell, "torchao")
        if torch and torchao:
            pairs.setdefault(str(python), {}).setdefault(torch, set()).add(torchao)
    pythons = sorted(by_python, key=_py_key)
    table = {
        py: {dist: sorted(by_python[py][dist], key=_release_key) for dist in ("torch", "torchao")}
        for py in pythons
    }
    every_torch = sorted({t for v in table.values() for t in v["torch"]}, key=_release_key)
    return {
        "schema": SCHEMA,
        "run": {key: run.get(key) for key in ("written", "source")},
        "python": table,
        "pairs": {
            py: {
                t: sorted(pairs[py][t], key=_release_key)
                for t in sorted(pairs.get(py, {}), key=_release_key)
            }
            for py in pythons
        },
        "downstream": _downstream(passed),
        "floors": {
            "python": pythons[0] if pythons else None,
            "torch": every_torch[0] if every_torch else None,
        },
    }


def _pair_rows(pairs: Mapping[str, Mapping[str, list[str]]]) -> list[tuple[str, str, str]]:
    """(torch, TorchAO releases, Pythons) rows: per torch, the TorchAO releases that passed with it
    on exactly the same Pythons share a row."""
    by_torch: dict[str, dict[str, list[str]]] = {}
    for python, torches in pairs.items():
        for torch, aos in torches.items():
            for ao in aos:
                by_torch.setdefault(torch, {}).setdefault(ao, []).append(python)
    rows = []
    for torch in sorted(by_torch, key=_release_key):
        by_pythons: dict[tuple[str, ...], list[str]] = {}
        for ao in sorted(by_torch[torch], key=_release_key):
            pys = tuple(sorted(set(by_torch[torch][ao]), key=_py_key))
            by_pythons.setdefault(pys, []).append(ao)
        for pys, aos in by_pythons.items():
            rows.append((torch, ", ".join(aos), ", ".join(pys)))
    return rows


def _pairs_table(doc: Mapping[str, Any]) -> list[str]:
    rows = [
        f"| {torch} | {aos} | {pys} |" for torch, aos, pys in _pair_rows(doc.get("pairs") or {})
    ]
    return [
        "| torch | TorchAO (cells passed with this torch) | on Python |",
        "|---|---|---|",
        *rows,
    ]


def release_markers(version: str) -> tuple[str, str]:
    """The markers around a release's pairs in CHANGELOG.md."""
    return f"<!-- pairs {version}:begin -->", f"<!-- pairs {version}:end -->"


def render_release(doc: Mapping[str, Any], version: str) -> str:
    """CHANGELOG.md's block for ``version``: the torch x TorchAO pairs whose cells passed."""
    begin, end = release_markers(version)
    run = doc.get("run") or {}
    return "\n".join(
        [
            begin,
            "<!-- generated by `python -m harness.report.support --changelog CHANGELOG.md` from"
            " reports/support.json; do not edit -->",
            "",
            *_pairs_table(doc),
            "",
            f"From {run.get('source')} of {run.get('written')}.",
            end,
        ]
    )


def replace_block(text: str, block: str, begin: str, end: str, where: str) -> str:
    """``text`` with the block between ``begin`` and ``end`` replaced by ``block``; refused
    (naming ``where`` and the markers) when they are absent."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise Refused(f"{where} has no {begin} … {end} block to fill")
    return text[:start] + block + text[stop + len(end) :]


def render_table(doc: Mapping[str, Any]) -> str:
    """The README's tables: the torch x TorchAO pairs that passed, with the Pythons they passed
    on; then each downstream group's libraries and the pairs its cells passed on."""
    lines = [
        BEGIN,
        "<!-- generated by `python -m harness.report.support` from reports/support.json;"
        " do not edit -->",
        "",
        *_pairs_table(doc),
    ]
    groups = doc.get("downstream") or {}
    if groups:
        lines += [
            "",
            "| downstream group | libraries | torch × TorchAO (cells passed) |",
            "|---|---|---|",
        ]
    for name, found in groups.items():
        libraries = ", ".join(
            f"{dist} {' / '.join(releases)}" for dist, releases in found["libraries"].items()
        )
        pairs = ", ".join(f"{t} × {a}" for t, a in found["pairs"])
        lines.append(f"| {name} | {libraries} | {pairs} |")
    run = doc.get("run") or {}
    lines += [
        "",
        f"From {run.get('source')} of {run.get('written')}.",
        END,
    ]
    return "\n".join(lines)


def replace_table(readme: str, doc: Mapping[str, Any]) -> str:
    """``readme`` with the block between the markers re-rendered; refused if they are absent."""
    return replace_block(readme, render_table(doc), BEGIN, END, "the README")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.support", description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--from", dest="source", type=Path, help="a run's reports folder")
    where.add_argument("--baseline", type=Path, help="a baseline (reports/baseline.json)")
    parser.add_argument("--out", type=Path, default=None, help="default: reports/support.json")
    parser.add_argument("--readme", type=Path, default=None, help="re-render its support table")
    parser.add_argument(
        "--changelog", type=Path, default=None, help="re-render the current release's pairs"
    )
    args = parser.parse_args(argv)
    if args.baseline is not None:
        base = json.loads(args.baseline.read_text())
        default = spec.load(paths.matrix_path()).default_python
        run = {"written": base.get("created"), "source": f"the baseline {args.baseline.name}"}
        doc = collect(base.get("cells", {}).values(), run, default)
    else:
        want = verdict.expected(args.source)
        run = {"written": want.run.get("written"), "source": f"the run in {args.source}"}
        doc = collect(verdict.judge(args.source, want), run)
    if not doc["python"]:
        print("no passed cell: support.json not written", file=sys.stderr)
        return 1
    out = args.out or paths.reports_path() / "support.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")
    if args.readme:
        args.readme.write_text(replace_table(args.readme.read_text(), doc))
        print(f"updated the support table in {args.readme}")
    if args.changelog:
        version = written_version(paths.ROOT)
        block = render_release(doc, version)
        text = replace_block(args.changelog.read_text(), block, *release_markers(version),
                             str(args.changelog))  # fmt: skip
        args.changelog.write_text(text)
        print(f"updated the pairs of {version} in {args.changelog}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
