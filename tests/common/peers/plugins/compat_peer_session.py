"""What both session plugins share: install a compat patch for a whole pytest session and say so.

The compat run of a peer suite loads a plugin (``-p compat_accelerate``); in pytest_configure,
before any test module is imported, it installs the patch, and it writes what it saw to
``$COMPAT_MATRIX_PEER_PLUGIN``: that the patch was installed, and whether the patched names were
still compat's when the session finished (a test that put the originals back would leave the rest
of the run plain). tests/common/peers/run.py refuses a compat run without that file or with
the patch gone: a compat run that quietly ran plain must not pass for one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPORT_ENV = "COMPAT_MATRIX_PEER_PLUGIN"


class Session:
    def __init__(self, patch: str, make: Callable[[], Any], in_place: Callable[[], bool]) -> None:
        self.patch, self.make, self.in_place = patch, make, in_place
        self.handle: Any = None
        self.seen: dict[str, Any] = {"patch": patch, "installed": False}

    def _write(self) -> None:
        path = os.environ.get(REPORT_ENV)
        if path:
            Path(path).write_text(json.dumps(self.seen, sort_keys=True) + "\n")

    def start(self) -> None:
        self.handle = self.make().install()
        self.seen.update(installed=True, in_place_at_start=self.in_place())
        self._write()

    def finish(self) -> None:
        self.seen["in_place_at_end"] = self.in_place()
        self._write()

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.uninstall()
            self.handle = None

    def hooks(self) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
        """``(pytest_configure, pytest_sessionfinish, pytest_unconfigure)`` for a plugin module:
        install at configure, record at the session's end, uninstall at unconfigure."""

        def configure(config: pytest.Config) -> None:
            self.start()

        def sessionfinish(session: pytest.Session, exitstatus: int) -> None:
            self.finish()

        def unconfigure(config: pytest.Config) -> None:
            self.stop()

        return configure, sessionfinish, unconfigure
