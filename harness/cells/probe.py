"""Run inside a cell's venv (by path, standard library only): what is installed, what loads,
then the cell's tests in the same interpreter (so torch is imported once per cell).

    python harness/cells/probe.py --probe EXPR --out FACTS.json [--block DIST --leaks LEAKS.json]
        [--deselect NODEIDS.txt] [-- PYTEST_ARGS...]

    python harness/cells/probe.py --versions DIST,DIST,... [--out FOUND.json]

Writes FACTS.json once torch imports: installed versions, whether TorchAO imports and whether
its C++ extension ops loaded, and whether the backend's torch probe ``EXPR`` held. With pytest
arguments it then runs pytest and exits with its code, or exits ``BACKEND_ABSENT`` if the probe
did not hold. If torch does not import, FACTS.json says why (``import_error``) and it exits
``TORCH_IMPORT_FAILED``: an install error.

``--block torchao`` makes the distribution unreachable for the whole run (the probe does not import
it): importing it or any of its modules, finding its spec and reading its metadata raise
:class:`Blocked` (not an ImportError, so nothing mistakes it for an absent package), and each
attempt is written to LEAKS.json with the test that made it (``""``: outside any test). The matrix
runs the tests it carries across TorchAO versions this way (``harness/cells/carry.py``): a test that
touches TorchAO, even one that swallows the error, is thereby known to depend on it.

With ``COMPAT_MATRIX_INSTALLED_ONLY`` set (a file's path), the run tests an installed compat
(``harness/dist/wheel_cells.py``): compat and its modules import only from the files of the
installed ``compat-matrix`` distribution; importing any other copy (the source tree) raises
ImportError and is recorded, and the file gets what the run imported (:class:`InstalledOnly`).

``--versions`` only reads what is installed (the installed cell checks an existing interpreter's
test requirements with it before anything imports torch): the interpreter, ``PYTHONPATH``, and
each distribution's version from its metadata; torch or TorchAO without metadata (a source tree
on ``PYTHONPATH``) is imported for its ``__version__``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

BLOCKED_ENV = "COMPAT_MATRIX_BLOCKED"  # the distributions --block made unreachable
INSTALLED_ONLY_ENV = "COMPAT_MATRIX_INSTALLED_ONLY"  # where InstalledOnly writes what was imported
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


class Blocked(RuntimeError):
    """Raised on every use of a blocked distribution."""


class Blocker:
    """A finder placed first on ``sys.meta_path`` that refuses ``names`` (top-level modules,
    which are also their distributions' names) and records who asked."""

    def __init__(self, names: list[str]) -> None:
        self.names = frozenset(names)
        self.current = ""  # the node id of the test running now, "" outside a test
        self.leaks: list[dict[str, str]] = []

    def _refuse(self, what: str) -> None:
        self.leaks.append({"test": self.current, "what": what})
        where = f" (by {self.current})" if self.current else ""
        raise Blocked(
            f"{what}{where}: {', '.join(sorted(self.names))} is blocked in this run, which"
            " checks that the tests carried across its versions never touch it"
        )

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.split(".")[0] in self.names:
            self._refuse(f"import {fullname}")

    def find_distributions(self, context: Any = None) -> Any:
        name = getattr(context, "name", None)
        if name and name.lower().replace("-", "_") in self.names:
            self._refuse(f"metadata of {name}")
        return iter(())

    # a pytest plugin: which test is running (setup, call and teardown)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.current = nodeid

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.current = ""

    def install(self) -> None:
        for name in [m for m in sys.modules if m.split(".")[0] in self.names]:
            del sys.modules[name]
        sys.meta_path.insert(0, self)  # type: ignore[arg-type]

    def write(self, path: str) -> None:
        Path(path).write_text(json.dumps({"blocked": sorted(self.names), "leaks": self.leaks}))


class InstalledOnly:
    """A finder placed first on ``sys.meta_path`` for a run against an installed compat: each
    module of the ``compat`` package imports only from the installed ``compat-matrix``
    distribution's ``compat/`` folder (symlinks resolved); a spec found anywhere else (the
    source tree on ``sys.path``) is refused with ImportError and recorded. With the distribution
    absent, every import of compat is refused."""

    DISTRIBUTION, PACKAGE = "compat-matrix", "compat"

    def __init__(self) -> None:
        self.home: str | None = None
        self.version: str | None = None
        try:
            dist = metadata.distribution(self.DISTRIBUTION)
        except metadata.PackageNotFoundError:
            pass
        else:
            self.home = os.path.realpath(str(dist.locate_file(self.PACKAGE)))
            self.version = dist.version
        self.refused: list[str] = []

    def installed(self, file: str) -> bool:
        return self.home is not None and os.path.realpath(file).startswith(self.home + os.sep)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.split(".")[0] != self.PACKAGE:
            return
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = spec.origin if spec is not None else None
        if origin and not self.installed(origin):
            self.refused.append(origin)
            raise ImportError(
                f"{fullname} from {origin}: this run tests the installed {self.DISTRIBUTION}"
                f" ({self.home or 'not installed'}), and imports no other copy of it"
            )

    def install(self) -> None:
        sys.meta_path.insert(0, self)  # type: ignore[arg-type]

    def write(self, path: str) -> None:
        module = sys.modules.get(self.PACKAGE)
        file = getattr(module, "__file__", None)
        found = {
            "distribution": self.DISTRIBUTION,
            "version": self.version,
            "home": self.home,
            "imported": file,
            "imported_version": getattr(module, "__version__", None),
            "from_distribution": bool(file) and self.installed(str(file)),
            "refused": self.refused,
        }
        Path(path).write_text(json.dumps(found, indent=2) + "\n")


class Deselect:
    """A pytest plugin that leaves out the tests named in a file (one node id a line): the tests
    whose verdicts this cell carries from another (``harness/cells/carry.py``). Every other
    collected test runs."""

    def __init__(self, path: str) -> None:
        self.nodeids = frozenset(Path(path).read_text().splitlines())

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        gone = [item for item in items if item.nodeid in self.nodeids]
        if gone:
            items[:] = [item for item in items if item.nodeid not in self.nodeids]
            config.hook.pytest_deselected(items=gone)


def facts(expr: str, blocked: frozenset[str] = frozenset()) -> dict[str, Any]:
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
        if "torchao" in blocked:
            raise Blocked("torchao is blocked in this run")
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
    blocker = Blocker([n for n in options.get("--block", "").split(",") if n])
    found = facts(options.get("--probe", "True"), blocker.names)
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

    plugins: list[Any] = [Deselect(options["--deselect"])] if "--deselect" in options else []
    installed_only = os.environ.get(INSTALLED_ONLY_ENV)
    guard = InstalledOnly() if installed_only else None
    if guard is not None:
        guard.install()
    if blocker.names:
        blocker.install()
        os.environ[BLOCKED_ENV] = ",".join(sorted(blocker.names))  # the suite's own bookkeeping
        plugins.append(blocker)
    try:
        return int(pytest.main(rest, plugins=plugins))
    finally:
        if blocker.names:
            blocker.write(options.get("--leaks", "leaks.json"))
        if guard is not None and installed_only:
            guard.write(installed_only)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
