"""Install and matrix wall-clock: uv vs nox's default pip/virtualenv, cold and warm, in one run.

    python bench/bench_matrix.py install   one cell's install: uv vs pip, cold and warm caches
    python bench/bench_matrix.py matrix    the whole core cpu matrix: cold caches, then warm
    python bench/bench_matrix.py all

Cold means an empty package cache (a fresh temporary cache directory) and a new venv; warm means
the cache that the cold run filled and, for the matrix, the venvs it left. Everything runs in
temporary directories; results are merged into reports/bench/matrix.json.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "bench" / "matrix.json"
sys.path.insert(0, str(ROOT))

from harness import spec  # noqa: E402
from harness.runner import uv_bin  # noqa: E402

BENCH_CELL = ("2.3", "0.6", "cpu")  # the reference cell: torch 2.3.1 + TorchAO 0.6.1


def timed(cmd: Sequence[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    done = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return round(seconds, 2)


def requirements(cell: spec.Cell, matrix: spec.Matrix) -> list[str]:
    reqs = cell.requirements()
    for r in matrix.test_requirements:
        reqs += ["-r", str(ROOT / r)]
    return reqs


def bench_install(tmp: Path) -> dict[str, Any]:
    matrix = spec.load()
    cell = matrix.find_cell(*BENCH_CELL)
    assert cell is not None
    reqs = requirements(cell, matrix)
    uv = uv_bin()
    env = dict(os.environ)
    env_uv = {**env, "UV_CACHE_DIR": str(tmp / "uv-cache")}
    env_pip = {**env, "PIP_CACHE_DIR": str(tmp / "pip-cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    out: dict[str, Any] = {"cell": cell.id, "requirements": reqs}

    def uv_once(name: str) -> float:
        venv = tmp / name
        t = timed([uv, "venv", "-q", "-p", sys.executable, str(venv)], env_uv)
        t += timed(
            [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *reqs], env_uv
        )
        shutil.rmtree(venv)
        return round(t, 2)

    def pip_once(name: str) -> float:
        venv = tmp / name
        # nox's default backend: virtualenv, then `pip install` in it
        t = timed([sys.executable, "-m", "virtualenv", "-q", str(venv)], env_pip)
        t += timed([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *reqs], env_pip)
        shutil.rmtree(venv)
        return round(t, 2)

    out["uv_cold_s"] = uv_once("uv-cold")
    out["uv_warm_s"] = min(uv_once("uv-warm1"), uv_once("uv-warm2"))
    shutil.rmtree(tmp / "uv-cache", ignore_errors=True)
    out["pip_cold_s"] = pip_once("pip-cold")
    out["pip_warm_s"] = min(pip_once("pip-warm1"), pip_once("pip-warm2"))
    shutil.rmtree(tmp / "pip-cache", ignore_errors=True)
    out["speedup_cold"] = round(out["pip_cold_s"] / out["uv_cold_s"], 2)
    out["speedup_warm"] = round(out["pip_warm_s"] / out["uv_warm_s"], 2)
    out["targets"] = {"speedup_cold": ">= 3", "speedup_warm": ">= 20"}
    return out


def bench_matrix(tmp: Path) -> dict[str, Any]:
    """`nox -s matrix -- --backend cpu` with an empty uv cache and no venvs, then again."""
    env = {
        **os.environ,
        "UV_CACHE_DIR": str(tmp / "uv-cache"),
        "CI": "true",
    }
    envdir = tmp / "nox-envs"
    cmd = [
        sys.executable,
        "-m",
        "nox",
        "--envdir",
        str(envdir),
        "-s",
        "matrix",
        "--",
        "--backend",
        "cpu",
    ]
    out: dict[str, Any] = {"command": "nox -s matrix -- --backend cpu (12 core cells)"}
    out["cold_s"] = timed(cmd, env)
    out["warm_s"] = timed(cmd, env)
    summary = json.loads((ROOT / "reports" / "matrix.json").read_text())
    out["cells"] = summary["totals"]["by_status"]
    out["targets"] = {"warm_s": "<= 180"}
    shutil.rmtree(tmp / "uv-cache", ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) > 1 else "all"
    if what not in ("install", "matrix", "all"):
        raise SystemExit(f"unknown benchmark {what!r}; accepted: install, matrix, all")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with tempfile.TemporaryDirectory(dir=ROOT.parent) as tmp:
        if what in ("install", "all"):
            results["install"] = bench_install(Path(tmp))
            print(json.dumps(results["install"], indent=2))
        if what in ("matrix", "all"):
            results["matrix"] = bench_matrix(Path(tmp))
            print(json.dumps(results["matrix"], indent=2))
    OUT.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
