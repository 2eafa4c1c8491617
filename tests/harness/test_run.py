"""The matrix run's plumbing (harness/cells/run.py), on real cells of a throwaway project run by the
real noxfile: each group's venv and install are made ahead of the group's turn, beside the tests
of the groups before it, so that a cold run's downloads overlap tests instead of waiting."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from tests.common.harness.faultproject import Project, index_env

# the first group's only test waits for the second group's venv to hold torch: with one group
# at a time (--jobs 1), only an install made ahead can give it one while the first group runs
SUITE = """
import os, time
from pathlib import Path


def test_meanwhile_the_next_group_installs():
    wait = os.environ.get("AHEAD_WAIT")
    if not wait:
        return
    deadline = time.monotonic() + 120
    while not list(Path(wait).glob("lib/python*/site-packages/torch-*.dist-info")):
        assert time.monotonic() < deadline, f"{wait} got no torch while the group before ran"
        time.sleep(0.5)
"""


def matrix_text(wait: Path) -> str:
    return textwrap.dedent(
        f"""
        [run]
        python = ["3.11"]
        cell_timeout_s = 300
        default_cell = {{ torch = "2.6", torchao = "0.6", backend = "ahead1" }}
        test_requirements = ["requirements/test.txt"]

        [[torch]]
        version = "2.6"
        pin = "2.6.0"

        [[torchao]]
        version = "0.6"
        pin = "0.6.1"

        [backends.ahead1]
        platforms = ["linux"]
        torch_probe = "torch.zeros(2).add(1).sum().item() == 2"
        index_env = "{index_env()}"
        env = {{ AHEAD_WAIT = "{wait}" }}

        [backends.ahead2]
        platforms = ["linux"]
        torch_probe = "torch.zeros(2).add(1).sum().item() == 2"
        index_env = "{index_env()}"
        """
    )


def test_the_next_groups_install_runs_beside_the_tests_of_the_one_before(
    tmp_path: Path, fault_envdir: Path
) -> None:
    second = (fault_envdir / "matrix-tests-torch2.6-ahead2").absolute()
    shutil.rmtree(second, ignore_errors=True)  # a venv kept from an earlier run proves nothing
    project = Project.create(tmp_path / "project", fault_envdir, matrix_text(second))
    (project.root / "tests" / "test_fault.py").write_text(SUITE)
    done = project.nox("-s", "matrix", "--", "--jobs", "1", timeout=600)
    first = project.cell("torch2.6-ao0.6-ahead1")
    assert first["status"] == "passed", (first["reason"], done.stdout[-3000:])
    assert project.cell("torch2.6-ao0.6-ahead2")["status"] == "passed"
    log = project.reports / "prefetch" / "tests-torch2.6-ahead2.log"
    assert "uv" in log.read_text() and "torch==2.6.0" in log.read_text()
