"""Install and matrix wall-clock: uv vs nox's default pip/virtualenv, cold and warm, in one run.

    python bench/bench_matrix.py install   one cell's install: uv vs pip, cold and warm caches
    python bench/bench_matrix.py matrix    the whole core cpu matrix: cold caches, then warm
    python bench/bench_matrix.py all
    python bench/bench_matrix.py carry [--ref REF] [--rounds N] [--envdir DIR] [--warmup 0]
                                           the warm core matrix at REF and at the working tree,
                                           side by side in one run, and where the time goes
    python bench/bench_matrix.py python-axis [the same options] [--keep DIR]
                                           the same, REF defaulting to the commit before the
                                           Python axis (its corners: 8 more core cells); --keep
                                           copies the new run's reports to DIR
    python bench/bench_matrix.py tests --ref REF [--rounds N] [--envdir DIR] [--warmup 0]
                                           the README's test command (`nox -s tests`), warm, at
                                           REF and at the working tree, alternating in one run
    python bench/bench_matrix.py tests-fresh --ref REF [--rounds N]
                                           the same from fresh clones at REF and at HEAD (new
                                           venvs, fault venvs included; uv's cache as it is),
                                           alternating: wall and CPU seconds
    python bench/bench_matrix.py corner-budget [--python VENV_PYTHON] [--rounds N]
                                           one cell's suite under the ci and the corner
                                           Hypothesis profiles: seconds, and the lines and
                                           branches of compat each runs (coverage, installed
                                           into the venv for the run and removed after)
    python bench/bench_matrix.py cold [--cache DIR] [--envdir DIR]
                                           the README's first command with an empty uv cache
                                           and no venvs, against the download floor measured in
                                           the same run (the bytes it fetched ÷ the rate of a
                                           side-by-side download of the core torch wheels)

Cold means an empty package cache (a fresh temporary cache directory) and a new venv; warm means
the cache that the cold run filled and, for the matrix, the venvs it left. Everything runs in
temporary directories; results are merged into reports/bench/matrix.json.
"""

from __future__ import annotations

import json
import os
import platform
import resource
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

from harness.matrix import spec  # noqa: E402
from harness.matrix.interpreters import uv_bin  # noqa: E402

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
    out: dict[str, Any] = {"command": "nox -s matrix -- --backend cpu (the core tier's cpu cells)"}
    out["cold_s"] = timed(cmd, env)
    out["warm_s"] = timed(cmd, env)
    summary = json.loads((ROOT / "reports" / "matrix.json").read_text())
    out["cells"] = summary["totals"]["by_status"]
    out["targets"] = {"warm_s": "<= 180"}
    shutil.rmtree(tmp / "uv-cache", ignore_errors=True)
    return out


def _rx_bytes() -> int:
    """Bytes received so far on every network interface but loopback (Linux)."""
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, data = line.split(":", 1)
        if name.strip() != "lo":
            total += int(data.split()[0])
    return total


def download_rate(tmp: Path, matrix: spec.Matrix) -> dict[str, Any]:
    """The core tier's torch wheels (default Python) downloaded side by side by pip with no
    cache: bytes per second, the rate the floor is computed with."""
    dest = tmp / "rate-sample"
    pins = [f"torch=={t.pin}" for t in matrix.torch if t.tier == "core"]
    start, rx = time.perf_counter(), _rx_bytes()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-cache-dir",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                matrix.default_python,
                pin,
                "-d",
                str(dest),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pin in pins
    ]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"pip download failed:\n{err[-3000:]}")
    seconds = time.perf_counter() - start
    size = sum(f.stat().st_size for f in dest.iterdir())
    shutil.rmtree(dest)
    return {
        "sample": pins,
        "bytes": size,
        "rx_bytes": _rx_bytes() - rx,
        "seconds": round(seconds, 2),
        "bytes_per_s": round(size / seconds),
    }


