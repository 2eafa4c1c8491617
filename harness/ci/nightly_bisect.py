"""The nightly's bisect step: a cell that turned red on a release newer than every pin, bisected
the night it appears.

    python -m harness.ci.nightly_bisect --matrix-json nightly/matrix.json \\
        [--matrix-json prerelease/matrix.json] [--backend cpu] [--max-tests 5] [--max-jobs 4]

For each cell of the night's reports that resolves versions at install time (a ``latest`` pin or
the prerelease tier) and failed, each release it installed above the highest pin of its
distribution (:func:`harness.report.new_releases.seen`: "new release seen") is a suspect. Each
suspect is bisected (:func:`harness.bisect.bisection.bisect`) in that same cell, everything else
held at what the night resolved, over the distribution's releases from the highest pin (the
newest release the pinned matrix runs: the last one known green) to the new one, on the tests
that failed. The answer names the first bad release and the tests; a suspect whose two ends give
the same outcome is cleared ("not this distribution"). A red watched cell without a new release,
a cell of a backend this runner lacks, or a suspect with no pin to start from is said, not
bisected.

Writes ``reports/nightly-bisect.json`` (``findings``, each with its one-line ``line``, which the
regression issue quotes: :mod:`harness.ci.nightly_issue` ``--bisect-json``) and
``nightly-bisect.md``. Exit 0 whatever was found (the night's colour is the issue's business),
2 when a report given cannot be read. Standard library and ``packaging``: it runs in the nox
process (``nox -s bisect_nightly``), each cell's venv made by uv.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from packaging.version import Version

from harness.bisect import bisection
from harness.bisect.bisection import FAILING, Request, Target
from harness.cells.run import ensure_venv
from harness.matrix import interpreters
from harness.matrix.errors import Refused
from harness.matrix.paths import DEFAULT_REPORTS, ROOT
from harness.matrix.spec import Matrix
from harness.matrix.spec import load as load_matrix
from harness.report import new_releases

OUT = "nightly-bisect"  # reports/nightly-bisect.json and .md


@dataclass(frozen=True)
class Job:
    """One suspect: ``dist`` from ``low`` (its highest pin) to ``high`` (the night's release),
    bisected in ``cell`` on ``tests``."""

    cell: str
    dist: str
    low: str
    high: str
    tests: tuple[str, ...]


def red_tests(cell: Mapping[str, Any]) -> list[str]:
    """The cell's tests whose final outcome is a failure, sorted."""
    tests = cell.get("tests") or {}
    return sorted(t for t, outcome in tests.items() if outcome in FAILING)


def plan(
    matrix: Matrix,
    cells: Iterable[Mapping[str, Any]],
    *,
    backends: Sequence[str] = ("cpu",),
    max_tests: int = 5,
) -> tuple[list[Job], list[dict[str, str]]]:
    """The suspects to bisect, and a note for each red watched cell (or suspect) left alone.

    One job per (distribution, new release, failing tests): a release that broke the same tests
    in several cells is bisected in the first of them."""
    jobs: dict[tuple[str, str, tuple[str, ...]], Job] = {}
    notes: list[dict[str, str]] = []
    for cell in cells:
        failing = red_tests(cell)
        if not new_releases.watched(cell) or not failing:
            continue
        cid = str(cell.get("id"))
        if cell.get("backend") not in backends:
            notes.append(_note(cid, f"backend {cell.get('backend')} is not on this runner"))
            continue
        suspects = new_releases.seen(matrix, [cell])
        if not suspects:
            notes.append(_note(cid, "red without a release above the pins: nothing to bisect"))
        tests = tuple(failing[:max_tests])
        for found in suspects:
            dist, high = found["dist"], found["version"]
            if found["highest_pin"] == "none":
                notes.append(_note(cid, f"{dist}: no pin to start from", dist=dist, high=high))
                continue
            jobs.setdefault((dist, high, tests), Job(cid, dist, found["highest_pin"], high, tests))
    return list(jobs.values()), notes


def _note(cell: str, why: str, **suspect: str) -> dict[str, str]:
    """A red cell (or one suspect of it: ``dist``, ``high``) left alone, and why."""
    return {"cell": cell, "status": "not bisected", "reason": why, **suspect}


def _finding(job: Job, **fields: Any) -> dict[str, Any]:
    """What a job found: the job's own fields, then the outcome's."""
    return {**asdict(job), "tests": list(job.tests), **fields}


def run_job(job: Job, target: Target, echo: TextIO | None) -> dict[str, Any]:
    """Bisect one suspect in its target: the answer, or why it was cleared or refused."""
    pre = Version(job.high).is_prerelease or Version(job.low).is_prerelease
    request = Request(job.dist, job.low, job.high, job.tests, None, pre)
    try:
        result = bisection.bisect(request, target, echo)
    except Refused as exc:
        cleared = "both ends give the same outcome" in str(exc)
        return _finding(job, status="cleared" if cleared else "refused", reason=str(exc))
    answer = result["answer"]
    return _finding(
        job,
        status="answered",
        first=answer["first"],
        candidates=answer["candidates"],
        verdict=answer["verdict"],
        changes=answer["changes"],
        headline=bisection.headline(result),
        probes=len(result["probes"]),
        seconds=result["seconds"],
    )


def line(finding: Mapping[str, Any]) -> str:
    """One finding as the regression issue says it."""
    where = f"in `{finding['cell']}`"
    if finding["status"] == "answered":
        first = " or ".join(finding["candidates"])
        tests = ", ".join(
            f"`{c['test']}` ({c['before']} → {c['after']})" for c in finding["changes"]
        )
        return (
            f"**{finding['dist']} {first}** {finding['verdict']} {tests} {where}: the first "
            f"release after {finding['low']} (the highest pin) that behaves like {finding['high']} "
            f"({finding['probes']} probes, {finding['seconds']} s)"
        )
    if finding["status"] == "cleared":
        return (
            f"{finding['dist']} {finding['low']} → {finding['high']} {where}: cleared, both ends "
            "fail alike (another release caused it)"
        )
    what = f"{finding['dist']} → {finding['high']} " if finding.get("dist") else ""
    return f"{what}{where}: {finding['status']}: {finding['reason']}"


def broke(finding: Mapping[str, Any]) -> bool:
    """Whether the finding names a release that broke tests."""
    return finding["status"] == "answered" and finding["verdict"] in ("broke", "changed")


def render_markdown(findings: Sequence[Mapping[str, Any]]) -> str:
    lines = ["## The night's new releases, bisected", ""]
    if not findings:
        lines.append("No cell turned red on a release above the pins: nothing to bisect.")
    lines += [f"- {f['line']}" for f in findings]
    return "\n".join(lines) + "\n"


TargetFor = Callable[[Job], Target]


def cell_target(matrix: Matrix, reports: Path, uv: str) -> TargetFor:
    """A target per job: the job's cell, in a venv of the cell's Python under
    ``reports/nightly-bisect/venvs`` (made by uv), its probes' records beside it."""

    def target(job: Job) -> Target:
        cell = bisection.find_cell(matrix, job.cell)
        found = interpreters.find([cell.python], uv=uv)[cell.python]
        if found is None:
            raise Refused(interpreters.missing_reason(cell.python))
        python = ensure_venv(uv, str(found), reports / OUT / "venvs" / cell.id, cell.python)
        where = reports / OUT / f"{job.dist}-{job.high}-{cell.id}"
        return bisection.target_for(matrix, cell, python, uv=uv, reports=where)

    return target


def run(jobs: Sequence[Job], target_for: TargetFor, echo: TextIO | None) -> list[dict[str, Any]]:
    """Each job's finding, in order; a job whose target cannot be made is refused, not fatal."""
    out = []
    for job in jobs:
        try:
            finding = run_job(job, target_for(job), echo)
        except Refused as exc:
            finding = _finding(job, status="refused", reason=str(exc))
        out.append(finding)
    return out


def load_cells(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The cells of the reports given (harness.report.pages' matrix.json); a report that is
    absent is skipped (the prerelease tier's is optional).

    Raises:
        Refused: a report that is there but is not a matrix report."""
    cells: list[dict[str, Any]] = []
    for path in paths:
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
            cells += [{**c, "id": c.get("id", cid)} for cid, c in data["cells"].items()]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise Refused(
                f"{path}: not a matrix report (accepted: harness.report.pages' matrix.json, "
                f"with a 'cells' object): {exc!r}"
            ) from None
    return cells


def write(
    findings: list[dict[str, Any]], notes: list[dict[str, str]], reports: Path
) -> tuple[Path, str]:
    """Write nightly-bisect.json and .md; the JSON's path and the Markdown."""
    every = [*findings, *notes]
    for finding in every:
        finding["line"] = line(finding)
        finding["broke"] = broke(finding)
    reports.mkdir(parents=True, exist_ok=True)
    out = reports / f"{OUT}.json"
    out.write_text(json.dumps({"schema": 1, "findings": every}, indent=2) + "\n")
    markdown = render_markdown(every)
    (reports / f"{OUT}.md").write_text(markdown)
    return out, markdown


def main(argv: Sequence[str] | None = None, *, echo: TextIO = sys.stdout) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.ci.nightly_bisect", description=__doc__)
    p.add_argument("--matrix-json", type=Path, action="append", required=True)
    p.add_argument("--backend", action="append", help="backends this runner has (default: cpu)")
    p.add_argument("--max-tests", type=int, default=5, help="failing tests bisected per cell")
    p.add_argument("--max-jobs", type=int, default=4, help="suspects bisected in one night")
    p.add_argument("--reports", type=Path, default=DEFAULT_REPORTS)
    p.add_argument("--matrix", type=Path, default=ROOT / "matrix.toml")
    args = p.parse_args(argv)
    try:
        cells = load_cells(args.matrix_json)
    except Refused as exc:
        echo.write(f"bisect refused: {exc}\n")
        return 2
    matrix = load_matrix(args.matrix)
    jobs, notes = plan(matrix, cells, backends=args.backend or ["cpu"], max_tests=args.max_tests)
    for job in jobs[args.max_jobs :]:
        notes.append(
            _note(job.cell, f"over --max-jobs {args.max_jobs}", dist=job.dist, high=job.high)
        )
    target_for = cell_target(matrix, args.reports, interpreters.uv_bin())
    findings = run(jobs[: args.max_jobs], target_for, echo)
    out, markdown = write(findings, notes, args.reports)
    echo.write(f"\n{markdown}\n→ {out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
