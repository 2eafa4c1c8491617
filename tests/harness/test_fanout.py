"""harness.ci.fanout: a run's cells as GitHub jobs, one per torch group, chunked where a group could
outlast a hosted job."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.cells import group_run, plan
from harness.ci import fanout, gha
from harness.matrix import limits, spec

EVERY = list(gha.WORKFLOW_TIERS)


def test_each_job_is_one_torch_on_one_backend_and_every_cell_is_in_one_job() -> None:
    m = spec.load()
    cells = m.cells(tiers=EVERY)
    jobs = fanout.plan_jobs(cells)
    assert sorted(c.id for j in jobs for c in j.cells) == sorted(c.id for c in cells)
    for job in jobs:
        assert {(c.torch.label, c.backend.name) for c in job.cells} == {
            (job.cells[0].torch.label, job.backend)
        }
    assert len(jobs) <= limits.JOBS_PER_MATRIX.room  # at full width: half of GitHub's 256


def test_no_job_can_outlast_a_hosted_job_and_chunks_are_about_equal() -> None:
    m = spec.load()
    jobs = fanout.plan_jobs(m.cells(tiers=EVERY))
    assert all(j.timeout_minutes <= limits.JOB_MINUTES.value for j in jobs)
    cut = [j for j in jobs if j.name.endswith(("-1", "-2"))]
    assert {j.name for j in cut if j.backend == "cpu"} == {"torch2.6-cpu-1", "torch2.6-cpu-2"}
    sizes = [len(j.cells) for j in cut if j.backend == "cpu"]
    assert sum(sizes) == 19 and max(sizes) - min(sizes) <= 4, sizes
    whole = [j for j in jobs if j.backend == "cpu" and j.name == "torch2.3-cpu"]
    assert len(whole) == 1 and len(whole[0].cells) == 12  # a group that fits: one job, no number


def test_a_cut_never_splits_a_venv_so_a_carry_set_stays_in_one_job() -> None:
    m = spec.load()
    jobs = fanout.plan_jobs(m.cells(tiers=EVERY))
    where: dict[Any, set[str]] = {}
    for job in jobs:
        for cell in job.cells:
            where.setdefault(group_run.group_name(cell), set()).add(job.name)
            key = plan.key(m, cell)
            if key is not None:
                where.setdefault(key, set()).add(job.name)
    assert all(len(names) == 1 for names in where.values())


def test_a_venv_group_longer_than_a_job_is_cut_between_its_cells() -> None:
    m = spec.load()
    group = [c for c in m.cells(tiers=["core"], backend="cpu") if c.torch.label == "2.6"]
    venv = group_run.group_cells(group)["tests-torch2.6-cpu"]  # its three TorchAO cells
    slow = [dataclasses.replace(c, timeout_s=3 * 3600) for c in venv]
    parts = fanout.chunks(slow, fanout.BUDGET_MIN * 60)
    assert [len(p) for p in parts] == [1, 1, 1]  # no two of them fit one job
    assert [c.id for p in parts for c in p] == [c.id for c in venv]


def test_an_entry_lists_the_harness_python_last_and_names_its_artifact() -> None:
    m = spec.load()
    cells = [c for c in m.cells(tiers=["core"], backend="cpu") if c.torch.label == "2.5"]
    (job,) = fanout.plan_jobs(cells)
    entry = fanout.entry(job, m, {"cpu": ["ubuntu-24.04"]}, "gate-0123456789-")
    assert entry["pythons"].splitlines()[-1] == m.default_python
    assert sorted(entry["pythons"].splitlines()) == sorted({c.python for c in cells})
    assert entry["artifact"] == "gate-0123456789-reports-torch2.5-cpu"
    assert entry["cells"].split() == [c.id for c in cells] and entry["runs-on"] == ["ubuntu-24.04"]
    minutes = sum(c.timeout_s for c in cells) // 60 + fanout.JOB_ALLOWANCE_MIN
    assert entry["timeout-minutes"] == minutes
