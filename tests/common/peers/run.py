"""One run of a peer suite: ``python -m pytest`` of its files in a subprocess of this interpreter.

The run's folder holds the suite's files only (its cwd; the tests' relative paths start there).
pytest reads the peer's own configuration file where the suite names one, else an empty
``pytest.ini`` written beside the files (so that no configuration of a folder above applies:
this project's own pyproject.toml, say). The environment is the cell's (CUDA_VISIBLE_DEVICES and
the like as the cell has them) with ``HF_HUB_OFFLINE=1`` (nothing downloads; a test that needs
the hub fails or skips as the peer wrote it), without ``PYTEST_ADDOPTS`` / ``PYTEST_PLUGINS``, and
with the plugins' folder and this project on ``PYTHONPATH``, in both runs: the compat run differs
only by ``-p <plugin>``, which installs the patch for the whole session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cells.evidence import PYTEST_STOPPED, TestLog, read_reportlog
from tests.common.peers.suites import Suite

# the project's folder as this module was imported from it, links kept: in a run against the
# installed compat (harness/dist/wheel_cells.py) that is a folder without the tree's compat
PROJECT = Path(__file__).absolute().parents[3]
ROUTES = ("plain", "compat")
TIMEOUT_S = 600  # one run; the cell's own limit (matrix.toml cell_timeout_s) is above all four
SET = {"HF_HUB_OFFLINE": "1"}
DROPPED = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
PLUGIN_REPORT_ENV = "COMPAT_MATRIX_PEER_PLUGIN"  # plugins/compat_peer_session.py writes it
EMPTY_INI = "pytest.ini"
TAIL_LINES = 30


class BrokenRun(RuntimeError):
    """A run that cannot be judged test by test (:meth:`PeerRun.broken` says why)."""


@dataclass
class PeerRun:
    route: str
    log: TestLog
    seconds: float
    returncode: int | None  # None: it ran past TIMEOUT_S and was killed
    output: Path  # its stdout and stderr
    plugin: dict[str, Any] | None = None  # what the compat run's plugin reported

    def tail(self) -> str:
        try:
            lines = self.output.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-TAIL_LINES:])

    def collection_errors(self) -> dict[str, str]:
        """Modules that did not import: their path -> the error."""
        return {
            nodeid: self.log.messages.get(nodeid, "")
            for nodeid, outcome in sorted(self.log.outcomes.items())
            if "::" not in nodeid and outcome == "error"
        }

    def broken(self) -> str:
        """Why this run cannot be judged test by test, or ""."""
        if self.returncode is None:
            return f"the {self.route} run ran past {TIMEOUT_S} s and was killed"
        if not self.log.finished:
            return f"the {self.route} run ended (exit {self.returncode}) before pytest finished"
        status = self.log.exitstatus
        if status not in (0, 1):
            what = PYTEST_STOPPED.get(status or 0, "no tests collected" if status == 5 else "?")
            return f"pytest of the {self.route} run exited {status} ({what})"
        if not self.log.outcomes:
            return f"the {self.route} run collected no test"
        errors = self.collection_errors()
        if self.route == "plain" and errors:
            shown = "; ".join(f"{path}: {why}" for path, why in errors.items())
            return f"a module of the suite does not import plain: {shown}"
        if self.route == "compat":
            return _plugin_broken(self.plugin)
        return ""


def _plugin_broken(seen: dict[str, Any] | None) -> str:
    if seen is None:
        return "the compat run's session plugin reported nothing: the patch was not installed"
    if not seen.get("installed") or not seen.get("in_place_at_start"):
        return f"the compat run's plugin did not install {seen.get('patch')}: {seen}"
    if not seen.get("in_place_at_end"):
        return (
            f"{seen.get('patch')} was no longer in place when the compat run's session finished"
            " (a test put the originals back; the tests after it ran plain)"
        )
    return ""


def write_config(suite: Suite, folder: Path) -> Path:
    """The configuration pytest reads: the peer's own, else an empty pytest.ini written here."""
    if suite.config:
        return folder / suite.config
    path = folder / EMPTY_INI
    path.write_text("# the peer's sdist has no pytest configuration: pytest's defaults\n")
    return path


def command(suite: Suite, folder: Path, route: str, reportlog: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *suite.tests, "-c", str(write_config(suite, folder))]
    cmd += [f"--rootdir={folder}", "-p", "no:cacheprovider", f"--report-log={reportlog}", "-q"]
    # a module that does not import is judged as its tests not run (plain: the run is broken),
    # and the other modules still run
    cmd.append("--continue-on-collection-errors")
    if route == "compat":
        cmd += ["-p", suite.plugin.stem]
    return cmd


def environment(suite: Suite, route: str, plugin_report: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env.update(SET)
    paths = [str(suite.plugin.parent), str(PROJECT), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop(PLUGIN_REPORT_ENV, None)
    if route == "compat":
        env[PLUGIN_REPORT_ENV] = str(plugin_report)
    return env


def run_suite(suite: Suite, folder: Path, route: str, logs: Path) -> PeerRun:
    """Run the suite's files in ``folder`` once, ``plain`` or through ``compat``; its output,
    reportlog and plugin report go to ``logs`` as ``<suite>-<route>.{log,jsonl,plugin.json}``."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, not {route!r}")
    logs.mkdir(parents=True, exist_ok=True)
    stem = logs / f"{suite.name}-{route}"
    output, reportlog, plugin = (Path(f"{stem}{ext}") for ext in (".log", ".jsonl", ".plugin.json"))
    for old in (reportlog, plugin):
        old.unlink(missing_ok=True)
    cmd = command(suite, folder, route, reportlog)
    start = time.monotonic()
    returncode: int | None
    with output.open("w") as out:
        out.write(f"$ {' '.join(cmd)}\n  (cwd {folder})\n")
        out.flush()
        try:
            returncode = subprocess.run(
                cmd,
                cwd=folder,
                env=environment(suite, route, plugin),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_S,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            returncode = None
    seconds = round(time.monotonic() - start, 2)
    seen = None
    if route == "compat":
        try:
            seen = json.loads(plugin.read_text())
        except (OSError, ValueError):
            seen = None
        seen = seen if isinstance(seen, dict) else None
    return PeerRun(route, read_reportlog(reportlog), seconds, returncode, output, seen)