def bench_cold(tmp: Path, cache: Path | None, envdir: Path | None) -> dict[str, Any]:
    """The README's first command (`nox -s matrix`) with an empty uv cache and no venvs, and the
    download floor of the same run: the bytes it received ÷ the measured download rate."""
    cache = cache or tmp / "uv-cache"
    envdir = envdir or tmp / "nox-envs"
    for where in (cache, envdir):
        if where.exists() and any(where.iterdir()):
            raise SystemExit(f"{where} is not empty: a cold run needs an empty cache and envdir")
    matrix = spec.load()
    rate = download_rate(tmp, matrix)
    env = {**os.environ, "UV_CACHE_DIR": str(cache), "COMPAT_MATRIX_REPORTS": str(tmp / "reports")}
    env.pop("COMPAT_MATRIX_TOML", None)
    rx = _rx_bytes()
    cold = timed([sys.executable, "-m", "nox", "--envdir", str(envdir), "-s", "matrix"], env)
    received = _rx_bytes() - rx
    floor = received / rate["bytes_per_s"]
    totals = json.loads((tmp / "reports" / "matrix.json").read_text())["totals"]
    return {
        "command": "nox -s matrix (the README's first command), empty uv cache, no venvs",
        "cold_s": cold,
        "received_bytes": received,
        "rate": rate,
        "floor_s": round(floor, 1),
        "ratio_to_floor": round(cold / floor, 2),
        "cells": totals.get("by_status"),
        "per_cell": durations(tmp / "reports")["per_cell"],
        "targets": {"ratio_to_floor": "<= 1.3"},
    }


def _suite(python: Path, profile: str, extra: Sequence[str] = ()) -> float:
    env = {**os.environ, "HYPOTHESIS_PROFILE": profile, "OMP_NUM_THREADS": "1"}
    tests = ["tests/compat"]
    return timed([str(python), *extra, "-m", "pytest", *tests, "-p", "no:cacheprovider", "-q"], env)


def _arcs(python: Path, data: Path) -> dict[str, list[list[int]]]:
    script = (
        "import json, sys\n"
        "from coverage import CoverageData\n"
        "d = CoverageData(sys.argv[1]); d.read()\n"
        "print(json.dumps({f: sorted(d.arcs(f) or []) for f in d.measured_files()}))\n"
    )
    done = subprocess.run(
        [str(python), "-c", script, str(data)], capture_output=True, text=True, check=True
    )
    return {str(Path(f).relative_to(ROOT)): arcs for f, arcs in json.loads(done.stdout).items()}


