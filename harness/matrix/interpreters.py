"""Finding the interpreter of each Python on the axis: found, never assumed.

Where a Python of the selection comes from, first hit wins:

1. ``COMPAT_MATRIX_PYTHONS``: interpreter paths separated by ``os.pathsep`` (each one asked for
   its version, so the order and the names do not matter);
2. pyenv's versions folder (``$PYENV_ROOT``, else ``~/.pyenv``): the newest ``X.Y.*`` installed
   there, which a pyenv shim on PATH does not expose unless pyenv is told to;
3. uv's discovery (``uv python find --no-python-downloads``): PATH, uv's managed Pythons, and on
   GitHub what ``actions/setup-python`` put on PATH.

Each candidate is run once to check it is the Python it claims. A Python found nowhere gives
its cells a skip with :func:`missing_reason`, never a failure and never a silent drop.

:func:`expose` puts a found interpreter under its ``pythonX.Y`` name into a folder at the front
of PATH, so that nox and uv (which stop at a broken pyenv shim) find it too. Standard library
only.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.matrix.procs import answer

ENV = "COMPAT_MATRIX_PYTHONS"
_VERSION_DIR = re.compile(r"^(3\.[0-9]+)\.([0-9]+)$")
_ASK = "import sys; print('%d.%d' % sys.version_info[:2])"


def version_of(interpreter: Path) -> str | None:
    """``X.Y`` of the interpreter at ``interpreter``, or None if it does not run."""
    return answer([str(interpreter), "-c", _ASK], timeout=30)


def _pyenv_candidates(python: str, environ: Mapping[str, str]) -> list[Path]:
    root = Path(environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = []
    for entry in (root / "versions").glob(f"{python}.*"):
        match = _VERSION_DIR.match(entry.name)
        if match and match.group(1) == python:
            found.append((int(match.group(2)), entry / "bin" / f"python{python}"))
    return [path for _, path in sorted(found, reverse=True)]


def _uv_candidate(python: str, uv: str | None) -> list[Path]:
    if not uv:
        return []
    found = answer([uv, "python", "find", "--no-python-downloads", python], timeout=60)
    return [Path(found)] if found else []


def find(
    pythons: Iterable[str], *, uv: str | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Path | None]:
    """Each Python's interpreter, or None where none was found."""
    env = os.environ if environ is None else environ
    named: dict[str, Path] = {}
    for text in (env.get(ENV) or "").split(os.pathsep):
        if text.strip():
            version = version_of(Path(text.strip()))
            if version is not None:
                named.setdefault(version, Path(text.strip()))
    out: dict[str, Path | None] = {}
    for python in pythons:
        hit = named.get(python)
        if hit is None:
            for candidate in _pyenv_candidates(python, env):
                if version_of(candidate) == python:
                    hit = candidate
                    break
        if hit is None:
            hit = next((c for c in _uv_candidate(python, uv) if version_of(c) == python), None)
        out[python] = hit
    return out


def missing_reason(python: str) -> str:
    """Why a cell of ``python`` was skipped, and how to provide it."""
    return (
        f"no Python {python} interpreter was found (looked in ${ENV}, pyenv's versions and uv's "
        f"discovery): install it (`uv python install {python}`, `pyenv install {python}`, or "
        f"actions/setup-python on GitHub) or name its interpreter in {ENV}"
    )


def expose(found: Mapping[str, Path | None], folder: Path) -> Path:
    """Link each found interpreter as ``folder/pythonX.Y`` and put ``folder`` first on PATH
    (this process and its children), so that nox's and uv's lookup by version finds it."""
    folder.mkdir(parents=True, exist_ok=True)
    for python, interpreter in found.items():
        if interpreter is None:
            continue
        link = folder / f"python{python}"
        if link.is_symlink() or link.exists():
            if link.resolve() == interpreter.resolve():
                continue
            link.unlink()
        link.symlink_to(interpreter)
    entries = os.environ.get("PATH", "").split(os.pathsep)
    if str(folder) not in entries:
        os.environ["PATH"] = os.pathsep.join([str(folder), *entries])
    return folder


def uv_bin() -> str:
    """The uv executable nox would use: $UV, the `uv` package next to nox, or PATH."""
    if os.environ.get("UV"):
        return os.environ["UV"]
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise RuntimeError(
                "uv is not installed: pip install -r requirements/tools.txt"
            ) from None
        return found
