"""Gather the wheels the GPU run carries (bench/gpu_check.sh), and check what travels fits.

The GPU machine (an NVIDIA H200; its own python3 3.12 with torch 2.11.0+cu130, safetensors
0.8.0, numpy 2.5.2, pytest, hypothesis, Jinja2; no TorchAO; no package index) gets the wheels
of what the installed cell needs and it lacks or may hold at another version: the TorchAO that
matrix.toml pairs with its torch, and requirements/test.txt except what it holds at a version
that file accepts (:data:`GPU_HAS`). Their dependencies come too (pip resolves them for the
target), so that one folder installs with ``--no-index --no-deps``.

    python bench/gpu_wheels.py [--out .wheels] [--python-version 3.12] [--torch 2.11]
                               [--limit-mib 64]

Writes the wheels and ``carry.json`` (each wheel's size and sha256, the requirements, the
total with the tree that travels beside it) into ``--out``; exits 1 if the tree plus the wheels
exceed ``--limit-mib`` (the device tool's limit on what travels) or a distribution came twice.
Needs pip (``python -m pip download``) and an index; run it where there is one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packaging.utils import canonicalize_name, parse_wheel_filename  # noqa: E402

from harness.cells import installed  # noqa: E402
from harness.matrix import paths, spec  # noqa: E402

# what the GPU machine's python3 already holds at versions requirements/test.txt accepts (its
# pip list); checked against the file below, so a change there that they no longer meet means
# they are carried too
GPU_HAS = {"safetensors": "0.8.0", "numpy": "2.5.2"}
PLATFORMS = (  # manylinux tags a cp312 x86-64 Linux takes; pip matches each exactly
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)
MIB = 1024 * 1024


def wanted(matrix: spec.Matrix, torch_version: str, has: dict[str, str]) -> list[str]:
    """The requirements to carry: the paired TorchAO, then the test requirements not met by
    what the machine has."""
    torch = installed.axis("torch", torch_version, matrix.torch)
    out = [installed.torchao_hint(matrix, torch)]
    for req in installed.requirements_of_tests(matrix):
        have = has.get(canonicalize_name(req.name))
        if have is None or not req.specifier.contains(have, prereleases=True):
            out.append(str(req))
    return out


def travelling_bytes(root: Path) -> int:
    """The bytes of what the device tool sends: tracked and untracked, not ignored, files."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    )
    names = [n for n in done.stdout.decode().split("\0") if n]
    return sum((root / n).stat().st_size for n in names if (root / n).is_file())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/gpu_wheels.py")
    parser.add_argument("--out", type=Path, default=paths.WHEELS)
    parser.add_argument("--python-version", default="3.12")
    parser.add_argument("--torch", default="2.11.0", help="the torch the GPU machine holds")
    parser.add_argument("--limit-mib", type=float, default=64.0)
    args = parser.parse_args(argv)
    matrix = spec.load(paths.matrix_path())
    reqs = wanted(matrix, args.torch, {canonicalize_name(k): v for k, v in GPU_HAS.items()})
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    py = args.python_version
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:"]
    cmd += ["--python-version", py, "--implementation", "cp", "--abi", f"cp{py.replace('.', '')}"]
    cmd += [*platforms, "-d", str(args.out), *reqs]
    print("[gpu-wheels]", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    skip = {canonicalize_name(name) for name in GPU_HAS}
    wheels: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    problems = []
    for path in sorted(args.out.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(path.name)
        if name in skip:  # pulled in as a dependency; the machine has it
            path.unlink()
            continue
        if name in seen:
            problems.append(f"{name} came twice: {seen[name]} and {version}")
        seen[name] = str(version)
        wheels.append({"file": path.name, "bytes": path.stat().st_size, "sha256": sha256(path)})
    wheel_bytes = sum(w["bytes"] for w in wheels)
    tree = travelling_bytes(paths.ROOT)
    total = wheel_bytes + tree
    if total > args.limit_mib * MIB:
        problems.append(f"tree + wheels = {total / MIB:.1f} MiB > {args.limit_mib} MiB")
    doc = {
        "python_version": py,
        "torch": args.torch,
        "requirements": reqs,
        "gpu_has": GPU_HAS,
        "wheels": wheels,
        "wheel_bytes": wheel_bytes,
        "tree_bytes": tree,
        "total_mib": round(total / MIB, 2),
        "limit_mib": args.limit_mib,
    }
    (args.out / "carry.json").write_text(json.dumps(doc, indent=2) + "\n")
    for w in wheels:
        print(f"[gpu-wheels] {w['bytes'] / MIB:7.2f} MiB  {w['file']}")
    print(
        f"[gpu-wheels] {len(wheels)} wheels, {wheel_bytes / MIB:.2f} MiB; with the tree"
        f" ({tree / MIB:.2f} MiB) {total / MIB:.2f} MiB of {args.limit_mib} MiB → {args.out}"
    )
    for problem in problems:
        print(f"[gpu-wheels] {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
