"""The GitHub Actions matrix, from matrix.toml through the same loader the noxfile uses, and the
aggregate's manifest of the cells it emitted.

    python -m harness.ci.gha matrix [--tier core] [--backend cpu] [--enabled "cuda xpu"]
                                 [--event schedule] [--cells "torch2.6-ao0.8-cpu"]
                                 [--candidates "pkg==1 other @ https://…"]
                                 [--pr-repository owner/name --pr-number N --pr-sha SHA]
                                 [--artifact-prefix NAME] [--github-output "$GITHUB_OUTPUT"]
    python -m harness.ci.gha manifest --reports reports --tiers "core extended"
    python -m harness.ci.gha verdict --gate reports/gate.json [--github-output "$GITHUB_OUTPUT"]

``matrix`` writes ``matrix`` ({"include": [...]}: one entry per cell, with the nox session, the
runner labels and the artifact name: what the aggregate judges), the same entries split for
matrix.yml's cell jobs (``jobs``, ``jobs-more`` and ``more``: GitHub runs at most
:data:`MAX_JOBS` jobs per matrix, :func:`split`), ``cells`` (the cell ids, JSON), ``tiers`` (space
separated), ``prefix`` (the call's artifact prefix: :func:`artifact_prefix`), ``candidates`` (a
JSON list: what each cell installs after its pins; the input may be a JSON list or candidates
separated by spaces, commas or newlines, :mod:`harness.ci.trigger`), ``judged`` (one Markdown line
naming the upstream pull request the ``--pr-*`` arguments name, or empty) and ``trusted``
(``true`` when the run installs no candidate: only such runs save caches that other runs
restore) to the step's output file, and fails (exit 2, with the reason) instead of emitting
something GitHub cannot run. Backends other than cpu are opt-in: a repository variable lists
the enabled ones, and only runs a maintainer starts (schedule, workflow_dispatch) may use
them, so no job waits for a runner nobody has and no pull request's code, a fork's included,
reaches a self-hosted runner: not through ci.yml, and not through a ``repository_dispatch``
from an upstream CI (its candidates run on cpu). Runner labels come from matrix.toml's
``runs_on``, overridable per backend through ``$COMPAT_MATRIX_RUNS_ON`` (JSON:
{"cuda": ["self-hosted", "a100"]}).

``manifest`` writes ``reports/run.json`` naming the cells the setup job emitted
(``$EXPECTED_MATRIX``: the ``matrix`` output), the same manifest ``nox -s matrix`` writes, so the
report and the gate judge exactly those cells (:mod:`harness.cells.verdict`): an emitted cell whose
``cell.json`` never came back is "no record", which fails both, and a cell the run did not emit
is never counted missing (a narrowed run is judged on what it ran). ``verdict`` turns
``gate.json`` into the reusable workflow's outputs (verdict pass / fail / none, regressions,
missing). Standard library and the harness.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.cells import carry, group_run, run
from harness.ci import trigger
from harness.matrix import paths, spec
from harness.matrix.errors import Refused

ALWAYS = "cpu"  # every repository has GitHub's hosted Linux runners
# events only a maintainer starts, by hand or by the schedule: the only ones GPU runners take.
# Not repository_dispatch: an upstream project's CI sends it, naming code from any pull
# request, a fork's included, so its candidates run on GitHub's hosted cpu runners only.
MAINTAINER_EVENTS = frozenset({"schedule", "workflow_dispatch"})
RUNS_ON_ENV = "COMPAT_MATRIX_RUNS_ON"
EXPECTED_ENV = "EXPECTED_MATRIX"
MAX_JOBS = 256  # GitHub's limit on the jobs one matrix may generate; past it the run never starts
# matrix.yml's cell jobs (the same steps), each fed one part of the matrix: (job, setup output)
CELL_JOBS = (("cell", "jobs"), ("cells-more", "jobs-more"))
# the tiers a workflow can be asked for: the prerelease tier runs with nox only for now (its
# failures are reported, not fatal, and matrix.yml cannot yet mark one cell job as non-fatal)
WORKFLOW_TIERS = tuple(t for t in spec.TIERS if t != "prerelease")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


class GhaError(Refused):
    """A workflow input or repository variable is unusable; the message says which and why."""


def words(text: str | None) -> list[str]:
    """Items of a list typed into a single-line field: separated by spaces, commas or newlines."""
    return [w for w in re.split(r"[\s,]+", text or "") if w]


def runner_labels(matrix: spec.Matrix, raw: str | None) -> dict[str, list[str]]:
    """Runner labels per backend: matrix.toml's ``runs_on``, then the overrides in ``raw``."""
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
            or not got
            or not all(isinstance(v, str) and _LABEL.match(v) for v in got)
        ):
            raise GhaError(f"{RUNS_ON_ENV}: {name}: expected runner labels, got {value!r}")
        labels[name] = list(got)
    return labels


