"""This process's resident memory as Linux reports it (proc(5)): the benchmarks' and the loading
test's one reader. Elsewhere every reading is None and a peak cannot be reset."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc/self")


def status_kib(field: str) -> int | None:
    """A ``/proc/self/status`` field in KiB (``VmRSS``: resident now; ``VmHWM``: the peak since
    start or the last :func:`reset_peak`), or None where there is no such file or field."""
    try:
        for line in (PROC / "status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak() -> bool:
    """Restart ``VmHWM`` (and ``ru_maxrss``) from the memory resident now: whether it could."""
    try:
        (PROC / "clear_refs").write_text("5")
    except OSError:
        return False
    return True
