"""Run inside a cell's venv (by path, standard library only): what is installed, what loads,
then the cell's tests in the same interpreter (so torch is imported once per cell).

    python harness/probe.py --probe EXPR --out FACTS.json [-- PYTEST_ARGS...]

    python harness/probe.py --versions DIST,DIST,... [--out FOUND.json]

Writes FACTS.json once torch imports: installed versions, whether TorchAO imports and whether
its C++ extension ops loaded, and whether the backend's torch probe ``EXPR`` held. With pytest
arguments it then runs pytest and exits with its code, or exits ``BACKEND_ABSENT`` if the probe
did not hold. If torch does not import, FACTS.json says why (``import_error``) and it exits
``TORCH_IMPORT_FAILED``: an install error.

``--versions`` only reads what is installed (the installed cell checks an existing interpreter's
test requirements with it before anything imports torch): the interpreter, ``PYTHONPATH``, and
each distribution's version from its metadata; torch or TorchAO without metadata (a source tree
on ``PYTHONPATH``) is imported for its ``__version__``.
"""

from __future__ import annotations

import importlib
import importlib.util
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
    # the downstream tier's libraries (matrix.toml [[downstream]]): absent elsewhere
    "torchvision",
    "transformers",
    "diffusers",
    "open_clip_torch",
    "peft",
    "timm",
    "huggingface_hub",
    "tokenizers",
)


IMPORTED_FOR_VERSION = ("torch", "torchao")  # the axes: a source tree may lack metadata


def installed_versions(names: list[str]) -> dict[str, str | None]:
    """Each distribution's installed version (None: not installed), from its metadata."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def versions(names: list[str]) -> dict[str, Any]:
    """What an interpreter holds, without importing torch unless it has no metadata."""
    found = installed_versions(names)
    sources = {name: "metadata" for name, version in found.items() if version is not None}
    for name in IMPORTED_FOR_VERSION:
        if name in found and found[name] is None and importlib.util.find_spec(name) is not None:
            try:
                version = getattr(importlib.import_module(name), "__version__", None)
            except Exception as exc:  # it is there and broken: the cell's probe will say so
                version, sources[name] = None, f"import failed: {type(exc).__name__}: {exc}"
            if isinstance(version, str):
                found[name], sources[name] = version, "module __version__"
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "installed": found,
        "sources": sources,
    }


def facts(expr: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "installed": installed_versions(list(PACKAGES)),
    }
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


def _emit(found: dict[str, Any], out: str | None) -> None:
    text = json.dumps(found)
    if out:
        Path(out).write_text(text + "\n")
    else:
        print(text)


def main(argv: list[str]) -> int:
    rest: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1 :]
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    if "--versions" in options:
        _emit(versions([n for n in options["--versions"].split(",") if n]), options.get("--out"))
        return 0
    found = facts(options.get("--probe", "True"))
    _emit(found, options.get("--out"))
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
