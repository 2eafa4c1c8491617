"""What the workflows produce at each configuration they accept, read against GitHub's and Linux's
limits (:mod:`harness.matrix.limits`).

A configuration is a workflow file started by one event with one set of inputs and repository
variables (:class:`Config`; :func:`configurations` lists every one: each tier set × backend set ×
enabled backends × event × Hypothesis profile × ``full``, with and without candidates). For each,
:func:`readings` runs the setup step's planning (:func:`harness.ci.gha.setup`, the code the
workflow runs) and reads the workflow files as GitHub would expand them: how many jobs the cell
job's matrix makes, how large each job's outputs are, and, for every step of every job (the called
``matrix.yml`` included), how large each environment string (``env:``, and ``with:`` as the
action's ``INPUT_*``) and all of them together can get, and each concurrency group. An
expression's size is bounded from above: of ``a || b`` the larger, of ``a && b`` the last, of
anything else the sizes of every value it refers to summed with its quoted text (a ``toJSON`` may
double what it quotes). What a value can be comes from where it is made: the setup step's
outputs as computed, a matrix entry's longest field, an input as the configuration gives it (at
most what the setup step accepts), a repository variable or secret at GitHub's 48 KB, and the few
other step outputs at the sizes :data:`STEP_OUTPUTS` states; a reference to anything else is
refused (:class:`WidthError`), so the model cannot miss a new large value. Standard library and
PyYAML (the harness's requirements).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import yaml

from harness.ci import gha, trigger
from harness.matrix import limits, paths, spec
from harness.matrix.errors import Refused

WORKFLOWS = paths.ROOT / ".github" / "workflows"
CALLED = "matrix.yml"  # the one reusable workflow: every other one calls it
DEFAULT_REF = "refs/heads/main"  # where pushes that start ci.yml, schedules and dispatches run
RUNNER_ENV_BYTES = 16 * 1024  # what the runner itself puts in a step's environment, generously
# step outputs other than the setup step's, at most (bytes): what each step writes
STEP_OUTPUTS: Mapping[tuple[str, str], int] = {
    ("verdict", "verdict"): 4,  # pass / fail / none
    ("verdict", "regressions"): 10,
    ("verdict", "missing"): 10,
    ("found", "cells"): 10,  # nightly's history: a count
    ("found", "report"): 5,  # true / false
    ("found", "aggregate-gate"): 5,
    ("found", "artifact"): 32,  # nightly's seed: the artifact's name or nothing
    ("deploy", "page_url"): 256,
    ("uv-cache", "cache-primary-key"): 512,  # main's files before 2026-12-06 (a test reads them)
}
# github.* and job.* values: at most (bytes); anything else under github. is refused
CONTEXT_BYTES: Mapping[str, int] = {
    "github.event_name": 32,
    "github.ref": 255,  # a ref a maintainer dispatches on (push and schedule: DEFAULT_REF)
    "github.ref_protected": 5,
    "github.sha": 40,
    "github.run_id": 20,
    "github.repository": 140,
    "github.server_url": 256,
    "github.token": 256,
    "github.event.client_payload.pr.repository": 140,  # refused past owner/name by trigger.py
    "github.event.client_payload.pr.number": 10,  # refused past 10 digits by trigger.py
    "github.event.client_payload.pr.sha": 40,
    "github.event.client_payload.name": 40,  # artifact-prefix's own limit
    "github.event.pull_request.number": 10,
    "github.event.pull_request.head.sha": 40,
    "job.workflow_repository": 140,
    "job.workflow_sha": 40,
    "runner.environment": 32,
    "runner.os": 16,
}
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_REF = re.compile(
    r"(?P<kind>needs|steps)\.(?P<node>[\w-]+)\.outputs\.(?P<name>[\w-]+)"
    r"|(?P<result>needs|steps)\.[\w-]+\.(?:result|outcome|conclusion)"
    r"|matrix\.(?P<matrix>[\w-]+)"
    r"|inputs\.(?P<input>[\w-]+)"
    r"|(?P<store>vars|secrets)\.\w+"
    r"|(?P<ctx>(?:github|job|runner)(?:\.[\w-]+)+)"
    r"|(?P<fn>hashFiles)\("
)


class WidthError(Refused):
    """A workflow refers to a value whose size the model does not know."""


@dataclass(frozen=True)
class Config:
    """One way a workflow can run: the file started, its event, inputs and variables."""

    workflow: str
    event: str
    tiers: tuple[str, ...] = ("core",)
    backends: tuple[str, ...] = ("cpu",)
    enabled: tuple[str, ...] = ()
    profile: str = ""
    full: bool = False
    candidates: str = ""
    cells: str = ""
    protected: bool = True

    def describe(self) -> str:
        what = [self.workflow, self.event, "tiers=" + "+".join(self.tiers)]
        what += ["backends=" + "+".join(self.backends), "enabled=" + "+".join(self.enabled)]
        what += [f"profile={self.profile or '-'}", f"full={self.full}"]
        what += ["candidates" if self.candidates else "", "cells listed" if self.cells else ""]
        return " ".join(w for w in what if w)


@dataclass(frozen=True)
class Reading:
    """One value a configuration makes, read against one limit."""

    limit: limits.Limit
    value: int
    where: str

    @property
    def over(self) -> bool:
        return self.value > self.limit.value

    @property
    def short_of_room(self) -> bool:
        return self.value > self.limit.room


Sizes = tuple[tuple[str, int], ...]  # name -> bytes, hashable


def _sizes(found: Mapping[str, Any]) -> Sizes:
    return tuple(
        sorted((k, v if isinstance(v, int) else len(_text(v).encode())) for k, v in found.items())
    )


@dataclass(frozen=True)
class _Scope:
    """The sizes of what one workflow file's expressions refer to in one configuration."""

    outputs: Sizes  # the setup step's outputs (matrix.yml)
    inputs: Sizes  # each input the file is given
    context: Sizes  # github.*, job.*, runner.*
    matrix: Sizes = ()  # the cell job's matrix: each field's longest value

    @cached_property
    def _by_kind(self) -> dict[str, dict[str, int]]:
        return {k: dict(getattr(self, k)) for k in ("outputs", "inputs", "context", "matrix")}

    def of(self, kind: str, name: str, where: str) -> int:
        found = self._by_kind[kind]
        if name not in found:
            raise WidthError(f"{where}: the size of {name!r} is unknown to harness.ci.widths")
        return int(found[name])


