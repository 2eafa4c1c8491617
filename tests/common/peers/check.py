"""A peer suite's whole check: its files from the sdist, the two runs, the verdict, the record.

:func:`check` takes the sdist already fetched (tests/downstream/test_peer_suites.py fetches it;
the harness's own tests hand it a throwaway one), extracts the suite's files into a fresh folder
per run (the tests write files where they run: the compat run never sees the plain run's), runs
it plain, then through compat, judges (:mod:`.diff`) and writes the suite's entry into the
record (``$COMPAT_MATRIX_PEERS``: suite name -> entry, one JSON object for the cell).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.common.peers import diff, fetch
from tests.common.peers.run import BrokenRun, PeerRun, run_suite
from tests.common.peers.suites import Suite

RECORD_ENV = "COMPAT_MATRIX_PEERS"


def entry(suite: Suite, release: str, **more: Any) -> dict[str, Any]:
    """A suite's entry before its runs: what it is; ``error`` empty, ``ok`` False."""
    root = f"{suite.root}/" if suite.root else ""
    return {
        "suite": suite.name,
        "distribution": suite.distribution,
        "release": release,
        "files": [f"{root}{f}" for f in suite.tests],
        "patch": suite.patch,
        "runs": {},
        "ok": False,
        "error": "",
        **more,
    }


def write(record: Path | None, name: str, data: dict[str, Any]) -> None:
    """Put the suite's entry into the record (the other suites' entries kept)."""
    if record is None:
        return
    try:
        found = json.loads(record.read_text())
    except (OSError, ValueError):
        found = {}
    whole = found if isinstance(found, dict) else {}
    whole[name] = data
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(whole, indent=1, sort_keys=True) + "\n")


def _summary(run: PeerRun, logs: Path) -> dict[str, Any]:
    return {
        "counts": run.log.counts(),
        "seconds": run.seconds,
        "exit_status": run.returncode,
        "output": run.output.name if run.output.parent == logs else str(run.output),
    }


def check(
    suite: Suite,
    archive: Path,
    *,
    release: str,
    work: Path,
    logs: Path,
    record: Path | None,
    sha256: str = "",
    note: str = "",
) -> dict[str, Any]:
    """Run ``suite`` from ``archive`` plain and through compat; its entry, also written into
    ``record``. ``entry["ok"]``: no regression, no stale lifted entry, nothing broken;
    ``entry["message"]`` says why not."""
    data = entry(suite, release, sdist=archive.name, sha256=sha256, note=note)
    runs: dict[str, PeerRun] = {}
    try:
        for route in ("plain", "compat"):
            folder = fetch.extract(archive, suite.root, suite.files, work / route)
            runs[route] = run_suite(suite, folder, route, logs)
            data["runs"][route] = _summary(runs[route], logs)
            broken = runs[route].broken()
            if broken:
                tail = runs[route].tail()
                raise BrokenRun(f"{broken}\n{tail}" if tail else broken)
    except (fetch.PeerFetchError, BrokenRun) as exc:
        data["error"] = diff.shorten(str(exc).split("\n", 1)[0], 600)
        data["message"] = f"{suite.name} {release}: {exc}"
        write(record, suite.name, data)
        return data
    data.update(diff.judge(runs["plain"].log, runs["compat"].log, suite.lifted))
    data["message"] = diff.message(f"{suite.name} {release}", data)
    write(record, suite.name, data)
    return data
