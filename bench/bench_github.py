"""The nightly's jobs and runner-minutes on GitHub: a job per cell (REF) beside one per torch group.

    python bench/bench_github.py measure --torch 2.6 [--ref REF] [--tiers "core extended"]
        one torch group's cpu cells, in one run: each cell as REF's cell job ran it (a new venv,
        `nox -s tests-<cell>` with every test run: the nightly's `full`), then the whole group as
        a cell job now runs it (new venvs, `nox -s matrix -- --cell …`), with `--full` and
        without (carried verdicts); wall seconds of each, merged into reports/bench/github.json
    python bench/bench_github.py model
        the jobs and runner-minutes of a nightly at each width (cpu; cpu + cuda; cpu + cuda +
        xpu; all four backends), one job per cell beside one per torch group, from the measured
        groups and the assumptions in ASSUMED, into the same file's "model"

Every run is on this machine (2 cores: GitHub's standard runner for a private repository has 2
vCPUs), with uv's cache warm: what GitHub's runners pay on top (starting the job, checkout,
setup-python, the tools, the uploads; downloading each torch wheel into an empty uv cache) is not
measured here and is added per job and per download from ASSUMED, the same on both sides. GitHub
bills each job's time rounded up to a whole minute.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "bench" / "github.json"
sys.path.insert(0, str(ROOT))

from harness.cells import plan  # noqa: E402
from harness.ci import fanout  # noqa: E402
from harness.matrix import spec  # noqa: E402

REF = "94f88d1"  # main before the fan-out by torch group: one job per cell
# What GitHub's runners pay that this machine does not, per job and per wheel download (seconds).
ASSUMED = {
    "job_s": 30.0,  # start, checkout, setup-python of a cached Python, pip install nox + uv, upload
    "extra_python_s": 5.0,  # each further Python setup-python fetches for a group job
    "torch_download_s": 10.0,  # a torch wheel into an empty uv cache (~200 MB CPU build) + unzip
}
WIDTHS = {  # the backends of each width the nightly accepts (tiers: all three)
    "cpu": ("cpu",),
    "cpu + cuda": ("cpu", "cuda"),
    "cpu + cuda + xpu": ("cpu", "cuda", "xpu"),
    "all four": ("cpu", "cuda", "xpu", "mps"),
}
TIERS = ("core", "extended", "downstream")


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _nox(args: Sequence[str], cwd: Path, reports: Path, env: Mapping[str, str] = {}) -> float:
    """Wall seconds of ``nox ARGS`` in ``cwd``, its cells' records in ``reports``; a failing run
    is reported, not fatal (its cells' records say why)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMPAT_MATRIX_")}
    environ |= {"COMPAT_MATRIX_REPORTS": str(reports), **env}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "nox", *args], cwd=cwd, env=environ, capture_output=True, text=True
    )
    seconds = round(time.perf_counter() - start, 1)
    if done.returncode != 0:
        print(f"  (exit {done.returncode}) {done.stdout[-800:]}", flush=True)
    return seconds


