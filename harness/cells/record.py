"""A cell's record, ``cell.json``: what ran, how it ended (one status, one reason), every test's
outcome and the evidence around them. The runner writes it (:mod:`harness.cells.cell`); the
verdict, the gate and the report read it, without importing anything that runs cells. Standard
library only.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.cells.status import OK_STATUSES, OUTCOMES, format_counts
from harness.matrix import paths


@dataclass
class CellResult:
    id: str
    tier: str
    python: str
    torch: str
    torchao: str
    backend: str
    pins: list[str]
    group: str | None = None  # a downstream cell's library group (matrix.toml [[downstream]])
    status: str = "passed"
    reason: str = ""
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    duration_s: float = 0.0
    installed: dict[str, str | None] = field(default_factory=dict)
    torchao_cpp: bool | None = None
    failures: list[dict[str, str]] = field(default_factory=list)
    log_tail: str = ""
    candidates: list[str] = field(default_factory=list)  # upstream candidates installed last
    controls: dict[str, str] = field(default_factory=dict)  # negative control -> its outcome
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step
    # upstream-bug trackers: nodeid -> {"outcome", "reason"}; xfailed: the bug is still there
    trackers: dict[str, dict[str, str]] = field(default_factory=dict)
    # every test's final outcome (from the reportlog), skip reasons, reruns: what the gate reads
    tests: dict[str, str] = field(default_factory=dict)
    skips: dict[str, str] = field(default_factory=dict)
    reruns: dict[str, int] = field(default_factory=dict)
    exit_status: int | None = None  # the test process's; None if it never ran or was killed
    # a cell run in an existing interpreter (harness/cells/installed.py): what it ran in; else empty
    environment: dict[str, Any] = field(default_factory=dict)
    # a downstream cell's scenarios: nodeid -> library, scenario, route (alone / compat), link,
    # and the test's outcome from the reportlog (tests/downstream/conftest.py names them)
    scenarios: dict[str, dict[str, str]] = field(default_factory=dict)
    # properties the nightly profile's time budget stopped before their examples ran out
    # (tests/common/budget.py): nodeid -> "ran N of M examples in S s (time budget B s)"
    budget_cuts: dict[str, str] = field(default_factory=dict)
    # the Hypothesis profile the tests ran under (tests/common/profiles.py): "ci" unless the run
    # named one or the cell is on a non-default Python ("corner": a quarter of each property's
    # examples)
    hypothesis_profile: str = ""
    # tests not run here whose verdicts (in ``tests``) came from another cell: nodeid -> its id
    carried: dict[str, str] = field(default_factory=dict)
    # how carrying went (harness/cells/carry.py): source, run / carried counts, a refusal's reason,
    # or a full run's comparison
    carry: dict[str, Any] = field(default_factory=dict)
    # a downstream cell's peer suites (tests/common/peers): suite -> release, each run's
    # counts and seconds, regressions, fixed, lifted, stale, skips with their reasons, error
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # test paths this run's options deselected here: path -> why (`--peer-suites first`: the
    # cell of the group where the peer suites ran); the gate does not miss their tests
    deselected: dict[str, str] = field(default_factory=dict)
    # a run against the installed wheel (harness/dist/wheel_cells.py): where the suite imported
    # compat from, as the probe's InstalledOnly wrote it; empty: the source tree (pythonpath)
    compat_source: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def write(self, outdir: Path) -> Path:
        """Write cell.json into ``outdir``, clearing whatever stands in the way (a file where
        the folder should be): the record of a cell must not be lost to what its tests did."""
        if outdir.exists() and not outdir.is_dir():
            outdir.unlink()
        outdir.mkdir(parents=True, exist_ok=True)
        path = outdir / paths.CELL_FILE
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        return path


def summary_line(result: CellResult) -> str:
    """One line on how a cell ended, for the terminal: its status, counts, time and reason."""
    extra = f" — {result.reason}" if result.reason else ""
    done = f"{format_counts(result.counts)}; {result.duration_s} s"
    return f"{result.id}: {result.status.upper()} ({done}){extra}"