def load_from(folder: Path, name: str) -> dict[str, Any]:
    """A workflow file as GitHub reads it."""
    doc = yaml.safe_load((folder / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return dict(doc)


@cache
def load(name: str) -> dict[str, Any]:
    return load_from(WORKFLOWS, name)


def expressions(text: str) -> list[str]:
    return _EXPR.findall(text)


@cache
def _split(expr: str, op: str) -> tuple[str, ...]:
    """``expr`` cut at ``op`` (``||`` or ``&&``) outside parentheses and quotes."""
    parts, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(expr):
        ch = expr[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        elif not quoted and depth == 0 and expr.startswith(op, i):
            parts.append(expr[start:i])
            start = i = i + len(op)
            continue
        i += 1
    return (*parts, expr[start:])


def _expr_size(expr: str, scope: _Scope, where: str) -> int:
    """An upper bound of what ``expr`` yields: of ``a || b`` the larger, of ``a && b`` the last
    (a falsy operand is small), of anything else every value it names summed with its quoted
    literals (a ``toJSON`` may double what it quotes)."""
    alternatives = _split(expr, "||")
    if len(alternatives) > 1:
        return max(_expr_size(a, scope, where) for a in alternatives)
    chain = _split(expr, "&&")
    if len(chain) > 1:
        return max(9, _expr_size(chain[-1], scope, where))
    bare = re.sub(r"'[^']*'", "''", expr)  # names inside quotes are text, not references
    found = sum(_ref_size(m, scope, where) for m in _REF.finditer(bare))
    found += sum(len(q) for q in re.findall(r"'([^']*)'", expr))
    return 2 * found + 2 if "toJSON(" in expr else found


def size(value: Any, scope: _Scope, where: str) -> int:
    """An upper bound of the bytes ``value`` (a workflow's string, maybe with expressions) can
    expand to in ``scope``."""
    text = _text(value)
    total = len(_EXPR.sub("", text).encode())
    return total + sum(_expr_size(e, scope, where) for e in expressions(text))


def _ref_size(m: re.Match[str], scope: _Scope, where: str) -> int:
    if m["kind"] and m["node"] in ("setup", "emit") and scope.outputs:
        return scope.of("outputs", m["name"], where)
    if m["kind"] == "needs":  # a job of a caller: its outputs are its steps' (below) or small
        return _caller_output(m["name"], where)
    if m["kind"] == "steps":
        return _step_output(m["node"], m["name"], where)
    if m["result"]:
        return 9  # success, failure, cancelled, skipped
    if m["matrix"]:
        return scope.of("matrix", m["matrix"], where)
    if m["input"]:
        return scope.of("inputs", m["input"], where)
    if m["store"]:
        return limits.VARIABLE.value
    if m["ctx"]:
        return scope.of("context", m["ctx"], where)
    return 64  # hashFiles: a hex digest


def _step_output(step: str, name: str, where: str) -> int:
    if (step, name) not in STEP_OUTPUTS:
        raise WidthError(f"{where}: the size of steps.{step}.outputs.{name} is unknown")
    return STEP_OUTPUTS[(step, name)]


def _caller_output(name: str, where: str) -> int:
    """A caller's reference to a job's output: the called workflow's (small: the verdict and
    its counts, the artifact's name) or a step output of :data:`STEP_OUTPUTS`."""
    called = load(CALLED)["on"]["workflow_call"]["outputs"]
    if name in called:
        return 64 + 80  # a verdict, a count, or `<prefix>matrix-report` (prefix ≤ 40)
    small = {k[1]: v for k, v in STEP_OUTPUTS.items()}
    if name not in small:
        raise WidthError(f"{where}: the size of the output {name!r} is unknown")
    return small[name]


def input_sizes(doc: dict[str, Any], trigger: str, given: Mapping[str, int]) -> dict[str, int]:
    """Each input of ``doc``'s ``trigger`` (workflow_dispatch or workflow_call): ``given``'s
    size, else its default's (a boolean's ``false``: 5)."""
    declared = ((doc["on"] or {}).get(trigger) or {}).get("inputs") or {}
    out = {}
    for name, spec_ in declared.items():
        default = spec_.get("default", "")
        out[name] = given.get(name, len(str(default).encode()) if default != "" else 5)
    return out


def _env_strings(
    doc: Mapping[str, Any], job: Mapping[str, Any], step: Mapping[str, Any]
) -> dict[str, Any]:
    """What one step's process gets from the file: ``env:`` at every level, and an action's
    ``with:`` inputs as INPUT_<NAME>."""
    env = {**(doc.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}
    if "uses" in step:
        env |= {f"INPUT_{k.upper()}": v for k, v in (step.get("with") or {}).items()}
    return env


@cache
def _file_readings(name: str, scope: _Scope) -> tuple[Reading, ...]:
    return file_readings(load(name), name, scope)


def scope(
    outputs: Mapping[str, str],
    inputs: Mapping[str, int],
    entries: Sequence[Mapping[str, Any]],
    context: Sizes | None = None,
) -> _Scope:
    """What a file's expressions refer to: the setup step's ``outputs``, the sizes of its
    ``inputs``, the cell job's matrix ``entries`` (each field at its longest), and github.* at
    ``context`` (default: a run on the default branch without a payload)."""
    longest = {k: max(len(_text(e[k]).encode()) for e in entries) for k in entries[0]}
    return _Scope(
        _sizes(outputs), _sizes(inputs), context or _sizes(CONTEXT_BYTES), _sizes(longest)
    )


def file_readings(doc: Mapping[str, Any], name: str, scope: _Scope) -> tuple[Reading, ...]:
    """The readings of one workflow file's jobs in ``scope``: each job's outputs, each step's
    widest environment string and all of its environment, each concurrency group, and the
    outputs of the whole run."""
    out, run_outputs = [], 0
    for job_id, job in doc["jobs"].items():
        here = f"{name}: {job_id}"
        made = job.get("outputs") or {}
        produced = sum(2 * size(v, scope, f"{here}: outputs.{k}") for k, v in made.items())
        run_outputs += produced
        out.append(Reading(limits.JOB_OUTPUTS, produced, f"{here}: its outputs"))
        for i, step in enumerate(job.get("steps") or []):
            where = f"{here}: step {step.get('name') or step.get('id') or step.get('uses') or i}"
            strings = {
                k: len(k.encode()) + 2 + size(v, scope, f"{where}: {k}")
                for k, v in _env_strings(doc, job, step).items()
            }
            if strings:
                widest = max(strings, key=lambda k: strings[k])
                out.append(Reading(limits.ENV_STRING, strings[widest], f"{where}: {widest}"))
            total = sum(strings.values()) + RUNNER_ENV_BYTES
            out.append(Reading(limits.ENV_TOTAL, total, f"{where}: all of its environment"))
    for level, holder in [("workflow", doc), *doc["jobs"].items()]:
        group = holder.get("concurrency") or {}
        if isinstance(group, dict) and "group" in group:
            value = size(group["group"], scope, f"{name}: {level}: concurrency")
            out.append(Reading(limits.CONCURRENCY_GROUP, value, f"{name}: {level}: concurrency"))
    out.append(Reading(limits.RUN_OUTPUTS, run_outputs, f"{name}: every job's outputs"))
    return tuple(out)


# the refs a run of each event is on, at most (bytes): pushes that start ci.yml, schedules and
# repository dispatches run on the default branch; a pull request on refs/pull/<n>/merge; a
# dispatch by hand on any ref a maintainer picks
REF_BYTES = {"push": len(DEFAULT_REF), "schedule": len(DEFAULT_REF)}
REF_BYTES |= {"repository_dispatch": len(DEFAULT_REF), "pull_request": len("refs/pull//merge") + 10}


def _context(config: Config) -> Sizes:
    """The sizes of github.* in ``config``: its ref, and what its dispatch's payload carries."""
    return _sizes(
        {
            **CONTEXT_BYTES,
            "github.ref": REF_BYTES.get(config.event, CONTEXT_BYTES["github.ref"]),
            "github.event.client_payload.candidates": len(config.candidates.encode()),
            "github.event.client_payload.tiers": len(" ".join(config.tiers).encode()),
            "github.event.client_payload.cells": len(config.cells.encode()),
        }
    )


def _call(config: Config) -> tuple[str | None, dict[str, Any]]:
    """The job of the started workflow that calls matrix.yml, and its ``with:``."""
    if config.workflow == CALLED:
        return None, {}
    for job_id, job in load(config.workflow)["jobs"].items():
        if str(job.get("uses", "")).endswith(f"/{CALLED}"):
            return job_id, dict(job.get("with") or {})
    raise WidthError(f"{config.workflow} does not call {CALLED}")


def request(config: Config) -> gha.Request:
    """What the setup step is given in ``config`` (the workflows pass these through)."""
    return gha.Request(
        tiers=" ".join(config.tiers),
        backends=" ".join(config.backends),
        enabled=" ".join(config.enabled),
        event=config.event,
        ref_protected="true" if config.protected else "false",
        cells=config.cells,
        candidates=config.candidates,
    )


@cache
def _matrix() -> spec.Matrix:
    return spec.load()


def _settled(req: gha.Request) -> gha.Request:
    """``req`` with the backends it may use already chosen (and no event rule left to apply):
    the same plan and outputs, so that configurations alike share one planning."""
    m = _matrix()
    try:
        untrusted = _untrusted(req.candidates)
        asked = trigger.split_words(req.backends, "backends") or list(m.backends)
    except Refused:
        return req  # the planning refuses it the same way
    chosen, _ = gha.select_backends(
        asked, gha.words(req.enabled), req.event, m.backends,
        untrusted=untrusted, protected=req.ref_protected == "true",
    )  # fmt: skip
    if not chosen:
        return req  # every backend asked for is left out: the planning refuses it
    return replace(req, backends=" ".join(chosen), enabled=" ".join(chosen), event=None)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@cache
def _untrusted(candidates: str) -> bool:
    return bool(gha.parse_candidates(candidates))


def _planned(req: gha.Request) -> gha.Setup | str:
    """The setup step's result for ``req``, or why it refuses it."""
    return _settled_plan(_settled(req))


@cache
def _settled_plan(req: gha.Request) -> gha.Setup | str:
    try:
        return gha.setup(_matrix(), req)
    except Refused as exc:
        return str(exc)


def refusal(config: Config) -> str:
    """Why the setup step refuses ``config`` (a run with no cell: every backend asked for left
    out), or ''."""
    done = _planned(request(config))
    return done if isinstance(done, str) else ""


# the most of each input the setup step accepts (bytes): more is refused before anything runs
ACCEPTED = {"candidates": gha.MAX_CANDIDATES}


def readings(config: Config) -> list[Reading]:
    """Every value ``config`` makes, each against its limit (the module's docstring); none for a
    configuration the setup step refuses (:func:`refusal`: the run stops there, saying why)."""
    done = _planned(request(config))
    if isinstance(done, str):
        return []
    sizes = {"tiers": len(" ".join(config.tiers)), "backends": len(" ".join(config.backends))}
    sizes |= {"cells": len(config.cells), "candidates": len(config.candidates.encode())}
    sizes |= {"hypothesis-profile": len(config.profile), "full": 5}
    caller_job, passed = _call(config)
    context, out = _context(config), list[Reading]()
    given: Mapping[str, int] = sizes
    if caller_job is not None:
        outer = _Scope(
            (), _sizes(input_sizes(load(config.workflow), "workflow_dispatch", sizes)), context
        )
        given = {
            k: size(v, outer, f"{config.workflow}: {caller_job}: with.{k}")
            for k, v in passed.items()
        }
        given = {k: min(v, ACCEPTED.get(k, v)) for k, v in given.items()}
        out += _file_readings(config.workflow, outer)
    jobs = done.plan["jobs"]
    inputs = input_sizes(load(CALLED), "workflow_call", given)
    out += _file_readings(CALLED, scope(done.outputs, inputs, jobs, context))
    out.append(Reading(limits.JOBS_PER_MATRIX, len(jobs), f"{CALLED}: cell: strategy.matrix"))
    out.append(
        Reading(
            limits.MATRIX_JOBS_PER_RUN, len(jobs), f"{config.workflow}: every matrix of the run"
        )
    )
    minutes = max(e["timeout-minutes"] for e in jobs)
    out.append(Reading(limits.JOB_MINUTES, minutes, f"{CALLED}: cell: timeout-minutes"))
    return out


def _choices(names: Sequence[str]) -> list[tuple[str, ...]]:
    return [c for n in range(1, len(names) + 1) for c in itertools.combinations(names, n)]


def _enabled(matrix: spec.Matrix) -> list[tuple[str, ...]]:
    others = [b for b in matrix.backends if b != gha.ALWAYS]
    return [(), *_choices(others)]


def widest_candidates() -> str:
    """Candidates at the most the setup step accepts (:data:`harness.ci.gha.MAX_CANDIDATES`)."""
    one = "safetensors @ git+https://github.com/huggingface/safetensors@" + "0" * 40
    many = " ".join([one] * (gha.MAX_CANDIDATES // (len(one) + 1)))
    return many[: gha.MAX_CANDIDATES]


def every_cell(matrix: spec.Matrix) -> str:
    """The ``cells`` input naming every cell: the longest narrowing a run accepts."""
    return " ".join(c.id for c in matrix.cells(tiers=gha.WORKFLOW_TIERS))


def configurations(matrix: spec.Matrix | None = None) -> Iterator[Config]:
    """Every configuration each workflow accepts: the events that start it, every tier set and
    backend set its inputs take, every set of enabled backends, each Hypothesis profile, ``full``
    as it passes it, and candidates (none, or as many as accepted) where it takes them."""
    m = matrix or spec.load()
    tiers, backends = _choices(gha.WORKFLOW_TIERS), _choices(list(m.backends))
    profiles, wide, full = ("", "ci", "nightly"), widest_candidates(), _nightly_full()
    listed, product = ("", every_cell(m)), itertools.product
    for on in _enabled(m):
        base = Config("", "", enabled=on)
        for event, cells in product(("push", "pull_request"), listed):
            yield replace(base, workflow="ci.yml", event=event, cells=cells)
        nightly = replace(base, workflow="nightly.yml", event="workflow_dispatch", full=full)
        yield replace(
            nightly,
            event="schedule",
            profile="nightly",
            tiers=gha.WORKFLOW_TIERS,
            backends=tuple(m.backends),
        )
        for t, b, p, cells in product(tiers, backends, profiles, listed):
            yield replace(nightly, tiers=t, backends=b, profile=p, cells=cells)
        gate = replace(base, workflow="gate.yml", event="workflow_dispatch", candidates=wide)
        for t, b, cells, protected in product(tiers, backends, listed, (True, False)):
            yield replace(gate, tiers=t, backends=b, cells=cells, protected=protected)
        for t, cells in product(tiers, listed):
            yield replace(gate, event="repository_dispatch", tiers=t, cells=cells)
        for t, b in product(tiers, backends):
            yield replace(
                base, workflow="baseline.yml", event="workflow_dispatch", tiers=t, backends=b
            )
        called = replace(base, workflow=CALLED, event="pull_request")
        for t, b, p, f, c in product(tiers, backends, profiles, (False, True), ("", wide)):
            yield replace(called, tiers=t, backends=b, profile=p, full=f, candidates=c)


def _nightly_full() -> bool:
    """What the nightly passes as ``full`` (true, or an expression: read as true, the wider)."""
    return bool(load("nightly.yml")["jobs"]["matrix"]["with"].get("full"))


def _calls(name: str) -> list[str]:
    """The reusable workflows ``name`` calls (``./.github/workflows/X.yml`` references)."""
    jobs = load(name)["jobs"].values()
    return [str(j["uses"]).rsplit("/", 1)[-1] for j in jobs if "uses" in j]


def _depth(name: str) -> int:
    return 1 + max((_depth(c) for c in _calls(name)), default=0)


def _reused(name: str) -> set[str]:
    return {c for called in _calls(name) for c in {called, *_reused(called)}}


def static_readings(matrix: spec.Matrix | None = None) -> list[Reading]:
    """What no configuration changes: each file's size, each expression's length, dispatch
    inputs, payload keys, nesting and count of reusable workflows, uploads per job, and the
    repository variables at the most they are accepted (the cells variable naming every cell,
    runner labels at their caps)."""
    m = matrix or spec.load()
    out: list[Reading] = []
    keys: set[str] = set()
    for path in sorted(WORKFLOWS.glob("*.yml")):
        text, name = path.read_text(), path.name
        out.append(Reading(limits.WORKFLOW_FILE, len(text.encode()), name))
        longest = max((len(e) + 6 for e in expressions(text)), default=0)
        out.append(Reading(limits.EXPRESSION, longest, f"{name}: its longest expression"))
        doc = load(name)
        inputs = ((doc["on"] or {}).get("workflow_dispatch") or {}).get("inputs") or {}
        out.append(Reading(limits.DISPATCH_INPUTS, len(inputs), f"{name}: workflow_dispatch"))
        keys |= set(re.findall(r"github\.event\.client_payload\.(\w+)", text))
        out.append(Reading(limits.REUSE_DEPTH, _depth(name), f"{name}: calls nested"))
        out.append(Reading(limits.REUSE_PER_FILE, len(_reused(name)), f"{name}: workflows called"))
        for job_id, job in doc["jobs"].items():
            uploads = sum(
                "upload-artifact@" in str(s.get("uses", "")) for s in job.get("steps", [])
            )
            out.append(Reading(limits.ARTIFACTS_PER_JOB, uploads, f"{name}: {job_id}: uploads"))
    out.append(
        Reading(limits.CLIENT_PAYLOAD_KEYS, len(keys), f"client_payload keys {sorted(keys)}")
    )
    cells_var = len(every_cell(m).encode())
    out.append(Reading(limits.VARIABLE, cells_var, "vars.COMPAT_MATRIX_CELLS naming every cell"))
    widest = {b: ["x" * gha.MAX_LABEL] * gha.MAX_LABELS for b in m.backends}
    runs_on = len(json.dumps(widest).encode())
    out.append(Reading(limits.VARIABLE, runs_on, "vars.COMPAT_MATRIX_RUNS_ON at its caps"))
    return out
