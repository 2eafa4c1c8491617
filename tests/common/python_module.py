"""``python -m MODULE ARGS`` in a subprocess of this interpreter, the one way the suites do it.

What :func:`run_module` guarantees:

- the interpreter is this one (``sys.executable``), never whatever ``python`` is on ``PATH``,
  with any interpreter options (``flags``: ``-S``, ``-E``) placed before ``-m``;
- the working folder is the repository root unless ``cwd`` says otherwise (``cwd=None``: the
  caller's own working folder, as ``subprocess.run`` has it);
- the environment is ``env`` exactly where given (nothing merged in), else the caller's;
- stdout and stderr are captured, as text, unless ``capture`` / ``text`` say otherwise;
- ``check=True`` raises :class:`subprocess.CalledProcessError` on a non-zero exit, ``timeout``
  raises :class:`subprocess.TimeoutExpired`: nothing else is added to ``subprocess.run``.

Every argument is passed through ``str()`` (paths included). tests/harness/test_python_module.py
holds these and checks that no other file under tests/ spells ``sys.executable, "-m"`` by hand.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_module(
    module: str,
    *args: str | os.PathLike[str],
    flags: Sequence[str] = (),
    cwd: Path | str | None = ROOT,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    check: bool = False,
    text: bool = True,
    capture: bool = True,
) -> subprocess.CompletedProcess[Any]:
    """``sys.executable *flags -m module *args`` run to its end; see the module's docstring."""
    argv = [sys.executable, *flags, "-m", module, *map(str, args)]
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=check,
        text=text,
        capture_output=capture,
    )
