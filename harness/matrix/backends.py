"""Whether this runner has a backend, and the words an absent backend is recorded with.

A backend is absent when its platform list excludes this runner, its host probe fails (both
decided before anything is installed), or its torch probe is false inside the cell's venv.
The gate excuses a skip only for an absent backend, recognised by :func:`is_absence`, so the
reasons written here and the test suite's own "no usable <backend>" skips are the one phrasing.
Standard library only.
"""

from __future__ import annotations

import re
import subprocess
import sys

from harness.matrix.spec import Backend

HOST_PROBE_TIMEOUT_S = 30


def host_lacks(backend: Backend, platform: str = sys.platform) -> str | None:
    """Why this runner cannot have ``backend``, or None if it may (the torch probe decides)."""
    if backend.platforms and platform not in backend.platforms:
        return f"{backend.name} needs platform {'/'.join(backend.platforms)}, runner is {platform}"
    if backend.host_probe:
        shown = " ".join(backend.host_probe)
        try:
            done = subprocess.run(
                list(backend.host_probe),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=HOST_PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"no {backend.name} on this runner: `{shown}` failed ({type(exc).__name__})"
        if done.returncode != 0:
            return f"no {backend.name} on this runner: `{shown}` exited {done.returncode}"
    return None


def torch_lacks(backend: Backend, error: str | None) -> str:
    """The reason recorded when the torch probe does not hold inside the venv."""
    return f"no usable {backend.name} in torch: {error or f'`{backend.torch_probe}` is false'}"


_ABSENT = re.compile(
    r"^(no (usable )?[a-z][a-z0-9_]* (in torch|on this runner|device)"
    r"|[a-z][a-z0-9_]* needs platform |needs an? [A-Za-z]+ device)"
)


def is_absence(reason: str) -> bool:
    """Whether a skip reason says a backend is absent (the harness's words above, or a test's
    ``no usable cuda device on this runner`` / ``needs a CUDA device``)."""
    return bool(_ABSENT.match(reason.strip()))
