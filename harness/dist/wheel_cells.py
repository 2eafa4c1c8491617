"""compat's suite against the installed wheel, with the source tree unimportable: ``nox -s wheel``.

    python -m harness.dist.wheel_cells [--dist DIR] [--reports DIR] [--envdir DIR]
        [--backend NAME ...] [--cell PATTERN ...] [--list]

The cells (:func:`chosen`, from matrix.toml, per backend, cpu unless named): the oldest and the
newest pinned torch × TorchAO of compat's own suite, and the newest downstream cell (its
libraries, the integrations and the peers' own suites through compat). Each gets a venv of its
own, made afresh under ``--envdir`` (``wheel-<cell id>``), with the cell's pins and test
requirements and then the one wheel in ``--dist`` (``nox -s dist`` built it) with its
``[safetensors]`` extra, installed last like an upstream candidate (the record lists it).

The suite runs from a staged folder (``<reports>/wheel/suite``) that links ``tests/`` and
``harness/`` and copies the pytest configuration, without ``compat/``: no path of the run leads
to the tree's compat. The probe makes sure of it (``harness/cells/probe.py``, ``InstalledOnly``):
compat imports only from the installed distribution's files, any other copy is refused and
recorded, and what the suite imported is kept in the cell's record as ``compat_source``. A cell
passes when its tests pass and compat came from the wheel, at its version, nothing refused (else
``inconsistent``, the reason naming what).

Records: ``<reports>/wheel/cells/<id>/`` (as a matrix cell's) and ``<reports>/wheel.json``.
Exit 0 when every cell passed, 1 when one did not, 2 when the input is refused.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.cells.cell import harness_error, run_cell
from harness.cells.plan import plan_for
from harness.cells.record import summary_line
from harness.cells.record import CellResult
from harness.cells.probe import INSTALLED_ONLY_ENV
from harness.matrix import paths, selection, spec
from harness.matrix.errors import Refused
from harness.matrix.interpreters import uv_bin
from harness.matrix.project import written_version
from harness.matrix.procs import Echo, Stop
from harness.matrix.spec import LATEST, Cell, Matrix, label_key

DISTRIBUTION, EXTRA = "compat-matrix", "safetensors"
SOURCE_FILE = "compat-source.json"  # in the cell's folder: what the suite imported
STAGED = ("tests", "harness")  # linked into the staged folder; compat/ never is
CONFIG = "pyproject.toml"  # copied: pytest's configuration, its rootdir the staged folder
SUBDIR, REPORT = "wheel", "wheel.json"


def chosen(matrix: Matrix, backends: Sequence[str] = ("cpu",)) -> list[Cell]:
    """Per backend: compat's own cells (default Python) of the oldest and the newest pinned
    torch × TorchAO, then the newest pinned downstream cell; each once, in that order."""
    out: list[Cell] = []
    for backend in backends:
        cells = [
            c
            for c in matrix.cells(tiers=spec.TIERS)
            if c.backend.name == backend and LATEST not in (c.torch.pin, c.torchao.pin)
        ]
        own = [c for c in cells if c.group is None and not c.named_python]
        oldest = min(
            own, key=lambda c: (label_key(c.torch.label), label_key(c.torchao.label)), default=None
        )
        picked = [oldest, selection.newest(own), selection.newest(c for c in cells if c.group is not None)]
        out += [c for c in picked if c is not None and c not in out]
    if not out:
        raise Refused(f"matrix.toml has no pinned cell on backend(s) {list(backends)}")
    return out


def the_wheel(dist: Path) -> Path:
    """The one wheel of the project in ``dist``; refused when there is none or more than one."""
    wheels = sorted(dist.glob("compat_matrix-*.whl"))
    if len(wheels) != 1:
        raise Refused(
            f"{dist} holds {[w.name for w in wheels]}: one compat_matrix wheel is needed"
            " (nox -s dist builds it)"
        )
    return wheels[0]


def requirement(wheel: Path) -> str:
    """The wheel as a requirement with its extra (a PEP 508 direct reference)."""
    return f"{DISTRIBUTION}[{EXTRA}] @ {wheel.resolve().as_uri()}"


def stage(root: Path, folder: Path) -> Path:
    """A folder the suite runs from: links to ``root``'s tests/ and harness/, a copy of its
    pytest configuration, and no compat/."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name in STAGED:
        (folder / name).symlink_to(root / name, target_is_directory=True)
    shutil.copyfile(root / CONFIG, folder / CONFIG)
    return folder


