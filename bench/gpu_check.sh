#!/usr/bin/env bash
# The GPU run (issue 16): the installed cell, once, on a machine with an NVIDIA GPU and its own
# python3 (torch there, no TorchAO, no package index). From the repository root:
#
#     bash bench/gpu_check.sh
#
# with the wheels of `nox -s gpu-wheels` in .wheels/ (carried beside the tree: `carry: [".wheels"]`).
# It installs them into a folder put first on PYTHONPATH (python3's own environment is left as it
# is), then runs the installed cell under --strict (a test skipped for an absent backend fails it):
#   1. on cuda;
#   2. on cpu with the GPU visible (matrix.toml's cpu env, which hides accelerators, not applied);
#   3. on cpu as matrix.toml defines it (the GPU hidden), as on every CPU runner;
# writes reports/gpu/ (cells/, run.json, gpu.json: GPU, driver, versions, each cell's outcome)
# and renders its report there (matrix.md holds the cuda grid). Where $OUT is set (the device
# tool) it also leaves gpu.json, matrix.md, the log and reports-gpu.tar.gz there.
# Without a GPU it says why and exits 0 before writing anything.
#
# GPU_CHECK_PYTHON (python3), GPU_CHECK_WHEELS (.wheels), GPU_CHECK_REPORTS (reports/gpu),
# GPU_CHECK_SITE (a fresh temporary folder), GPU_CHECK_CELL_TIMEOUT_S (120) override the
# defaults. GPU_CHECK_REHEARSAL=1 runs steps 2 and 3 without a GPU (to try the wheels and the
# interpreter on a CPU machine); it refuses to write into reports/gpu.
set -u
cd "${0%/*}/.." || exit 1

PY=${GPU_CHECK_PYTHON:-python3}
WHEELS=${GPU_CHECK_WHEELS:-.wheels}
DEST=${GPU_CHECK_REPORTS:-reports/gpu}
CELL_TIMEOUT_S=${GPU_CHECK_CELL_TIMEOUT_S:-120}
REHEARSAL=${GPU_CHECK_REHEARSAL:-0}

if [ "$REHEARSAL" = 1 ]; then
  case "$DEST" in
    reports/gpu | reports/gpu/ | ./reports/gpu | */reports/gpu)
      echo "gpu_check: a rehearsal has no GPU: set GPU_CHECK_REPORTS to a folder other than $DEST" >&2
      exit 2
      ;;
  esac
  echo "gpu_check: REHEARSAL without a GPU: the cpu cells only, into $DEST"
else
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu_check: skipped: no nvidia-smi on this machine, so no NVIDIA GPU to check; nothing was run or written"
    exit 0
  fi
  nvidia-smi -L >/dev/null 2>&1
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "gpu_check: skipped: \`nvidia-smi -L\` exited $rc (no usable NVIDIA GPU); nothing was run or written"
    exit 0
  fi
fi

if [ -n "${OUT:-}" ]; then exec > >(tee "$OUT/gpu_check.log") 2>&1; fi

shopt -s nullglob
wheels=("$WHEELS"/*.whl)
if [ "${#wheels[@]}" = 0 ]; then
  echo "gpu_check: no wheels in $WHEELS: run \`nox -s gpu-wheels\` where an index is reachable, and carry $WHEELS" >&2
  exit 1
fi
SITE=${GPU_CHECK_SITE:-$(mktemp -d)}
echo "gpu_check: installing ${#wheels[@]} wheels from $WHEELS into $SITE (PYTHONPATH; $PY's environment is left as it is)"
"$PY" -m pip install --quiet --no-index --no-deps --no-cache-dir --upgrade --target "$SITE" "${wheels[@]}" || {
  echo "gpu_check: installing the wheels failed" >&2
  exit 1
}
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export HYPOTHESIS_PROFILE=ci # deterministic examples: the verdict does not depend on chance
export PYTHONUNBUFFERED=1

rm -rf "$DEST"
mkdir -p "$DEST"
status=0
cell() {
  echo "gpu_check: the installed cell: $*"
  "$PY" -m harness.cells.installed --python "$PY" --reports "$DEST" --strict --timeout-s "$CELL_TIMEOUT_S" "$@" || status=1
}
if [ "$REHEARSAL" != 1 ]; then cell --backend cuda; fi
cell --backend cpu --gpu-visible
cell --backend cpu

"$PY" - "$DEST" "$REHEARSAL" <<'PYTHON' || status=1
"""gpu.json: the GPU, its driver, the versions, and how each cell ended."""
import json
import subprocess
import sys
from pathlib import Path

dest, rehearsal = Path(sys.argv[1]), sys.argv[2] == "1"


def ask(cmd):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"failed: {type(exc).__name__}"
    return done.stdout.strip() if done.returncode == 0 else f"exited {done.returncode}"


query = "name,driver_version,memory.total,compute_cap"
gpu = {
    "rehearsal": rehearsal,
    "nvidia_smi_L": ask(["nvidia-smi", "-L"]),
    "nvidia_smi": ask(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"]),
    "cuda_driver": ask(["sh", "-c", "nvidia-smi | grep -o 'CUDA Version: [0-9.]*'"]),
    "torch": ask([sys.executable, "-c", "import torch; print(torch.__version__, torch.version.cuda,"
                  " torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no cuda')"]),
    "cells": {},
}
for path in sorted((dest / "cells").glob("*/cell.json")):
    c = json.loads(path.read_text())
    gpu["cells"][c["id"]] = {
        "status": c["status"],
        "reason": c["reason"],
        "counts": c["counts"],
        "duration_s": c["duration_s"],
        "installed": c["installed"],
        "torchao_cpp": c["torchao_cpp"],
        "skips": c["skips"],
        "environment": c["environment"],
    }
(dest / "gpu.json").write_text(json.dumps(gpu, indent=2, sort_keys=True) + "\n")
for cid, c in gpu["cells"].items():
    print(f"gpu_check: {cid}: {c['status']} {c['counts']} {c['reason']}")
print(f"gpu_check: {gpu['nvidia_smi'] or gpu['nvidia_smi_L']}; torch {gpu['torch']}")
PYTHON

"$PY" -m harness.report.pages --reports "$DEST" >/dev/null || status=1

if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/reports-gpu.tar.gz" "$DEST" && cp "$DEST/gpu.json" "$DEST/matrix.md" "$OUT/" || status=1
fi
if [ "$status" = 0 ]; then
  echo "gpu_check: every cell passed under --strict → $DEST"
else
  echo "gpu_check: FAILED (see above) → $DEST"
fi
exit "$status"
