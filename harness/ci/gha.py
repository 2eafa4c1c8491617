"""The GitHub Actions matrix, from matrix.toml through the same loader the noxfile uses, and the
aggregate's manifest of the cells it planned.

    python -m harness.ci.gha matrix [--tier core] [--backend cpu] [--enabled "cuda xpu"]
                                 [--event schedule] [--ref-protected true]
                                 [--cells "torch2.6-ao0.8-cpu"]
                                 [--candidates "pkg==1 other @ https://…"]
                                 [--pr-repository owner/name --pr-number N --pr-sha SHA]
                                 [--artifact-prefix NAME] [--plan-out plan/plan.json]
                                 [--github-output "$GITHUB_OUTPUT"]
    python -m harness.ci.gha manifest --plan plan/plan.json --reports reports \
                                 --tiers "core extended"
    python -m harness.ci.gha verdict --gate reports/gate.json [--github-output "$GITHUB_OUTPUT"]

``matrix`` writes the run's plan (:func:`plan`: every cell id, and the jobs that run them, one per
torch group, :mod:`harness.ci.fanout`) to ``--plan-out``, a file the setup job uploads as the
artifact ``<prefix>plan`` for the aggregate job, and small outputs to the step's output file:
``jobs`` ({"include": [...]}, the cell job's ``strategy.matrix``: one entry per job, at most
:data:`harness.matrix.limits.JOBS_PER_MATRIX`), ``count`` (cells planned), ``tiers`` (space
separated), ``prefix`` (the call's artifact prefix: :func:`artifact_prefix`), ``name`` (what
tells this call apart in a commit status and a concurrency group: :func:`call_name`),
``candidates`` (a JSON list: what each cell installs after its pins; the input may be a JSON
list or candidates separated by spaces, commas or newlines, :mod:`harness.ci.trigger`, at most
:data:`MAX_CANDIDATES` bytes), ``judged`` (one Markdown line naming the upstream pull request
the ``--pr-*`` arguments name, or empty) and ``trusted`` (``true`` when the run installs no
candidate). Nothing that grows with the matrix travels as an output or an environment variable
(:mod:`harness.ci.widths` holds every value to half its limit). It fails (exit 2, with the
reason) instead of emitting something GitHub cannot run.

Backends other than cpu are opt-in: a repository variable lists the enabled ones, and only runs a
maintainer starts (schedule, workflow_dispatch) may use them, so no job waits for a runner nobody
has and no pull request's code, a fork's included, reaches a self-hosted runner: not through
ci.yml, and not through a ``repository_dispatch`` from an upstream CI (its candidates run on cpu).
A run with candidates (unreviewed code) reaches a GPU runner only when a maintainer dispatched it
from a protected ref (``--ref-protected true``: ``github.ref_protected``) and named the backend.
Runner labels come from matrix.toml's ``runs_on``, overridable per backend through
``$COMPAT_MATRIX_RUNS_ON`` (JSON: {"cuda": ["self-hosted", "a100"]}).

``manifest`` writes ``reports/run.json`` naming the cells of the plan, the same manifest ``nox -s
matrix`` writes, so the report and the gate judge exactly those cells
(:mod:`harness.cells.verdict`): a planned cell whose ``cell.json`` never came back is "no
record", which fails both, and a cell the run did not plan is never counted missing (a narrowed
run is judged on what it ran). ``verdict`` turns ``gate.json`` into the reusable workflow's
outputs (verdict pass / fail / none, regressions, missing). Standard library and the harness.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.ci import fanout, trigger
from harness.matrix import limits, paths, spec
from harness.matrix.errors import Refused
from harness.matrix.selection import Selection, manifest, write_manifest

ALWAYS = "cpu"  # every repository has GitHub's hosted Linux runners
# events only a maintainer starts, by hand or by the schedule: the only ones GPU runners take.
# Not repository_dispatch: an upstream project's CI sends it, naming code from any pull
# request, a fork's included, so its candidates run on GitHub's hosted cpu runners only.
MAINTAINER_EVENTS = frozenset({"schedule", "workflow_dispatch"})
RUNS_ON_ENV = "COMPAT_MATRIX_RUNS_ON"
PLAN_SCHEMA = 1
PLAN_FILE = "plan.json"  # in the folder of the setup job's `<prefix>plan` artifact
MAX_CANDIDATES = 16_384  # bytes of the candidates input: it reaches every cell's environment
MAX_NAME = 64  # characters of the packages in a call's name (the commit status's context)
MAX_LABELS, MAX_LABEL = 8, 64  # runner labels per backend, characters per label
# the tiers a workflow can be asked for: the prerelease tier runs with nox only for now (its
# failures are reported, not fatal, and matrix.yml cannot yet mark one cell job as non-fatal)
WORKFLOW_TIERS = tuple(t for t in spec.TIERS if t != "prerelease")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_COMMIT_ID = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{7,40}(?![0-9a-fA-F])")  # a pushed commit


class GhaError(Refused):
    """A workflow input or repository variable is unusable; the message says which and why."""


def words(text: str | None) -> list[str]:
    """Items of a list typed into a single-line field: separated by spaces, commas or newlines."""
    return [w for w in re.split(r"[\s,]+", text or "") if w]


def runner_labels(matrix: spec.Matrix, raw: str | None) -> dict[str, list[str]]:
    """Runner labels per backend: matrix.toml's ``runs_on``, then the overrides in ``raw`` (at
    most :data:`MAX_LABELS` labels of :data:`MAX_LABEL` characters each: they are in every job's
    entry)."""
    labels = {name: list(b.runs_on) for name, b in matrix.backends.items()}
    if not (raw or "").strip():
        return labels
    try:
        overrides = json.loads(raw or "")
    except json.JSONDecodeError as exc:
        raise GhaError(
            f"{RUNS_ON_ENV}: not JSON ({exc.msg}); accepted: "
            '{"cuda": ["self-hosted", "linux", "a100"]} (a list or a space-separated string)'
        ) from None
    if not isinstance(overrides, dict):
        raise GhaError(f"{RUNS_ON_ENV}: expected a JSON object backend -> labels, got {raw!r}")
    for name, value in overrides.items():
        if name not in matrix.backends:
            raise GhaError(
                f"{RUNS_ON_ENV}: unknown backend {name!r}; accepted: {sorted(matrix.backends)}"
            )
        got = words(value) if isinstance(value, str) else value
        if (
            not isinstance(got, list)
            or not 0 < len(got) <= MAX_LABELS
            or not all(isinstance(v, str) and _LABEL.match(v) and len(v) <= MAX_LABEL for v in got)
        ):
            raise GhaError(
                f"{RUNS_ON_ENV}: {name}: expected 1 to {MAX_LABELS} runner labels of at most"
                f" {MAX_LABEL} letters, digits, '_', '.', ':' or '-', got {str(value)[:200]!r}"
            )
        labels[name] = list(got)
    return labels


def select_backends(
    requested: Iterable[str],
    enabled: Iterable[str],
    event: str | None,
    known: Iterable[str],
    *,
    untrusted: bool = False,
    protected: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """The backends a run may use, and for each one dropped, why.

    cpu is always usable; another backend needs the repository to enable it and an event a
    maintainer started, and, for a run that installs candidates (``untrusted``), a workflow
    started from a protected ref (``protected``: ``github.ref_protected``). ``event`` None means
    "not on GitHub" (a local call): no event or ref rule."""
    known = list(known)
    for name in [*requested, *enabled]:
        if name not in known:
            raise GhaError(f"unknown backend {name!r}; accepted: {sorted(known)}")
    chosen, dropped = [], {}
    on = set(enabled)
    for name in requested:
        if name == ALWAYS:
            chosen.append(name)
        elif name not in on:
            dropped[name] = "not enabled in the repository variable COMPAT_MATRIX_BACKENDS"
        elif event is not None and event not in MAINTAINER_EVENTS:
            dropped[name] = (
                f"GPU runners take no {event} event (runs a maintainer starts by hand or the"
                " schedule only: schedule, workflow_dispatch)"
            )
        elif event is not None and untrusted and not protected:
            dropped[name] = (
                "candidates reach a GPU runner only from a protected ref (the workflow"
                " dispatched from a branch whose rules hold its files reviewed)"
            )
        else:
            chosen.append(name)
    return chosen, dropped


def plan(
    matrix: spec.Matrix,
    tiers: list[str],
    backends: list[str] | None = None,
    *,
    cells: Sequence[str] = (),
    labels: Mapping[str, list[str]] | None = None,
    prefix: str = "",
) -> dict[str, Any]:
    """The run's plan: the ids of the cells of ``tiers`` on ``backends`` (None: all), narrowed to
    ``cells`` (cell ids or session names; empty: all), and the jobs that run them, one per torch
    group (:mod:`harness.ci.fanout`), each uploading ``<prefix>reports-<job>``. CPU jobs first, so
    that they never queue behind GPU jobs for the ``max-parallel`` slots."""
    known = {c.id for c in matrix.cells(tiers=spec.TIERS)}
    wanted = {c.removeprefix("tests-") for c in cells}
    unknown = sorted(wanted - known)
    if unknown:
        raise GhaError(f"unknown cell {unknown[0]!r}; `nox -l -t cell` lists them")
    chosen = [
        c
        for c in matrix.cells(tiers=tiers)
        if (backends is None or c.backend.name in backends) and (not wanted or c.id in wanted)
    ]
    chosen.sort(key=lambda c: c.backend.name != ALWAYS)  # stable: matrix order otherwise
    where = {name: list(b.runs_on) for name, b in matrix.backends.items()} | dict(labels or {})
    jobs = [fanout.entry(job, matrix, where, prefix) for job in fanout.plan_jobs(chosen)]
    return {"schema": PLAN_SCHEMA, "cells": [c.id for c in chosen], "jobs": jobs}


def check_jobs(jobs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a plan GitHub would not start: more jobs than one matrix may expand to."""
    most = limits.JOBS_PER_MATRIX.value
    if len(jobs) > most:
        raise GhaError(
            f"{len(jobs)} jobs to run: GitHub expands one matrix to at most {most} jobs"
            f" ({limits.JOBS_PER_MATRIX.source}); narrow the run (tiers, backends, cells)"
        )