def select_backends(
    requested: Iterable[str], enabled: Iterable[str], event: str | None, known: Iterable[str]
) -> tuple[list[str], dict[str, str]]:
    """The backends a run may use, and for each one dropped, why.

    cpu is always usable; another backend needs the repository to enable it and an event a
    maintainer started. ``event`` None means "not on GitHub" (a local call): no event rule."""
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
        else:
            chosen.append(name)
    return chosen, dropped


def github_matrix(
    matrix: spec.Matrix,
    tiers: list[str],
    backends: list[str] | None = None,
    *,
    cells: Sequence[str] = (),
    labels: Mapping[str, list[str]] | None = None,
    prefix: str = "",
) -> dict[str, Any]:
    """One matrix entry per cell of ``tiers`` on ``backends`` (None: all), narrowed to ``cells``
    (cell ids or session names; empty: all), its artifact named ``<prefix>reports-<session>``.
    CPU cells first, so they never queue behind GPU cells for the ``max-parallel`` slots."""
    known = {c.id for c in matrix.cells(tiers=spec.TIERS)}
    wanted = {c.removeprefix("tests-") for c in cells}
    unknown = sorted(wanted - known)
    if unknown:
        raise GhaError(f"unknown cell {unknown[0]!r}; `nox -l -t cell` lists them")
    include = []
    chosen = [
        c
        for c in matrix.cells(tiers=tiers)
        if (backends is None or c.backend.name in backends) and (not wanted or c.id in wanted)
    ]
    chosen.sort(key=lambda c: c.backend.name != ALWAYS)  # stable: matrix order otherwise
    sets: dict[Any, list[str]] = {}  # the cells one blocked run stands for (harness/cells/carry.py)
    for cell in chosen:
        sets.setdefault(carry.key(matrix, cell) or cell.id, []).append(cell.id)
    sources = {ids[0] for ids in sets.values() if len(ids) > 1}
    for cell in chosen:
        session = group_run.cell_name(cell)
        include.append(
            {
                "session": session,
                "cell": cell.id,
                "python": cell.python,
                "torch": cell.torch.pin,
                "torchao": cell.torchao.pin,
                "backend": cell.backend.name,
                "tier": cell.tier,
                "runs-on": list((labels or {}).get(cell.backend.name, cell.backend.runs_on)),
                "artifact": f"{prefix}reports-{session}",
                "timeout-minutes": -(-cell.timeout_s // 60) + 10,  # + install and upload
                # a full run's blocked run is made here (harness/cells/carry.py); "" elsewhere
                "carry-source": cell.id if cell.id in sources else "",
            }
        )
    return {"include": include}


def split(include: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The matrix entries in order, in one part per cell job of matrix.yml (:data:`CELL_JOBS`),
    none over :data:`MAX_JOBS`; the later parts are empty while the run fits the first. More
    entries than the cell jobs hold is refused, with the count and the way out."""
    room = MAX_JOBS * len(CELL_JOBS)
    if len(include) > room:
        raise GhaError(
            f"{len(include)} cells to run: GitHub runs at most {MAX_JOBS} jobs per matrix and"
            f" matrix.yml has {len(CELL_JOBS)} cell jobs ({room}); narrow the run (tiers,"
            " backends, cells) or add a cell job to matrix.yml and harness.ci.gha.CELL_JOBS"
        )
    return [
        {"include": list(include[i * MAX_JOBS : (i + 1) * MAX_JOBS])} for i in range(len(CELL_JOBS))
    ]


def parse_candidates(raw: str | None) -> list[str]:
    """The ``candidates`` input of matrix.yml: empty or ``[]`` for none; else a JSON list or
    candidates separated by spaces, commas or newlines (:func:`harness.ci.trigger.split_candidates`:
    an option-like candidate is refused)."""
    text = (raw or "").strip()
    if text in ("", "[]"):
        return []
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


def expected_cells(matrix_json: str) -> list[str]:
    """The ids of the cells the setup job emitted, from its ``matrix`` output."""
    try:
        doc = json.loads(matrix_json)
        ids = [str(e["cell"]) for e in doc["include"]]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise GhaError(
            f"{EXPECTED_ENV}: not the setup job's matrix output ({exc!r});"
            f" got {matrix_json[:200]!r}"
        ) from None
    if not ids:
        raise GhaError(f"{EXPECTED_ENV}: the setup job emitted no cell")
    return ids


def emitted_manifest(
    matrix: spec.Matrix, ids: Sequence[str], tiers: Sequence[str]
) -> dict[str, Any]:
    """The run's manifest (``reports/run.json``) naming exactly the emitted cells, so that the
    report and the gate judge those (:mod:`harness.cells.verdict`): one that sent nothing back is
    "no record", a bad cell, and a cell the run did not emit is never counted missing."""
    known = {c.id: c for c in matrix.cells(tiers=spec.TIERS)}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise GhaError(f"{EXPECTED_ENV}: unknown cell {unknown[0]!r} (not in {matrix.path})")
    chosen = tuple(known[i] for i in ids)
    backends = tuple(dict.fromkeys(c.backend.name for c in chosen))
    selection = run.Selection(tuple(tiers) or ("core",), backends, chosen)
    return run.manifest(selection, "finished")


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


def _emit(matrix: spec.Matrix, args: argparse.Namespace) -> None:
    """The setup job's outputs (the module's docstring), written to ``--github-output``."""
    requested = [w for b in args.backend or [] for w in words(b)] or list(matrix.backends)
    tiers = [t for t in words(" ".join(args.tier or [])) or ["core"]]
    bad = [t for t in tiers if t not in WORKFLOW_TIERS]
    if bad:
        why = "runs with nox only" if bad[0] in spec.TIERS else "unknown tier"
        raise GhaError(
            f"{why} {bad[0]!r}; accepted: {list(WORKFLOW_TIERS)} (the prerelease tier: "
            "nox -s matrix -- --tier prerelease, docs/matrix.md)"
        )
    chosen, dropped = select_backends(requested, words(args.enabled), args.event, matrix.backends)
    for name, why in dropped.items():
        print(f"{name}: left out: {why}", file=sys.stderr)
    labels = runner_labels(matrix, os.environ.get(RUNS_ON_ENV))
    candidates = parse_candidates(args.candidates)
    try:
        judged = trigger.judged_line(
            args.pr_repository, args.pr_number, args.pr_sha, args.server or "https://github.com"
        )
    except trigger.TriggerError as exc:
        raise GhaError(str(exc)) from None
    selection = [" ".join(tiers), " ".join(chosen), " ".join(words(args.cells))]
    prefix = artifact_prefix(args.artifact_prefix, candidates, selection)
    emitted = github_matrix(
        matrix, tiers, chosen, cells=words(args.cells), labels=labels, prefix=prefix
    )
    if not emitted["include"]:
        raise GhaError(f"no cell to run: tiers {tiers}, backends {chosen}, cells {args.cells!r}")
    parts = split(emitted["include"])
    _write_outputs(
        args.github_output,
        {
            "matrix": json.dumps(emitted),
            **{out: json.dumps(part) for (_, out), part in zip(CELL_JOBS, parts, strict=True)},
            "more": "true" if any(part["include"] for part in parts[1:]) else "false",
            "cells": json.dumps([e["cell"] for e in emitted["include"]]),
            "tiers": " ".join(dict.fromkeys(tiers)),
            "prefix": prefix,
            "candidates": json.dumps(candidates),  # what every cell installs after its pins
            "judged": judged,
            # a run that installs no candidate: the only kind whose jobs save caches (uv's,
            # the example database) that later runs restore
            "trusted": "false" if candidates else "true",
        },
    )
    print(
        f"{len(emitted['include'])} cells on {', '.join(chosen)}"
        + (f"; candidates {candidates}" if candidates else "")
        + (f"; {judged}" if judged else ""),
        file=sys.stderr,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.ci.gha")
    parser.add_argument("--matrix", default=str(spec.DEFAULT_PATH), help="matrix.toml")
    sub = parser.add_subparsers(dest="command", required=True)
    emit = sub.add_parser("matrix", help="write the setup job's outputs")
    emit.add_argument("--tier", action="append", help="tiers, space separated (default: core)")
    emit.add_argument("--backend", action="append", help="requested (default: every backend)")
    emit.add_argument("--enabled", default="", help="backends the repository enabled")
    emit.add_argument("--event", default=None, help="github.event_name")
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
    emit.add_argument("--github-output", default=None)
    manifest = sub.add_parser(
        "manifest", help="reports/run.json naming the emitted cells ($EXPECTED_MATRIX)"
    )
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
        ids = expected_cells(os.environ.get(EXPECTED_ENV, ""))
        doc = emitted_manifest(matrix, ids, words(args.tiers))
        written = run.write_manifest(args.reports, doc)
        print(f"{len(ids)} emitted cells → {written}", file=sys.stderr)
        return 0
    except GhaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
