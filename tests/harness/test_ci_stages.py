""".ci/stages: every stage of .ci/run has a hard time limit, the limits leave room under CI's
90 minutes, and a stage past its limit is stopped, its processes with it, with a line naming it."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ROOT / ".ci" / "stages"
RUN = ROOT / ".ci" / "run"
CI_LIMIT_S = 90 * 60  # what CI gives a run: past it, nothing lands
MARGIN_S = 600  # "well under": at least ten minutes left for what no stage covers


def bash(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -uo pipefail; source {STAGES}; {script}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def limits() -> dict[str, int]:
    out = bash('for k in "${!STAGE_LIMIT_S[@]}"; do echo "$k ${STAGE_LIMIT_S[$k]}"; done')
    assert out.returncode == 0, out.stderr
    return {k: int(v) for k, v in (line.split() for line in out.stdout.splitlines())}


def test_every_stage_of_ci_run_has_a_limit_and_every_limit_a_stage() -> None:
    used = re.findall(r"^stage (\w+) ", RUN.read_text(), flags=re.M)
    assert len(used) == len(set(used)), used
    assert set(used) == set(limits()), (used, limits())


def test_the_limits_sum_well_under_ci_limit_as_the_comment_says() -> None:
    total = sum(limits().values())
    assert total <= CI_LIMIT_S - MARGIN_S, limits()
    said = re.search(r"sum to ([\d,]+) s, ([\d,]+) s under", STAGES.read_text())
    assert said is not None
    assert [int(n.replace(",", "")) for n in said.groups()] == [total, CI_LIMIT_S - total]


def test_a_stage_past_its_limit_is_stopped_with_its_children_and_named() -> None:
    marker = f"{60 + uuid.uuid4().int % 1000 / 1000:.3f}"  # a sleep no other process runs
    start = time.monotonic()
    out = bash(
        f"STAGE_LIMIT_S[demo]=1; stage demo bash -c 'sleep {marker} & sleep {marker}; wait'; "
        'echo "rc=$?"; stage_summary'
    )
    assert time.monotonic() - start < 45
    assert "rc=124" in out.stdout, out
    assert "== TIME LIMIT: stage 'demo' ran past its limit of 1 s" in out.stderr
    assert re.search(r"\d+ s  demo\s+\(limit 1 s\)  TIME LIMIT", out.stdout), out.stdout
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout == "", f"left running: {left.stdout}"


def test_a_stage_within_its_limit_returns_its_own_status_and_no_limit_line() -> None:
    out = bash(
        "STAGE_LIMIT_S[demo]=30; stage demo bash -c 'exit 124'; echo \"rc=$?\"; stage_summary"
    )
    assert "rc=124" in out.stdout  # its own 124, not timeout's: no limit was hit
    assert "TIME LIMIT" not in out.stdout + out.stderr
    ok = bash('STAGE_LIMIT_S[demo]=30; stage demo true; echo "rc=$?"; stage_summary')
    assert "rc=0" in ok.stdout
    assert re.search(r"^\s+\d+ s  demo\s+\(limit 30 s\)$", ok.stdout, flags=re.M), ok.stdout


def test_a_stage_without_a_limit_is_refused_by_name() -> None:
    out = bash('stage nosuch true; echo "rc=$?"')
    assert "stage 'nosuch' has no time limit in .ci/stages" in out.stderr
    assert "rc=0" not in out.stdout
