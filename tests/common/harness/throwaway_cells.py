"""A cell of the harness on a throwaway test project, with the torch-free probe
(``fake_probe.py``): what the harness suite runs cells on, for real, without torch."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from harness.cells.plan import CellPlan
from harness.matrix.spec import AxisVersion, Backend, Cell

FAKE_PROBE = Path(__file__).with_name("fake_probe.py")


def make_cell(timeout_s: int = 120, backend: Backend | None = None) -> Cell:
    return Cell(
        "3.11",
        AxisVersion("2.6", "2.6.0"),
        AxisVersion("0.8", "0.8.0"),
        backend or Backend("cpu"),
        timeout_s,
    )


def plan(
    tmp_path: Path,
    tests: str,
    *,
    timeout_s: int = 120,
    install: list[list[str]] | None = None,
    backend_ok: bool = True,
    import_error: str = "",
    xfails: list[dict[str, object]] | None = None,
) -> CellPlan:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "test_it.py").write_text(textwrap.dedent(tests))
    c = make_cell(timeout_s)
    out = tmp_path / "reports" / "cells" / c.id
    args = [
        str(project),
        f"--rootdir={project}",  # else pytest may root the ids at a folder above (a clone in /tmp)
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        f"--junitxml={out / 'junit.xml'}",
        "-o",
        f"junit_suite_name={c.id}",
        f"--report-log={out / 'log.jsonl'}",
    ]
    return CellPlan(
        c,
        Path(sys.executable),
        out,
        install or [],
        args,
        xfails or [],
        probe_script=FAKE_PROBE,
        env={
            "FAKE_PROBE_BACKEND_OK": "1" if backend_ok else "0",
            "FAKE_PROBE_IMPORT_ERROR": import_error,
        },
    )


def read(plan_: CellPlan) -> dict[str, object]:
    return dict(json.loads((plan_.outdir / "cell.json").read_text()))
