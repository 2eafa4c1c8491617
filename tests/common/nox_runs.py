"""``nox`` run as a user runs it, from the repository root, for the harness suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def nox(
    *args: str, timeout: int = 300, reports: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOX_")}
    if reports is not None:
        env["COMPAT_MATRIX_REPORTS"] = str(reports)
    return subprocess.run(
        [sys.executable, "-m", "nox", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