def bench_corner_budget(tmp: Path, python: Path, rounds: int) -> dict[str, Any]:
    """The suite of the cell whose venv ``python`` is, under ``ci`` and ``corner``: wall time
    (alternating, best of ``rounds``) and the arcs of compat each executes (coverage, branch
    mode): the corner profile keeps catching power only where it runs what ci runs."""
    uv = uv_bin()
    subprocess.run([uv, "pip", "install", "-q", "--python", str(python), "coverage"], check=True)
    try:
        seconds: dict[str, list[float]] = {"ci": [], "corner": []}
        for _ in range(rounds):
            for profile in seconds:
                seconds[profile].append(_suite(python, profile))
        arcs = {}
        for profile in seconds:
            data = tmp / f"coverage-{profile}"
            run = ["-m", "coverage", "run", f"--data-file={data}", "--branch", "--source=compat"]
            _suite(python, profile, run)
            arcs[profile] = _arcs(python, data)
    finally:
        subprocess.run([uv, "pip", "uninstall", "-q", "--python", str(python), "coverage"])
    ci, corner = arcs["ci"], arcs["corner"]
    missing = {f: sorted(set(map(tuple, ci[f])) - set(map(tuple, corner.get(f, [])))) for f in ci}
    best = {k: min(v) for k, v in seconds.items()}
    version = subprocess.run(
        [str(python), "-c", "import sys, torch; print(sys.version.split()[0], torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        "command": "pytest tests (a cell's suite), HYPOTHESIS_PROFILE=ci vs corner, 1 thread",
        "python": version[0],
        "torch": version[1],
        "seconds": seconds,
        "best_s": best,
        "ratio_corner_to_ci": round(best["corner"] / best["ci"], 3),
        "arcs": {k: sum(len(v) for v in a.values()) for k, a in arcs.items()},
        "arcs_ci_only": {f: m for f, m in missing.items() if m},
        "targets": {"arcs_ci_only": "none"},
    }


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def before_adding(path: str) -> str:
    """The commit before ``path`` was added: harness/cells/carry.py for the matrix without carried
    verdicts, wheels.toml for the matrix without the Python axis."""
    added = _git("log", "--diff-filter=A", "--format=%H", "--", path).split()
    if not added:
        raise SystemExit(f"{path} has no commit yet: pass --ref")
    return _git("rev-parse", f"{added[-1]}^")


def durations(reports: Path) -> dict[str, Any]:
    """Seconds of test time per test file, summed over the cells' reportlogs (the blocked runs
    included), and each cell's steps (install, blocked run, tests)."""
    per_file: dict[str, float] = {}
    for log in sorted((reports / "cells").glob("*/**/log.jsonl")):
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("$report_type") == "TestReport":
                name = str(rec["nodeid"]).split("::")[0]
                per_file[name] = per_file.get(name, 0.0) + float(rec.get("duration", 0.0))
    steps = {}
    for cell in sorted((reports / "cells").glob("*/cell.json")):
        doc = json.loads(cell.read_text())
        steps[doc["id"]] = {**doc.get("timings", {}), "wall": doc.get("duration_s")}
    ranked = sorted(per_file.items(), key=lambda kv: -kv[1])
    return {"per_file_s": {k: round(v, 2) for k, v in ranked}, "per_cell": steps}


def _alternate(
    tmp: Path,
    ref: str,
    rounds: int,
    envdir: Path | None,
    warmup: Sequence[str],
    args: Sequence[str],
    keep: Path | None = None,
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """``nox ARGS`` at ``ref`` and at the working tree, alternating, sharing one envdir and uv
    cache, after one untimed run of each tree named in ``warmup`` (to build the venvs); each
    tree's reports go to ``tmp/reports-ref`` / ``tmp/reports-new``."""
    old = tmp / "ref"
    _git("worktree", "add", "--detach", str(old), ref)
    envs = envdir or tmp / "nox-envs"
    try:
        trees = {"ref": old, "new": ROOT}
        times: dict[str, list[float]] = {"ref": [], "new": []}

        def once(name: str) -> float:
            env = {**os.environ, "COMPAT_MATRIX_REPORTS": str(tmp / f"reports-{name}")}
            env.pop("COMPAT_MATRIX_TOML", None)
            cmd = [sys.executable, "-m", "nox", "--envdir", str(envs), *args]
            return timed(cmd, env, cwd=trees[name])

        for name in warmup:
            print(f"{name} (warm-up): {once(name)} s", flush=True)
        for _ in range(rounds):
            for name in ("ref", "new"):
                times[name].append(once(name))
                print(f"{name}: {times[name][-1]} s", flush=True)
        if keep is not None:
            shutil.copytree(tmp / "reports-new", keep, dirs_exist_ok=True)
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        return times, med
    finally:
        _git("worktree", "remove", "--force", str(old))


def _head() -> str:
    return _git("rev-parse", "HEAD") + (" + working tree" if _git("status", "--short") else "")


def _compared(ref: str, times: dict[str, list[float]], med: dict[str, float]) -> dict[str, Any]:
    """What every side-by-side benchmark records: both trees, their times and the ratio."""
    return {
        "ref": ref,
        "new": _head(),
        "seconds": times,
        "median_s": med,
        "ratio_new_to_ref": round(med["new"] / med["ref"], 3),
    }


def bench_carry(
    tmp: Path,
    ref: str,
    rounds: int,
    envdir: Path | None,
    warmup: bool = True,
    keep: Path | None = None,
) -> dict[str, Any]:
    """Warm `nox -s matrix` (the core cpu cells) at ``ref`` and at the working tree, alternating,
    sharing one envdir and uv cache."""
    args = ("-s", "matrix", "--", "--backend", "cpu")
    # one warm-up at the working tree builds the venvs both trees use (same names, same pins)
    times, med = _alternate(tmp, ref, rounds, envdir, ("new",) if warmup else (), args, keep)
    new_reports = tmp / "reports-new"
    summary = json.loads((new_reports / "matrix.json").read_text())["totals"]
    return {
        "command": "nox -s matrix -- --backend cpu (the core cpu cells), warm",
        "cells": {"ref": _cells(tmp / "reports-ref"), "new": _cells(new_reports)},
        **_compared(ref, times, med),
        "tests": {"ran": summary.get("ran"), "carried": summary.get("carried")},
        "new_durations": durations(new_reports),
        "ref_durations": durations(tmp / "reports-ref"),
        "targets": {"median_s.new": "<= 120"},
    }


def bench_tests(
    tmp: Path, ref: str, rounds: int, envdir: Path | None, warmup: bool
) -> dict[str, Any]:
    """Warm `nox -s tests` (the README's test command: the default cell, then the harness's own
    tests) at ``ref`` and at the working tree, alternating, sharing one envdir and uv cache."""
    # each tree warms up: the venvs one tree's harness tests keep need not be the other's
    both = ("ref", "new") if warmup else ()
    times, med = _alternate(tmp, ref, rounds, envdir, both, ("-s", "tests"))
    return {
        "command": "nox -s tests, warm (venvs and fault venvs kept)",
        **_compared(ref, times, med),
        "targets": {"median_s.new": "<= 240"},
    }


def _fresh_once(tmp: Path, name: str, commit: str) -> dict[str, float]:
    """A fresh clone of this repository at ``commit``, then ``nox -s tests`` in it: its wall
    seconds and the CPU seconds of every process it waited for. The clone and its venvs go
    afterwards."""
    where = tmp / name
    where.mkdir()
    _git("clone", "-q", str(ROOT), str(where / "main"))
    subprocess.run(["git", "checkout", "-q", commit], cwd=where / "main", check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPAT_MATRIX_")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed([sys.executable, "-m", "nox", "-s", "tests"], env, cwd=where / "main")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    shutil.rmtree(where)
    return {"wall_s": wall, "cpu_s": round(cpu, 1)}


def bench_tests_fresh(tmp: Path, ref: str, rounds: int) -> dict[str, Any]:
    """`nox -s tests` from fresh clones at ``ref`` and at HEAD, alternating (ref first), one uv
    cache: what a newcomer's first run and CI's tests stage cost."""
    head = _git("rev-parse", "HEAD")
    runs: dict[str, list[dict[str, float]]] = {"ref": [], "new": []}
    for n in range(rounds):
        for name, commit in (("ref", ref), ("new", head)):
            runs[name].append(_fresh_once(tmp, f"{name}-{n}", commit))
            print(f"{name} ({commit[:9]}): {runs[name][-1]}", flush=True)
    med = {
        key: {k: sorted(r[key] for r in v)[len(v) // 2] for k, v in runs.items()}
        for key in ("wall_s", "cpu_s")
    }
    return {
        "command": "nox -s tests in a fresh clone (new venvs and fault venvs, uv cache kept)",
        "ref": _git("rev-parse", ref),
        "new": head,
        "runs": runs,
        "median": med,
        "ratio_new_to_ref": round(med["wall_s"]["new"] / med["wall_s"]["ref"], 3),
        "cpu_ratio_new_to_ref": round(med["cpu_s"]["new"] / med["cpu_s"]["ref"], 3),
        "targets": {"median.wall_s.new": "<= 240"},
    }


def _cells(reports: Path) -> int:
    return len(json.loads((reports / "run.json").read_text())["cells"])


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) > 1 else "all"
    benchmarks = (
        "install",
        "matrix",
        "all",
        "carry",
        "python-axis",
        "cold",
        "corner-budget",
        "tests",
        "tests-fresh",
    )
    if what not in benchmarks:
        raise SystemExit(f"unknown benchmark {what!r}; accepted: {', '.join(benchmarks)}")
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
        if what == "corner-budget":
            opts = dict(zip(argv[2::2], argv[3::2], strict=False))
            if set(opts) - {"--python", "--rounds"}:
                raise SystemExit(f"unknown option {sorted(opts)}; accepted: --python, --rounds")
            default = ROOT / ".nox" / "matrix-tests-torch2.6-py3.13-cpu" / "bin" / "python"
            python = Path(opts.get("--python", default)).absolute()
            if not python.exists():
                raise SystemExit(f"{python} does not exist: run `nox -s matrix` or pass --python")
            rounds = int(opts.get("--rounds", "2"))
            results["corner_budget"] = bench_corner_budget(Path(tmp), python, rounds)
            print(json.dumps(results["corner_budget"], indent=2))
        if what == "cold":
            opts = dict(zip(argv[2::2], argv[3::2], strict=False))
            if set(opts) - {"--cache", "--envdir"}:
                raise SystemExit(f"unknown option {sorted(opts)}; accepted: --cache, --envdir")
            paths = {k: Path(v).expanduser().absolute() for k, v in opts.items()}
            results["cold"] = bench_cold(Path(tmp), paths.get("--cache"), paths.get("--envdir"))
            print(
                json.dumps({k: v for k, v in results["cold"].items() if k != "per_cell"}, indent=2)
            )
        if what in ("carry", "python-axis", "tests"):
            opts = dict(zip(argv[2::2], argv[3::2], strict=False))
            accepted = {"--ref", "--rounds", "--envdir", "--warmup"}
            accepted |= set() if what == "tests" else {"--keep"}
            if set(opts) - accepted:
                raise SystemExit(
                    f"unknown option {sorted(set(opts) - accepted)}; accepted: {sorted(accepted)}"
                )
            envdir = Path(opts["--envdir"]).absolute() if "--envdir" in opts else None
            rounds, warmup = int(opts.get("--rounds", "1")), opts.get("--warmup", "1") != "0"
        if what == "tests":
            if "--ref" not in opts:
                raise SystemExit("tests: --ref REF is required (the commit to compare with)")
            results["tests"] = bench_tests(Path(tmp), opts["--ref"], rounds, envdir, warmup)
            print(json.dumps(results["tests"], indent=2))
        if what == "tests-fresh":
            opts = dict(zip(argv[2::2], argv[3::2], strict=False))
            if set(opts) - {"--ref", "--rounds"} or "--ref" not in opts:
                raise SystemExit("tests-fresh: --ref REF is required; accepted: --ref, --rounds")
            rounds = int(opts.get("--rounds", "1"))
            results["tests_fresh"] = bench_tests_fresh(Path(tmp), opts["--ref"], rounds)
            print(json.dumps(results["tests_fresh"], indent=2))
        if what in ("carry", "python-axis"):
            keep = Path(opts["--keep"]).absolute() if "--keep" in opts else None
            added = "harness/cells/carry.py" if what == "carry" else "wheels.toml"
            ref = opts.get("--ref") or before_adding(added)
            key = what.replace("-", "_")
            results[key] = bench_carry(Path(tmp), ref, rounds, envdir, warmup, keep)
            if key == "python_axis":
                results[key]["targets"] = {"ratio_new_to_ref": "<= 1.5"}
            print(
                json.dumps(
                    {k: v for k, v in results[key].items() if "durations" not in k}, indent=2
                )
            )
    OUT.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