def source_problem(source: dict[str, Any] | None, version: str) -> str | None:
    """Why the run did not test the installed wheel, or None when it did."""
    if source is None:
        return f"the probe wrote no {SOURCE_FILE}: where compat came from is unknown"
    if source.get("refused"):
        return f"the suite tried to import compat from elsewhere: {source['refused'][:3]}"
    if not source.get("imported"):
        return "the suite never imported compat"
    if not source.get("from_distribution"):
        return f"compat came from {source['imported']}, not the installed {DISTRIBUTION}"
    if source.get("version") != version or source.get("imported_version") != version:
        return (
            f"the installed {DISTRIBUTION} is {source.get('version')} and compat.__version__"
            f" {source.get('imported_version')}, not the wheel's {version}"
        )
    return None


def fresh_venv(uv: str, python: str, venv: Path) -> Path:
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([uv, "venv", "-q", "--python", python, str(venv)], check=True)
    return venv / "bin" / "python"


def run_one(
    matrix: Matrix,
    cell: Cell,
    *,
    wheel: Path,
    suite: Path,
    reports: Path,
    envdir: Path,
    echo: Echo | None,
    stop: Stop,
) -> CellResult:
    """The cell in a fresh venv with the wheel installed, run from ``suite``, judged."""
    uv = uv_bin()
    python = fresh_venv(uv, cell.python, envdir / f"wheel-{cell.id}")
    source_file = paths.cell_dir(reports, cell.id) / SOURCE_FILE
    plan = plan_for(
        matrix,
        cell,
        python,
        uv=uv,
        reports=reports,
        candidates=[requirement(wheel)],
        env={INSTALLED_ONLY_ENV: str(source_file)},
    )
    plan.cwd = suite
    result = run_cell(plan, echo=echo, stop=stop)
    source = json.loads(source_file.read_text()) if source_file.is_file() else None
    result.compat_source = source or {}
    problem = source_problem(source, written_version(matrix.root))
    if problem is not None and result.status == "passed":
        result.status, result.reason = "inconsistent", problem
    result.write(plan.outdir)
    return result


def main(argv: Sequence[str] | None = None, *, echo: Echo | None = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.dist.wheel_cells", description=__doc__)
    parser.add_argument("--dist", type=Path, default=paths.ROOT / "dist")
    parser.add_argument("--reports", type=Path, default=paths.DEFAULT_REPORTS)
    parser.add_argument("--envdir", type=Path, default=paths.ROOT / ".nox")
    parser.add_argument("--backend", action="append", default=[])
    parser.add_argument("--cell", action="append", default=[], help="fnmatch on the cell ids")
    parser.add_argument("--list", action="store_true", help="print the cells' ids as JSON")
    args = parser.parse_args(argv)
    try:
        matrix = spec.load(paths.matrix_path())
        cells = [
            c
            for c in chosen(matrix, args.backend or ["cpu"])
            if not args.cell or any(fnmatch.fnmatchcase(c.id, p) for p in args.cell)
        ]
        if args.list:
            print(json.dumps([c.id for c in cells]))
            return 0
        wheel = the_wheel(args.dist)
    except Refused as exc:
        print(f"[wheel] refused: {exc}", file=sys.stderr)
        return 2
    # absolute: the cells install and run from the staged folder, not from here
    return _run(
        matrix, cells, wheel.absolute(), args.reports.absolute(), args.envdir.absolute(), echo
    )


def _run(
    matrix: Matrix,
    cells: list[Cell],
    wheel: Path,
    reports: Path,
    envdir: Path,
    echo: Echo | None,
) -> int:
    out = reports / SUBDIR
    suite = stage(matrix.root, out / "suite")
    stop = Stop()
    results: list[CellResult] = []
    with stop.on_signals():
        for cell in cells:
            try:
                result = run_one(
                    matrix, cell, wheel=wheel, suite=suite, reports=out, envdir=envdir,
                    echo=echo, stop=stop,
                )  # fmt: skip
            except Exception as exc:  # one cell's harness failure is that cell's status
                result = harness_error(cell, exc, out)
            results.append(result)
            print(f"[wheel] {summary_line(result)}")
    found = {
        "wheel": wheel.name,
        "requirement": requirement(wheel),
        "cells": [asdict(r) for r in results],
        "ok": bool(results) and all(r.ok for r in results),
    }
    (reports / REPORT).write_text(json.dumps(found, indent=2) + "\n")
    return 0 if found["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