def parse_candidates(raw: str | None) -> list[str]:
    """The ``candidates`` input of matrix.yml: empty or ``[]`` for none; else a JSON list or
    candidates separated by spaces, commas or newlines (:func:`harness.ci.trigger.split_candidates`:
    an option-like candidate is refused), at most :data:`MAX_CANDIDATES` bytes in all."""
    text = (raw or "").strip()
    if text in ("", "[]"):
        return []
    if len(text.encode()) > MAX_CANDIDATES:
        raise GhaError(
            f"candidates: {len(text.encode()):,} bytes; accepted: at most {MAX_CANDIDATES:,} (they"
            " reach every cell's environment): name fewer, or one wheel or URL per package"
        )
    try:
        return trigger.split_candidates(text)
    except trigger.TriggerError as exc:
        raise GhaError(str(exc)) from None


def artifact_prefix(name: str, candidates: Sequence[str], selection: Sequence[str]) -> str:
    """What this call's artifact names start with, so that two calls of the pipeline in one
    caller run (two gate calls: each with its own candidates or cells) never overwrite or merge
    each other's artifacts.

    ``name`` (the caller's ``artifact-prefix`` input) when given; else, for a call with
    candidates, ``gate-`` and 10 hex digits of a digest of the candidates and the selection
    (tiers, backends, cells); else '' (ci, nightly, baseline: one call per run, whose artifact
    names others read: ``matrix-report``, ``baseline``). Always '' or ending in ``-``."""
    name = name.strip()
    if name:
        if not _PREFIX.match(name):
            raise GhaError(
                f"artifact-prefix: {name!r} is not usable in artifact names; accepted: letters,"
                " digits, '.', '_' and '-', starting with a letter or digit, at most 40"
            )
        return name.rstrip("-") + "-"
    if not candidates:
        return ""
    what = json.dumps([list(candidates), list(selection)])
    return f"gate-{hashlib.sha256(what.encode()).hexdigest()[:10]}-"


