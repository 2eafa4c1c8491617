"""Run inside a cell's venv (by path, standard library only): what is installed, what loads.

Usage: python harness/probe.py '<torch probe expression>'
Prints one JSON object on stdout: installed versions, whether TorchAO imports and whether its
C++ extension ops loaded, and whether the backend's torch probe held (with the error if not).
"""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata
from typing import Any

PACKAGES = (
    "torch",
    "torchao",
    "numpy",
    "safetensors",
    "hypothesis",
    "pytest",
    "packaging",
    "setuptools",
)


def main(argv: list[str]) -> int:
    out: dict[str, Any] = {"python": platform.python_version(), "installed": {}}
    for name in PACKAGES:
        try:
            out["installed"][name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out["installed"][name] = None
    import torch  # type: ignore[import-not-found,unused-ignore]  # absent on the host: fine

    out["torch_cuda_build"] = torch.version.cuda
    try:
        import torchao  # noqa: F401

        out["torchao_import"] = None
        # quant_llm_linear is a C++ op every TorchAO release of the matrix registers when its
        # extension loads; TorchAO only logs at debug level when the extension fails to load.
        out["torchao_cpp"] = hasattr(torch.ops.torchao, "quant_llm_linear")
    except Exception as exc:  # record, do not crash: the tests decide what that means
        out["torchao_import"] = f"{type(exc).__name__}: {exc}"
        out["torchao_cpp"] = False
    expr = argv[1] if len(argv) > 1 else "True"
    try:
        out["backend_ok"] = bool(eval(expr, {"torch": torch}))
        out["backend_error"] = None
    except Exception as exc:
        out["backend_ok"] = False
        out["backend_error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
