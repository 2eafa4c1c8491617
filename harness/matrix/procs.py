"""Running a cell's commands: a deadline, a log, a whole process group, and stopping on a signal.

Every command of a cell runs in its own process group (so a test's own subprocesses go with it)
and is polled, not waited on blindly: at its deadline, or as soon as the run is asked to stop,
the whole group gets SIGTERM, then SIGKILL. :class:`Stop` turns SIGINT / SIGTERM into such a
request, so a stopped run still records every cell it touched. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from harness.matrix.errors import Refused

POLL_S = 0.2
TERM_GRACE_S = 5.0  # SIGTERM to SIGKILL at a deadline
STOP_GRACE_S = 2.0  # the same when the run is being stopped: be quick


class Echo(Protocol):
    """Where a cell's output is echoed as it comes (a stream, or a line-prefixing wrapper)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class Held:
    """An :class:`Echo` that holds what is written until :meth:`release`, then writes it and
    everything after straight through: the output of work run beside another's, printed after
    it instead of amid it. Safe to write from several threads."""

    def __init__(self, out: Echo) -> None:
        self._out = out
        self._held: list[str] | None = []
        self._lock = threading.Lock()

    def write(self, text: str, /) -> int:
        with self._lock:
            if self._held is None:
                self._out.write(text)
            else:
                self._held.append(text)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._held is None:
                self._out.flush()

    def release(self) -> None:
        with self._lock:
            if self._held is not None:
                self._out.write("".join(self._held))
                self._held = None
            self._out.flush()


class Stop:
    """Whether the run was asked to stop, and by which signal. Shared by every cell of a run."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal: str | None = None

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self, name: str) -> None:
        self.signal = self.signal or name
        self._event.set()

    def wait(self, seconds: float) -> bool:
        return self._event.wait(seconds)

    @contextlib.contextmanager
    def on_signals(self) -> Iterator[Stop]:
        """SIGINT and SIGTERM request a stop while inside (main thread only; elsewhere a no-op,
        the main thread's handler already reaches this object)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            self.request(signal.Signals(signum).name)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


@dataclass
class Ran:
    returncode: int | None  # None: killed (at the deadline, or because the run stopped)
    output: str
    seconds: float
    timed_out: bool = False
    interrupted: bool = False


def run_logged(
    cmd: Sequence[str],
    log: Path,
    *,
    timeout_s: float,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    echo: Echo | None = sys.stdout,
    stop: Stop | None = None,
) -> Ran:
    """Run ``cmd`` in its own process group, teeing output to ``log`` (appended) and ``echo``.

    At the deadline, or once ``stop`` is requested, the whole group is killed (SIGTERM, then
    SIGKILL) and the result says which; ``returncode`` is then None.
    """
    start = time.monotonic()
    deadline = start + max(timeout_s, 0.001)
    chunks: list[str] = []
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
            errors="replace",
        )

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                chunks.append(line)
                fh.write(line)
                if echo is not None:
                    echo.write(line)
                    echo.flush()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        returncode: int | None = None
        timed_out = interrupted = False
        while returncode is None:
            try:
                returncode = proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                if stop is not None and stop.requested:
                    interrupted = True
                    kill_group(proc, STOP_GRACE_S)
                    break
                if time.monotonic() >= deadline:
                    timed_out = True
                    kill_group(proc, TERM_GRACE_S)
                    break
        else:  # exited by itself: what it left running in its group goes too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        reader.join(timeout=10)
        if timed_out:
            fh.write(f"\n[harness] killed after {timeout_s:.0f} s\n")
        if interrupted:
            fh.write(f"\n[harness] stopped ({stop.signal if stop else '?'})\n")
    if timed_out or interrupted:
        returncode = None
    return Ran(returncode, "".join(chunks), time.monotonic() - start, timed_out, interrupted)


def kill_group(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM to the process group, SIGKILL after ``grace_s``; returns once the leader is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; what it spawned may linger in the group: make sure it goes too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def signal_name(returncode: int) -> str:
    """``SIGSEGV`` for -11; the number for a signal Python does not name."""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def answer(cmd: Sequence[str], *, timeout: float, cwd: Path | None = None) -> str | None:
    """A short question to a program: ``cmd``'s stdout stripped, or None if it cannot run, runs
    past ``timeout`` seconds or exits non-zero (stdin closed, stderr discarded)."""
    try:
        done = subprocess.run(
            list(cmd),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git(root: Path, *args: str) -> str:
    """``git ARGS`` in ``root``: its output; :class:`Refused` naming the command when it fails."""
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Refused(
            f"git {' '.join(args)} failed in {root}: {done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout
