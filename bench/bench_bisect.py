"""A bisection's wall time against installing and testing every release of the same range one by
one, side by side in one run, on the same cell, venv, tests and probe machinery.

    python bench/bench_bisect.py [--rounds 2] [--package accelerate --from 1.2.1 --to 1.15.0]

The default range is the README's demo 2 (accelerate 1.2.1 → 1.15.0: 18 releases) with the
drift probe of accelerate's checkpoint-load path on torch 2.6 × TorchAO 0.8 (cpu). Each round
runs the bisection, then the linear scan (every release from --from to --to, each synced back to
the cell's pins and installed over them exactly as a bisection probe is); rounds alternate the
order so neither side always runs on a warmer cache. Both must find the same release. The best
wall time of each side gives the ratio; results go to reports/bench/bisect.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "bench" / "bisect.json"
sys.path.insert(0, str(ROOT))

from harness.bisect import bisection  # noqa: E402
from harness.matrix import releases  # noqa: E402
from harness.matrix.interpreters import uv_bin  # noqa: E402
from harness.matrix.spec import load  # noqa: E402

TARGET_RATIO = 0.4
TEST = "tests/compat/drift/test_probes.py::test_accelerate_loads_quantized_weight"


def linear(request: bisection.Request, target: bisection.Target) -> dict[str, Any]:
    """Probe every release of the range in order; the first that behaves like --to."""
    listing = releases.list_releases(
        request.package,
        python=target.python,
        uv=target.uv,
        index_args=bisection.listing_index(target),
    )
    low, high = Version(request.low), Version(request.high)
    everything = [low, *listing.between(low, high), high]
    workdir = target.reports / "bisect-probes"
    start = time.monotonic()
    snapshot = bisection.prepare(target, workdir, None)
    probes = []
    try:
        for i, version in enumerate(everything):
            probes.append(
                bisection.run_probe(request, target, snapshot, str(version), "scan", i + 1, None)
            )
    finally:
        bisection.restore(target, snapshot, workdir / "restore.log")
    last = probes[-1].outcome
    first = next(p.version for p in probes if p.outcome == last)
    return {
        "seconds": round(time.monotonic() - start, 2),
        "probes": len(probes),
        "first": first,
        "releases": len(everything),
    }


def bisect_once(request: bisection.Request, target: bisection.Target) -> dict[str, Any]:
    start = time.monotonic()
    result = bisection.bisect(request, target, echo=None)
    return {
        "seconds": round(time.monotonic() - start, 2),
        "probes": len(result["probes"]),
        "first": result["answer"]["first"],
        "releases": len(result["releases"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--package", default="accelerate")
    parser.add_argument("--from", dest="low", default="1.2.1")
    parser.add_argument("--to", dest="high", default="1.15.0")
    parser.add_argument("--test", default=TEST)
    parser.add_argument("--cell", default="torch2.6-ao0.8-cpu")
    args = parser.parse_args()
    matrix = load()
    cell = bisection.find_cell(matrix, args.cell)
    request = bisection.Request(args.package, args.low, args.high, (args.test,))
    uv = uv_bin()
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([uv, "venv", "-q", "--python", cell.python, str(venv)], check=True)
        target = bisection.target_for(
            matrix, cell, venv / "bin" / "python", uv=uv, reports=Path(tmp) / "reports"
        )
        bisection.prepare(target, Path(tmp) / "warmup", None)  # the cell's pins, once, untimed
        for n in range(args.rounds):
            order = ("bisect", "linear") if n % 2 == 0 else ("linear", "bisect")
            row: dict[str, Any] = {"order": list(order)}
            for side in order:
                row[side] = (
                    bisect_once(request, target) if side == "bisect" else linear(request, target)
                )
                print(f"round {n + 1} {side}: {row[side]}", flush=True)
            rounds.append(row)
    firsts = {r[side]["first"] for r in rounds for side in ("bisect", "linear")}
    if len(firsts) != 1:
        raise SystemExit(f"bisection and scan disagree: {firsts}")
    best = {side: min(r[side]["seconds"] for r in rounds) for side in ("bisect", "linear")}
    ratio = round(best["bisect"] / best["linear"], 3)
    doc = {
        "benchmark": "release bisection vs installing and testing every release one by one",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "method": (
            "wall time (time.monotonic) of harness.bisect.bisection.bisect and of a linear scan "
            "through "
            "the same probe function (sync the venv to the cell's pins, install the release over "
            "them, run the selected test), same venv and uv cache, rounds alternating the order; "
            "best of the rounds per side. The cell's pins were installed once before timing; the "
            "bisection's time includes listing the releases and its own setup and restore."
        ),
        "package": args.package,
        "range": [args.low, args.high],
        "releases": rounds[0]["bisect"]["releases"],
        "test": args.test,
        "cell": cell.id,
        "first": firsts.pop(),
        "rounds": rounds,
        "best_s": best,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio <= TARGET_RATIO,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("releases", "first", "best_s", "ratio")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
