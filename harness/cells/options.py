"""The command line of ``nox -s matrix``, ``nox -s gate`` and ``nox -s baseline`` (what follows
``--``): tiers, backends, cell patterns, side-by-side groups, carrying, the peers' suites, the
downstream cells of today's stack, pruning; for the gate and the baseline, results already on disk,
upstream candidates and earlier runs. The noxfile declares the sessions and hands them this.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from harness.cells import run
from harness.matrix import selection, spec
from harness.matrix.spec import Matrix


def parse(
    prog: str, posargs: Sequence[str], matrix: Matrix, *, gate: bool = False
) -> argparse.Namespace:
    """``nox -s <prog> -- <posargs>`` parsed (the gate's and baseline's flags with ``gate``);
    argparse refuses what it does not accept, naming the flag and the choices."""
    parser = argparse.ArgumentParser(prog=f"nox -s {prog} --")
    parser.add_argument("--tier", action="append", choices=spec.TIERS, help="default: core")
    parser.add_argument("--backend", action="append", choices=sorted(matrix.backends))
    parser.add_argument(
        "--cell",
        action="append",
        default=[],
        help="narrow to the cell ids matching this pattern (fnmatch: 'torch2.5-ao0.6-*')",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="torch groups run side by side (default: cores, at most 4)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="run every test in every cell (no carried verdicts) and check that each verdict"
        " the run would have carried agrees with the real one (the nightly does)",
    )
    parser.add_argument(
        "--peer-suites",
        choices=run.PEER_SUITES,
        default="every",
        help="the peers' own test suites (matrix.toml peer_suites): in every downstream cell"
        " (default), or only in the first cell of each downstream group (`first`: CI's budget;"
        " the other cells' records say where they ran)",
    )
    parser.add_argument(
        "--downstream-extended",
        choices=selection.DOWNSTREAM_EXTENDED,
        default="every",
        help="the downstream cells of an extended torch or TorchAO (today's stack): every one"
        " (default), or only the newest pinned torch x TorchAO of each group (`newest`: CI's"
        " budget; the nightly runs every one)",
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="for a disk that cannot hold every group's venv: a group whose venv is new installs"
        " through a uv cache of its own in its turn, and its venv goes after its cells"
        " (venvs already there are kept)",
    )
    if gate:
        parser.add_argument(
            "--from",
            dest="source",
            type=Path,
            help="use the per-cell results already in this folder instead of running the matrix",
        )
        parser.add_argument(
            "--candidate",
            action="append",
            default=[],
            help="an upstream candidate installed into every cell after the pins: a requirement"
            " (safetensors==0.8.0), a wheel path, or a VCS/URL requirement, verbatim",
        )
        parser.add_argument(
            "--history",
            nargs="+",
            default=[],
            help="earlier runs' report folders: a regression in a test flaky across them is flaky",
        )
    return parser.parse_args(list(posargs))


def expectation(args: argparse.Namespace) -> list[str]:
    """The gate's and baseline's --tier / --backend flags, when judging results from disk."""
    if args.source is None:
        return []  # a run just made: its manifest says which cells should have run
    return [
        *(f"--tier={t}" for t in args.tier or ()),
        *(f"--backend={b}" for b in args.backend or ()),
        *(f"--cell={c}" for c in args.cell),
    ]
