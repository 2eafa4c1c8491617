"""Run inside a cell's venv (by path, standard library only): what is installed, what loads,
then the cell's tests in the same interpreter (so torch is imported once per cell).

    python harness/probe.py --probe EXPR --out FACTS.json [-- PYTEST_ARGS...]

Writes FACTS.json once torch imports: installed versions, whether TorchAO imports and whether
its C++ extension ops loaded, and whether the backend's torch probe ``EXPR`` held. With pytest
arguments it then runs pytest and exits with its code, or exits ``BACKEND_ABSENT`` if the probe
did not hold. If torch does not import, FACTS.json says why (``import_error``) and it exits
``TORCH_IMPORT_FAILED``: an install error.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

BACKEND_ABSENT = 77  # exit code: the backend's torch probe did not hold
TORCH_IMPORT_FAILED = 78  # exit code: torch does not import (FACTS.json has the error)
PACKAGES = (
    "torch",
    "torchao",
    "numpy",
    "safetensors",
    "hypothesis",
    "pytest",
    "packaging",
    "setuptools",
    "accelerate",  # the optional peer group: the history tells its version changes apart
)


def facts(expr: str) -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version(), "installed": {}}
    for name in PACKAGES:
        try:
            out["installed"][name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out["installed"][name] = None
    start = time.perf_counter()
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
    except Exception as exc:  # an install error: the caller exits TORCH_IMPORT_FAILED
        out["import_error"] = f"{type(exc).__name__}: {exc}"
        return out

    out["torch_cuda_build"] = torch.version.cuda
    try:
        import torchao  # noqa: F401

        out["torchao_import"] = None
        # TorchAO only logs at debug level when its extension fails to load. quant_llm_linear's
        # schema may also be defined from Python (torchao.ops), so ask whether a compiled
        # kernel (CUDA or CPU dispatch key) is registered for it: only the extension does that.
        op = "torchao::quant_llm_linear"
        has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
        out["torchao_cpp"] = hasattr(torch.ops.torchao, "quant_llm_linear") and any(
            has_kernel(op, key) for key in ("CUDA", "CPU")
        )
    except Exception as exc:  # record, do not crash: the tests decide what that means
        out["torchao_import"] = f"{type(exc).__name__}: {exc}"
        out["torchao_cpp"] = False
    out["import_s"] = round(time.perf_counter() - start, 2)
    try:
        out["backend_ok"] = bool(eval(expr, {"torch": torch}))
        out["backend_error"] = None
    except Exception as exc:
        out["backend_ok"] = False
        out["backend_error"] = f"{type(exc).__name__}: {exc}"
    return out


def main(argv: list[str]) -> int:
    rest: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1 :]
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    found = facts(options.get("--probe", "True"))
    text = json.dumps(found)
    if "--out" in options:
        Path(options["--out"]).write_text(text + "\n")
    else:
        print(text)
    if "import_error" in found:
        print(f"[probe] torch does not import: {found['import_error']}", file=sys.stderr)
        return TORCH_IMPORT_FAILED
    if rest is None:
        return 0
    if not found["backend_ok"]:
        return BACKEND_ABSENT
    # like `python -m pytest`: the working directory, not this script's folder, leads sys.path
    sys.path[0] = os.getcwd()
    import pytest

    return int(pytest.main(rest))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
