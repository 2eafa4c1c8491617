"""``nox`` run as a user runs it, from the repository root, for the harness suite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[3]


def nox(
    *args: str, timeout: int = 300, reports: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOX_")}
    if reports is not None:
        env["COMPAT_MATRIX_REPORTS"] = str(reports)
    return run_module("nox", *args, timeout=timeout, env=env)
