"""A fresh process for the checks of global, irreversible torch state (a PrivateUse1 rename, the
default device, whether anything initialised CUDA), without a second torch import.

:func:`start` runs when the test session starts, before collection (which probes the backends and
may initialise CUDA) and before any test: on Linux it forks the test process there, once torch
is imported and nothing has used an accelerator, and the fork waits for one script. A new
interpreter would import torch again: ~1 s of every cell's suite, the Python corners included.
Where forking a process that loaded torch is not safe (macOS: the Objective-C runtime and Metal
must not be used in a fork; no fork on Windows) the script runs in a new interpreter instead.

Either way :meth:`Fresh.run` gives the script's exit status and what it wrote to ``sys.stdout``
and ``sys.stderr``; a fresh process runs one script.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

# forking after torch loaded is safe where the process has no runtime that refuses it (above)
FORKS = sys.platform.startswith("linux") and hasattr(os, "fork")


class Fresh:
    """One script's worth of a process that has imported torch and done nothing else."""

    def __init__(self, cwd: Path, pid: int | None = None, request: int = -1, reply: int = -1):
        self.cwd, self.pid, self._request, self._reply = cwd, pid, request, reply
        self.used = False
        self.status: int | None = None  # the fork's wait status, once reaped

    def run(self, script: str, timeout_s: float = 120) -> tuple[int, str, str]:
        """Run ``script`` as ``__main__``: its exit status, stdout and stderr."""
        if self.used:
            raise RuntimeError("a fresh process runs one script; this one already ran its own")
        self.used = True
        if self.pid is None:
            done = subprocess.run(
                [sys.executable, "-c", script],
                cwd=self.cwd,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
            return done.returncode, done.stdout, done.stderr
        _write_all(self._request, script.encode())
        os.close(self._request)
        reply = _read_all(self._reply, timeout_s)
        self.close(kill=reply is None)
        if reply is None:
            return -9, "", f"the forked process gave no reply within {timeout_s} s (killed)"
        if not reply:  # it died before answering (a crash in torch, a signal)
            return -1, "", "the forked process ended without a reply"
        answer = json.loads(reply)
        return int(answer["rc"]), str(answer["out"]), str(answer["err"])

    def close(self, kill: bool = False) -> None:
        """Let the fork go and reap it: unused, it exits once its request pipe is closed;
        ``kill``: it is stopped first (it did not answer in time)."""
        if self.pid is None:
            return
        for fd in (self._request, self._reply):
            with contextlib.suppress(OSError):
                os.close(fd)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            self.status = os.waitpid(self.pid, 0)[1]
        self.pid = None


def _read_all(fd: int, timeout_s: float | None) -> bytes | None:
    """Everything ``fd`` yields until end of file, or None past ``timeout_s`` (None: no limit)."""
    chunks: list[bytes] = []
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (a pipe takes a write in parts past its buffer)."""
    while data:
        data = data[os.write(fd, data) :]


def start(cwd: Path) -> Fresh:
    """The session's fresh process (see the module's docstring); imports torch first."""
    if not FORKS:
        return Fresh(cwd)
    import numpy  # noqa: F401  (what the scripts import: loaded once, here)
    import torch  # noqa: F401

    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(request_r)
        os.close(reply_w)
        return Fresh(cwd, pid, request_w, reply_r)
    try:  # the fork: never returns into the test session
        os.close(request_w)
        os.close(reply_r)
        _serve(cwd, request_r, reply_w)
    finally:
        os._exit(0)


def _serve(cwd: Path, request: int, reply: int) -> None:
    """In the fork: wait for a script (none when the session ends), run it, send the outcome."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # off the session's terminal, capture files and worker channels
        os.dup2(null, fd)
    script = _read_all(request, timeout_s=None)
    if not script:
        return
    os.chdir(cwd)
    out, err, rc = io.StringIO(), io.StringIO(), 0
    sys.stdout, sys.stderr = out, err
    try:
        exec(compile(script, "<fresh>", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:  # as the interpreter does: an int is the status, else 0 or 1
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=err)
    except BaseException:
        traceback.print_exc(file=err)
        rc = 1
    _write_all(reply, json.dumps({"rc": rc, "out": out.getvalue(), "err": err.getvalue()}).encode())