def _records(reports: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((reports / "cells").glob("*/cell.json")):
        doc = json.loads(path.read_text())
        out[doc["id"]] = {
            "status": doc.get("status"),
            "duration_s": doc.get("duration_s"),
            "timings": doc.get("timings", {}),
        }
    return out


def group_cells(matrix: spec.Matrix, label: str, tiers: Sequence[str]) -> list[spec.Cell]:
    return [c for c in matrix.cells(tiers=tiers, backend="cpu") if c.torch.label == label]


def sources(matrix: spec.Matrix, cells: Sequence[spec.Cell]) -> set[str]:
    """The cells REF's setup job marked to make the TorchAO-blocked run of a full night: the
    first of each set of two or more cells that differ only in TorchAO."""
    sets: dict[Any, list[str]] = {}
    for cell in cells:
        sets.setdefault(plan.key(matrix, cell) or cell.id, []).append(cell.id)
    return {ids[0] for ids in sets.values() if len(ids) > 1}


def per_cell(tmp: Path, ref: str, cells: Sequence[spec.Cell], marked: set[str]) -> dict[str, Any]:
    """Each cell as REF's cell job ran it in a full night: its own new venv, every test."""
    tree = tmp / "ref"
    _git("worktree", "add", "--detach", str(tree), ref)
    try:
        walls = {}
        for cell in cells:
            env = {"COMPAT_MATRIX_FULL": "true"}
            env |= {"COMPAT_MATRIX_CARRY_SOURCE": cell.id} if cell.id in marked else {}
            envdir = tmp / f"envs-{cell.id}"
            args = ["--envdir", str(envdir), "-s", f"tests-{cell.id}"]
            walls[cell.id] = _nox(args, tree, tmp / "reports-ref", env)
            print(f"  {cell.id}: {walls[cell.id]} s", flush=True)
            subprocess.run(["rm", "-rf", str(envdir)], check=True)
        return {"walls_s": walls, "sum_s": round(sum(walls.values()), 1)}
    finally:
        _git("worktree", "remove", "--force", str(tree))


def group(tmp: Path, name: str, cells: Sequence[spec.Cell], full: bool) -> dict[str, Any]:
    """The group as a cell job now runs it: new venvs, `nox -s matrix -- --cell …`."""
    envdir, reports = tmp / f"envs-{name}", tmp / f"reports-{name}"
    args = ["--envdir", str(envdir), "-s", "matrix", "--"]
    args += [a for t in dict.fromkeys(c.tier for c in cells) for a in ("--tier", t)]
    args += [a for c in cells for a in ("--cell", c.id)] + (["--full"] if full else [])
    wall = _nox(args, ROOT, reports)
    subprocess.run(["rm", "-rf", str(envdir)], check=True)
    print(f"  {name}: {wall} s", flush=True)
    return {"wall_s": wall, "cells": _records(reports)}


def measure(label: str, ref: str, tiers: Sequence[str]) -> dict[str, Any]:
    matrix = spec.load()
    cells = group_cells(matrix, label, tiers)
    if not cells:
        raise SystemExit(f"no cpu cell of torch {label} in tiers {list(tiers)}")
    with tempfile.TemporaryDirectory(prefix="bench-github-") as name:
        tmp = Path(name)
        print(f"torch {label}: {len(cells)} cpu cells, one job each at {ref}", flush=True)
        today = per_cell(tmp, ref, cells, sources(matrix, cells))
        today["cells"] = _records(tmp / "reports-ref")
        print("the group as one job: --full, then carried", flush=True)
        full = group(tmp, "group-full", cells, True)
        carried = group(tmp, "group-carried", cells, False)
    venvs = len({c.python for c in cells})  # distinct Pythons: one torch download each
    return {
        "cells": [c.id for c in cells],
        "pythons": venvs,
        "per_cell_job": today,
        "group_full": full,
        "group_carried": carried,
        "ratio_full_to_per_cell": round(full["wall_s"] / today["sum_s"], 3),
        "ratio_carried_to_per_cell": round(carried["wall_s"] / today["sum_s"], 3),
    }


def billed(seconds: float) -> int:
    """GitHub's minutes for one job: its time rounded up to a whole minute."""
    return math.ceil(seconds / 60)


def job_overhead(pythons: int) -> float:
    return ASSUMED["job_s"] + ASSUMED["extra_python_s"] * (pythons - 1)


def model_width(
    matrix: spec.Matrix, backends: Sequence[str], measured: Mapping[str, Any]
) -> dict[str, Any]:
    """Jobs and runner-minutes of one nightly width: one job per cell beside one per torch group
    (full, and carried). A cell's wall is its measured one, or the mean of the measured cells
    of its kind (downstream, or compat's own suite); a group job's wall is the sum of its cells'
    per-cell walls scaled by the measured groups' ratio (group wall ÷ their cells' per-cell sum)."""
    cells = [c for c in matrix.cells(tiers=TIERS) if c.backend.name in backends]
    walls = {cid: s for g in measured.values() for cid, s in g["per_cell_job"]["walls_s"].items()}
    kinds = {"downstream": [], "compat": []}  # type: dict[str, list[float]]
    for cid, s in walls.items():
        kinds["downstream" if "-ds" in cid else "compat"].append(s)
    mean = {k: sum(v) / len(v) for k, v in kinds.items() if v}

    def wall(cell: spec.Cell) -> float:
        own = walls.get(cell.id.rsplit("-", 1)[0] + "-cpu")  # a GPU cell: its cpu twin's
        return own if own is not None else mean["downstream" if cell.group else "compat"]

    scale = {
        mode: sum(g[mode]["wall_s"] for g in measured.values())
        / sum(g["per_cell_job"]["sum_s"] for g in measured.values())
        for mode in ("group_full", "group_carried")
    }
    today = sum(billed(job_overhead(1) + ASSUMED["torch_download_s"] + wall(c)) for c in cells)
    jobs = fanout.plan_jobs(cells)
    out: dict[str, Any] = {"cells": len(cells), "jobs_per_cell": len(cells)}
    out["jobs_per_group"] = len(jobs)
    out["minutes_per_cell"] = today
    for mode in ("group_full", "group_carried"):
        seconds = [
            job_overhead(len(job.pythons))
            + ASSUMED["torch_download_s"] * len(job.pythons)
            + scale[mode] * sum(wall(c) for c in job.cells)
            for job in jobs
        ]
        out[f"minutes_per_{mode}"] = sum(billed(s) for s in seconds)
        out[f"longest_job_s_{mode}"] = round(max(seconds))
    out["ratio_full"] = round(out["minutes_per_group_full"] / today, 3)
    out["ratio_carried"] = round(out["minutes_per_group_carried"] / today, 3)
    return out


# the assumptions at their ends: (job_s, torch_download_s) from a quick job on a cached Python to
# a slow one, a wheel from a near CDN to a slow link
SENSITIVITY = ((15.0, 5.0), (60.0, 5.0), (15.0, 30.0), (60.0, 30.0))


def model(measured: Mapping[str, Any]) -> dict[str, Any]:
    matrix = spec.load()
    widths = {name: model_width(matrix, b, measured) for name, b in WIDTHS.items()}
    widest, ends = WIDTHS["all four"], []
    saved = dict(ASSUMED)
    try:
        for job_s, download_s in SENSITIVITY:
            ASSUMED.update(job_s=job_s, torch_download_s=download_s)
            found = model_width(matrix, widest, measured)
            ends.append({"job_s": job_s, "torch_download_s": download_s, **found})
    finally:
        ASSUMED.update(saved)
    return {
        "assumed_s": ASSUMED,
        "measured_groups": sorted(measured),
        "widths": widths,
        "sensitivity_all_four": ends,
    }


def _load() -> dict[str, Any]:
    return json.loads(OUT.read_text()) if OUT.exists() else {}


def _save(doc: Mapping[str, Any]) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/bench_github.py")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("measure")
    one.add_argument("--torch", required=True, help="the torch label, e.g. 2.6")
    one.add_argument("--ref", default=REF)
    one.add_argument("--tiers", default=" ".join(TIERS))
    sub.add_parser("model")
    args = parser.parse_args(argv)
    doc = _load()
    if args.command == "measure":
        found = measure(args.torch, args.ref, args.tiers.split())
        doc.setdefault("measured", {})[f"torch{args.torch}-cpu"] = {
            **found,
            "ref": _git("rev-parse", args.ref),
            "new": _git("rev-parse", "HEAD"),
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        }
    else:
        doc["model"] = model(doc.get("measured", {}))
    _save(doc)
    print(json.dumps(doc.get("model") if args.command == "model" else found, indent=1)[:4000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