def call_name(
    given: str, candidates: Sequence[str], tiers: Sequence[str], cells: Sequence[str] = ()
) -> str:
    """What tells this call of the pipeline apart from another in the same caller run, stable
    across pushes to the judged pull request (so that a commit status of that name can be
    required): the ``artifact-prefix`` input when given; else, for a call with candidates, the
    packages they name (:func:`harness.ci.trigger.package_name`) and 6 hex digits of a digest of
    the candidates with their commit ids blanked, the tiers and the cells (the same candidates
    from a source tree and as a wheel are two names); else '' (one call per run)."""
    name = given.strip().rstrip("-")
    if name or not candidates:
        return name
    blanked = [_COMMIT_ID.sub("*", c) for c in candidates]
    digest = hashlib.sha256(json.dumps([blanked, list(tiers), list(cells)]).encode())
    names = "+".join(sorted(dict.fromkeys(trigger.package_name(c) for c in candidates)))
    names = names if len(names) <= MAX_NAME else names[: MAX_NAME - 1] + "…"
    return f"{names} {digest.hexdigest()[:6]}"


def read_plan(path: Path) -> dict[str, Any]:
    """The plan the setup job uploaded (:func:`plan`), checked; GhaError names what is wrong."""
    try:
        doc = json.loads(path.read_text())
        ids = [str(i) for i in doc["cells"]]
        jobs = list(doc["jobs"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise GhaError(f"{path}: not the setup job's plan ({exc!r})") from None
    if not ids:
        raise GhaError(f"{path}: the setup job planned no cell")
    return {**doc, "cells": ids, "jobs": jobs}


def planned_manifest(
    matrix: spec.Matrix, ids: Sequence[str], tiers: Sequence[str]
) -> dict[str, Any]:
    """The run's manifest (``reports/run.json``) naming exactly the planned cells, so that the
    report and the gate judge those (:mod:`harness.cells.verdict`): one that sent nothing back is
    "no record", a bad cell, and a cell the run did not plan is never counted missing."""
    known = {c.id: c for c in matrix.cells(tiers=spec.TIERS)}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise GhaError(f"the plan names an unknown cell {unknown[0]!r} (not in {matrix.path})")
    chosen = tuple(known[i] for i in ids)
    backends = tuple(dict.fromkeys(c.backend.name for c in chosen))
    return manifest(Selection(tuple(tiers) or ("core",), backends, chosen), "finished")


def verdict(gate: dict[str, Any] | None) -> dict[str, str]:
    """The gate's result as workflow outputs; ``none`` when no gate ran or it wrote nothing."""
    if gate is None:
        return {"verdict": "none", "regressions": "0", "missing": "0"}
    summary = gate["summary"]
    return {
        "verdict": "pass" if gate["ok"] else "fail",
        "regressions": str(summary.get("regression", 0)),
        "missing": str(summary.get("missing", 0)),
    }


def _write_outputs(path: str | None, values: Mapping[str, str]) -> None:
    text = "".join(f"{k}={v}\n" for k, v in values.items())
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def _tiers(raw: Sequence[str] | None) -> list[str]:
    tiers = trigger.split_words(" ".join(raw or []), "tiers") or ["core"]
    bad = [t for t in tiers if t not in WORKFLOW_TIERS]
    if bad:
        why = "runs with nox only" if bad[0] in spec.TIERS else "unknown tier"
        raise GhaError(
            f"{why} {bad[0]!r}; accepted: {list(WORKFLOW_TIERS)} (the prerelease tier: "
            "nox -s matrix -- --tier prerelease, docs/matrix.md)"
        )
    return list(dict.fromkeys(tiers))


@dataclass(frozen=True)
class Request:
    """What the setup step is given, as the workflow passes it (strings, untrusted)."""

    tiers: str = "core"
    backends: str = ""  # empty: every backend
    enabled: str = ""  # vars.COMPAT_MATRIX_BACKENDS
    event: str | None = None  # None: not on GitHub (no event or ref rule)
    ref_protected: str = ""
    cells: str = ""
    candidates: str = ""
    pr_repository: str = ""
    pr_number: str = ""
    pr_sha: str = ""
    artifact_prefix: str = ""
    runs_on: str = ""  # $COMPAT_MATRIX_RUNS_ON
    server: str = "https://github.com"


@dataclass(frozen=True)
class Setup:
    """The setup step's result: its outputs, the plan file's contents, the backends it left out
    (each with why)."""

    outputs: dict[str, str]
    plan: dict[str, Any]
    dropped: dict[str, str]


def setup(matrix: spec.Matrix, request: Request) -> Setup:
    """The setup job's plan and outputs (the module's docstring); GhaError or TriggerError
    naming what is unusable."""
    requested = trigger.split_words(request.backends, "backends")
    tiers = _tiers([request.tiers])
    candidates = parse_candidates(request.candidates)
    chosen, dropped = select_backends(
        requested or list(matrix.backends),
        words(request.enabled),
        request.event,
        matrix.backends,
        untrusted=bool(candidates),
        protected=request.ref_protected == "true",
    )
    labels = runner_labels(matrix, request.runs_on)
    judged = trigger.judged_line(
        request.pr_repository, request.pr_number, request.pr_sha, request.server
    )
    cells = trigger.split_words(request.cells, "cells")
    given = " ".join(trigger.split_words(request.artifact_prefix, "artifact-prefix"))
    selection = [" ".join(tiers), " ".join(chosen), " ".join(cells)]
    prefix = artifact_prefix(given, candidates, selection)
    planned = plan(matrix, tiers, chosen, cells=cells, labels=labels, prefix=prefix)
    if not planned["cells"]:
        raise GhaError(f"no cell to run: tiers {tiers}, backends {chosen}, cells {request.cells!r}")
    check_jobs(planned["jobs"])
    outputs = {
        "jobs": json.dumps({"include": planned["jobs"]}),
        "count": str(len(planned["cells"])),
        "tiers": " ".join(tiers),
        "prefix": prefix,
        "name": call_name(given, candidates, tiers, cells),
        "candidates": json.dumps(candidates),  # what every cell installs after its pins
        "judged": judged,
    }
    return Setup(outputs, {**planned, "tiers": tiers, "prefix": prefix}, dropped)


def _emit(matrix: spec.Matrix, args: argparse.Namespace) -> None:
    """The setup step: its plan file and outputs, and one line of what it planned."""
    request = Request(
        tiers=" ".join(args.tier or []) or "core",
        backends=" ".join(args.backend or []),
        enabled=args.enabled,
        event=args.event,
        ref_protected=args.ref_protected,
        cells=args.cells,
        candidates=args.candidates,
        pr_repository=args.pr_repository,
        pr_number=args.pr_number,
        pr_sha=args.pr_sha,
        artifact_prefix=args.artifact_prefix,
        runs_on=os.environ.get(RUNS_ON_ENV, ""),
        server=args.server or "https://github.com",
    )
    done = setup(matrix, request)
    for name, why in done.dropped.items():
        print(f"{name}: left out: {why}", file=sys.stderr)
    _write_plan(args.plan_out, done.plan)
    _write_outputs(args.github_output, done.outputs)
    candidates = json.loads(done.outputs["candidates"])
    judged = done.outputs["judged"]
    print(
        f"{len(done.plan['cells'])} cells in {len(done.plan['jobs'])} jobs on"
        f" {', '.join(dict.fromkeys(j['backend'] for j in done.plan['jobs']))}"
        + (f"; candidates {candidates}" if candidates else "")
        + (f"; {judged}" if judged else ""),
        file=sys.stderr,
    )


def _write_plan(path: Path | None, doc: Mapping[str, Any]) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.ci.gha")
    parser.add_argument("--matrix", default=str(spec.DEFAULT_PATH), help="matrix.toml")
    sub = parser.add_subparsers(dest="command", required=True)
    emit = sub.add_parser("matrix", help="write the setup job's plan and outputs")
    emit.add_argument("--tier", action="append", help="tiers, space separated (default: core)")
    emit.add_argument("--backend", action="append", help="requested (default: every backend)")
    emit.add_argument("--enabled", default="", help="backends the repository enabled")
    emit.add_argument("--event", default=None, help="github.event_name")
    emit.add_argument("--ref-protected", default="", help="github.ref_protected (true/false)")
    emit.add_argument("--cells", default="", help="narrow to these cell ids or sessions")
    emit.add_argument(
        "--candidates", default="", help="the run's candidates: a JSON list, or separated by"
        " spaces, commas or newlines (empty or []: none)"
    )  # fmt: skip
    emit.add_argument("--pr-repository", default="", help="the judged upstream PR's owner/name")
    emit.add_argument("--pr-number", default="", help="its number")
    emit.add_argument("--pr-sha", default="", help="its head commit")
    emit.add_argument("--server", default=os.environ.get("GITHUB_SERVER_URL", ""))
    emit.add_argument("--artifact-prefix", default="", help="the call's artifact prefix")
    emit.add_argument("--plan-out", type=Path, default=None, help="where the plan is written")
    emit.add_argument("--github-output", default=None)
    manifest = sub.add_parser("manifest", help="reports/run.json naming the planned cells")
    manifest.add_argument("--plan", type=Path, required=True, help="the setup job's plan.json")
    manifest.add_argument("--reports", type=Path, default=paths.DEFAULT_REPORTS)
    manifest.add_argument("--tiers", default="", help="the run's tiers, space separated")
    result = sub.add_parser("verdict", help="the gate's result as workflow outputs")
    result.add_argument("--gate", type=Path, default=Path("reports/gate.json"))
    result.add_argument("--github-output", default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "verdict":
        gate = json.loads(args.gate.read_text()) if args.gate.exists() else None
        _write_outputs(args.github_output, verdict(gate))
        return 0
    matrix = spec.load(args.matrix)
    try:
        if args.command == "matrix":
            _emit(matrix, args)
            return 0
        ids = read_plan(args.plan)["cells"]
        doc = planned_manifest(matrix, ids, words(args.tiers))
        written = write_manifest(args.reports, doc)
        print(f"{len(ids)} planned cells → {written}", file=sys.stderr)
        return 0
    except (GhaError, trigger.TriggerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
