"""GitHub's and Linux's limits at every configuration the workflows accept (harness.ci.widths):
nothing over a limit, and half of every limit kept at today's matrix.toml."""

from __future__ import annotations

import collections
import json
import subprocess
from pathlib import Path

import pytest

from harness.ci import gha, widths
from harness.matrix import limits, spec
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "94f88d1"  # main before this module: one job per cell, the matrix JSON in env:
# a value held to its limit itself, not half of it, and why
AT_THE_LIMIT = {
    # a job's timeout-minutes is a bound the harness never passes (each cell stops at its own
    # timeout), not a value that grows unseen: its cells' expected time is far under it
    # (docs/github-actions.md, reports/bench/github.json)
    limits.JOB_MINUTES.key,
}
WORKFLOWS = sorted({c.workflow for c in widths.configurations()})


def shortfalls(found: list[widths.Reading]) -> list[widths.Reading]:
    return [r for r in found if r.over or (r.short_of_room and r.limit.key not in AT_THE_LIMIT)]


def shown(bad: list[tuple[widths.Reading, widths.Config | None]]) -> str:
    worst = sorted(bad, key=lambda rc: -rc[0].value / rc[0].limit.value)[:8]
    return "\n".join(
        f"{r.limit.key}: {r.value:,} of {r.limit.value:,} {r.limit.unit} at {r.where}"
        f" ({c.describe() if c else 'every configuration'})"
        for r, c in worst
    )


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_every_configuration_keeps_half_of_every_limit(workflow: str) -> None:
    """Each tier set x backend set x enabled backends x event x profile x full (and candidates
    where the workflow takes them): every value at most half its limit."""
    bad, seen, counted = [], collections.Counter[str](), 0
    for config in widths.configurations():
        if config.workflow != workflow:
            continue
        counted += 1
        found = widths.readings(config)
        seen.update(r.limit.key for r in found)
        bad += [(r, config) for r in shortfalls(found)]
    assert counted and not bad, shown(bad)
    # every limit a run meets was read in some configuration
    assert {limits.JOBS_PER_MATRIX.key, limits.ENV_STRING.key, limits.JOB_OUTPUTS.key} <= set(seen)


def test_what_no_configuration_changes_keeps_half_of_its_limit() -> None:
    found = widths.static_readings()
    assert not shortfalls(found), shown([(r, None) for r in shortfalls(found)])
    read = {r.limit.key for r in found}
    assert {"workflow-file", "expression", "reuse-depth", "client-payload-keys"} <= read


def test_a_configuration_is_refused_only_when_it_leaves_no_cell() -> None:
    """Asking for GPU backends none of which may run is refused by the setup step, saying so;
    any other refusal of a configuration the workflows accept would be a bug."""
    reasons = {widths.refusal(c) for c in widths.configurations()} - {""}
    assert reasons and all(r.startswith("no cell to run") for r in reasons), reasons


def test_the_widest_nightly_is_planned_as_torch_groups() -> None:
    """Every tier on four backends: 512 cells in at most 128 jobs (GitHub's 256 halved), none
    holding more than one torch on one backend."""
    config = widths.Config(
        "nightly.yml",
        "schedule",
        gha.WORKFLOW_TIERS,
        ("cpu", "cuda", "xpu", "mps"),
        ("cuda", "xpu", "mps"),
        "nightly",
        True,
    )
    done = gha.setup(spec.load(), widths.request(config))
    jobs = done.plan["jobs"]
    assert len(done.plan["cells"]) == len(spec.load().cells(tiers=gha.WORKFLOW_TIERS))
    assert len(jobs) <= limits.JOBS_PER_MATRIX.room
    for job in jobs:
        cells = job["cells"].split()
        assert len({c.split("-ao")[0] for c in cells}) == 1, job["job"]  # one torch
        assert {c.rsplit("-", 1)[1] for c in cells} == {job["backend"]}
    listed = [c for j in jobs for c in j["cells"].split()]
    assert sorted(listed) == sorted(done.plan["cells"])  # each planned cell in one job
    assert len(done.outputs["jobs"]) < 64 * 1024


def _setup_at(ref: str, tmp: Path, *args: str) -> dict[str, str]:
    """The setup step's outputs as ``ref``'s harness wrote them (its files unpacked in tmp)."""
    archive = subprocess.run(
        ["git", "archive", ref, "harness", "matrix.toml", "wheels.toml", ".github"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    out = tmp / "github_output"
    gha_args = ["matrix", *args, f"--github-output={out}"]
    run_module("harness.ci.gha", *gha_args, cwd=tmp, check=True, text=False)
    return dict(line.split("=", 1) for line in out.read_text().splitlines())


def test_the_model_finds_the_aggregate_that_could_not_start(tmp_path: Path) -> None:
    """On main before the plan travelled as a file: every tier on four backends put the whole
    matrix JSON (165 KB) into the aggregate job's EXPECTED_MATRIX, over Linux's 128 KiB for one
    environment string; the same reading of that tree's matrix.yml finds it."""
    outputs = _setup_at(
        BEFORE,
        tmp_path,
        "--tier=core extended downstream",
        "--enabled=cuda xpu mps",
        "--event=schedule",
    )
    entries = json.loads(outputs["jobs"])["include"]
    old = widths.load_from(tmp_path / ".github" / "workflows", "matrix.yml")
    inputs = {"tiers": 24, "backends": 16, "full": 5, "hypothesis-profile": 7}
    scope = widths.scope(outputs, widths.input_sizes(old, "workflow_call", inputs), entries)
    found = widths.file_readings(old, "matrix.yml", scope)
    over = [r for r in found if r.over]
    assert over and all(
        r.where.endswith(": EXPECTED_MATRIX") for r in over if r.limit.key == "env-string"
    ), over
    assert {r.limit.key for r in over} == {"env-string"}
    assert all(r.where.startswith("matrix.yml: aggregate: ") for r in over)
    assert min(r.value for r in over) > 165_000  # the 165,396 bytes of the matrix output


def test_the_counts_docs_github_actions_gives_are_the_plans() -> None:
    """The page said "363 cells" where the command it quoted gave 384: the counts it gives now
    are read from the plan here."""
    text = (ROOT / "docs" / "github-actions.md").read_text()
    m = spec.load()
    every = gha.plan(m, list(gha.WORKFLOW_TIERS))
    ci = gha.plan(m, ["core"], ["cpu"])
    per_backend = {j["backend"] for j in every["jobs"]}
    said = f"Every tier on four backends is {len(every['cells'])} cells today"
    assert said in text
    jobs = len(every["jobs"])
    assert f"{jobs} jobs at full width ({jobs // len(per_backend)} per backend)" in text
    assert f"{len(ci['jobs'])} for `ci.yml`'s core matrix on cpu" in text
    assert f"| {jobs} (every tier, four backends) |" in text


def test_the_longest_job_measured_keeps_half_of_a_hosted_jobs_time() -> None:
    """A job's timeout-minutes is held to the limit itself (a bound); what a job is expected to
    take, from the groups measured here (bench/bench_github.py, reports/bench/github.json), is
    held to half of it at every width."""
    model = json.loads((ROOT / "reports" / "bench" / "github.json").read_text())["model"]
    for width, found in model["widths"].items():
        for mode in ("group_full", "group_carried"):
            assert found[f"longest_job_s_{mode}"] <= limits.JOB_MINUTES.room * 60, (width, mode)
        assert found["jobs_per_group"] <= limits.JOBS_PER_MATRIX.room, width
