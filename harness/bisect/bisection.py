"""Bisect a package's releases against selected tests in one matrix cell.

    nox -s bisect -- --package safetensors --from 0.4.5 --to 0.8.0 \\
        --test tests/compat/sharing/test_sharing.py::test_save_round_trip_is_bit_identical \\
        [--cell ID] [-k EXPR]

The two ends must give different outcomes for the selected tests. The search finds the first
release after ``--from`` that behaves like ``--to`` and says whether it broke the tests (a
regression) or fixed them (an upstream fix: a tracker or a workaround can go).

- Releases come from the configured index (``harness.matrix.releases``: yanked ones left out,
  pre-releases only with ``--pre``).
- The cell's venv gets the cell's pins and test requirements first; that environment is frozen,
  and before every probe the venv is synced back to it, then the probe release is installed
  over it (for torch or TorchAO this replaces the cell's own pin). At the end the venv is synced
  back once more, so it is left with exactly the cell's own pins.
- Each probe runs only the selected tests, without the matrix's expected failures (a break reads
  as a failure, whichever cell it is in) and without reruns, with the deterministic Hypothesis
  profile unless ``HYPOTHESIS_PROFILE`` says otherwise.
- A probe that does not install (or whose torch does not import) is skipped and the search goes
  on with its neighbours, like ``git bisect skip``; an answer bounded by skipped probes names
  every release it may be ("0.5.1 or 0.5.2").
- Every probe goes to ``reports/bisect.json`` and a Markdown table is printed at the end.

Standard library and ``packaging`` only: this module runs in the nox process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from packaging.version import Version

from harness.cells.cell import run_cell, tail
from harness.cells.evidence import read_reportlog
from harness.cells.plan import PROBE, cell_pytest_args, install_commands
from harness.cells.plan import CellPlan as _CellPlan
from harness.cells.status import RAN_STATUSES
from harness.matrix import interpreters
from harness.matrix import releases as rel
from harness.matrix.errors import Refused
from harness.matrix.interpreters import uv_bin
from harness.matrix.paths import DEFAULT_REPORTS as REPORTS
from harness.matrix.paths import ROOT
from harness.matrix.procs import run_logged
from harness.matrix.spec import TIERS, Cell, Matrix
from harness.matrix.spec import load as load_matrix

FAILING = frozenset({"failed", "error", "crashed", "timeout"})
LOG_TAIL_LINES = 25
OLD, NEW = "old", "new"  # like --from / like --to


@dataclass(frozen=True)
class Request:
    package: str
    low: str  # --from
    high: str  # --to
    tests: tuple[str, ...]  # --test, as given (paths relative to the working directory)
    keyword: str | None = None  # -k
    pre: bool = False
    index_args: tuple[str, ...] = ()  # extra index options for the listing and the probes


@dataclass
class Target:
    """Where the probes run: a cell of the matrix and a venv to run it in."""

    cell: Cell
    python: Path  # the venv's interpreter
    uv: str
    reports: Path = REPORTS
    rootdir: Path = ROOT  # pytest's rootdir: node ids are relative to it
    probe_script: Path = PROBE
    setup: list[list[str]] = field(default_factory=list)  # puts the cell's pins into the venv
    base_index_args: list[str] = field(default_factory=list)  # the index options of ``setup``
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Probe:
    version: str
    role: str  # from, to, probe
    order: int  # 1, 2, ...: when it ran
    status: str = ""  # the cell status of the probe run (install-error: skipped)
    outcome: dict[str, str] = field(default_factory=dict)  # test id -> outcome
    like: str | None = None  # from, to, neither; None: skipped
    seconds: float = 0.0
    log_tail: str = ""  # the install log's tail when it did not install
    reason: str = ""

    @property
    def skipped(self) -> bool:
        return self.status == "install-error"


def target_for(matrix: Matrix, cell: Cell, python: Path, *, uv: str, reports: Path) -> Target:
    """The cell's own install (pins + test requirements) as the setup of a bisection venv."""
    requirements = [str(ROOT / r) for r in matrix.requirements_for(cell)]
    index = cell.backend.index_url()
    return Target(
        cell,
        python,
        uv,
        reports=reports,
        setup=install_commands(cell, python, uv=uv, requirements=requirements),
        base_index_args=["--index", index] if index else [],
    )


def find_cell(matrix: Matrix, cell_id: str | None) -> Cell:
    """The cell named ``cell_id`` (any tier), or the default cell; refuses an unknown id."""
    if cell_id is None:
        return matrix.default()
    cells = matrix.cells(tiers=TIERS)
    for cell in cells:
        if cell.id == cell_id:
            return cell
    shown = ", ".join(c.id for c in cells[:12])
    more = (
        f" and {len(cells) - 12} more (python -m harness.matrix.spec lists them)"
        if len(cells) > 12
        else ""
    )
    raise Refused(f"--cell {cell_id!r} is not a cell of {matrix.path.name}; cells: {shown}{more}")


def same_python(cell: Cell, python: Path) -> None:
    """Refuse to probe a cell in a venv of another Python: a py3.10 cell's verdicts come from
    Python 3.10, and a probe on 3.11 would bisect a different cell."""
    found = interpreters.version_of(python)
    if found != cell.python:
        raise Refused(
            f"{cell.id} runs on Python {cell.python}, but {python} is Python {found}: "
            f"bisect it in a Python {cell.python} venv (`python -m harness.bisect.bisection "
            "--python VENV/bin/python ...`; `nox -s bisect` probes in the default Python's venv, "
            "for the cells whose id names no Python)"
        )


# --- the search, on its own ------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    first: int  # index of the first release known to behave like --to (len(versions): --to)
    candidates: tuple[int, ...]  # indexes the first such release may be (skipped ones, first)
    last_old: int  # index of the last release known to behave like --from (-1: --from)


def search(count: int, classify: Callable[[int], str | None]) -> Answer:
    """Binary search over ``count`` releases strictly between the ends (index -1 behaves like
    --from, index ``count`` like --to). ``classify(i)`` says OLD or NEW, or None for a release
    that could not be probed: it is set aside and the nearest unprobed neighbour of the middle
    is tried instead. Assuming one change, the first NEW release is among ``candidates``; with no
    skipped release in between it is exactly ``first``. Each release is probed at most once."""
    low, high = -1, count
    skipped: set[int] = set()
    while True:
        open_ = [i for i in range(low + 1, high) if i not in skipped]
        if not open_:
            break
        middle = (low + high) / 2
        i = min(open_, key=lambda j: (abs(j - middle), j))
        kind = classify(i)
        if kind is None:
            skipped.add(i)
        elif kind == NEW:
            high = i
        else:
            low = i
    return Answer(high, (*range(low + 1, high), high), low)


# --- one probe -------------------------------------------------------------------------------


def selection_ids(target: Target, tests: Sequence[str]) -> list[str]:
    """Each ``--test`` as a node id relative to pytest's rootdir (a relative path is taken from the
    repository root, where the probes run pytest)."""
    out = []
    for test in tests:
        path, sep, rest = test.partition("::")
        absolute = (ROOT / path).resolve()
        try:
            rel_path = absolute.relative_to(target.rootdir.resolve()).as_posix()
        except ValueError:
            rel_path = path
        out.append(rel_path + sep + rest)
    return out


def selects(selection: str, nodeid: str) -> bool:
    """Whether ``nodeid`` (a test, or a module that failed to collect) is in ``selection``."""
    if nodeid == selection:
        return True
    return any(nodeid.startswith(selection + tail_) for tail_ in ("::", "[", "/"))


def outcomes(outdir: Path) -> dict[str, str]:
    """Each selected test's final outcome; a tracker that XPASSed strictly is ``xpassed``."""
    log = read_reportlog(outdir / "log.jsonl")
    found = dict(log.outcomes)
    for nodeid, reason in log.trackers.items():
        if reason.startswith("fixed: "):
            found[nodeid] = "xpassed"
    return dict(sorted(found.items()))


def probe_dir(target: Target, package: str, version: str) -> Path:
    return target.reports / "bisect-probes" / f"{package}-{version}"


def requirement(package: str, version: str) -> str:
    return f"{package}=={version}"


def run_probe(
    request: Request,
    target: Target,
    snapshot: Path,
    version: str,
    role: str,
    order: int,
    echo: TextIO | None,
) -> Probe:
    """Sync the venv to the cell's pins, install ``package==version`` over them, run the tests."""
    start = time.monotonic()
    outdir = probe_dir(target, request.package, version)
    restore(target, snapshot, snapshot.parent / "sync.log")
    uv, py = target.uv, str(target.python)
    install = [uv, "pip", "install", "--python", py]
    install += merge_options(target.base_index_args, request.index_args)
    install.append(requirement(request.package, version))
    pytest_args = cell_pytest_args(target.cell, outdir, tests=list(request.tests))
    if request.keyword is not None:
        pytest_args += ["-k", request.keyword]
    env = {**dict(target.cell.backend.env), **target.env}
    env.setdefault("HYPOTHESIS_PROFILE", os.environ.get("HYPOTHESIS_PROFILE") or "ci")
    plan = _CellPlan(
        target.cell,
        target.python,
        outdir,
        [install],
        pytest_args,
        xfails=[],  # raw outcomes: the matrix's expectations are about the cell's own pins
        probe_script=target.probe_script,
        env=env,
        cwd=target.rootdir,
        candidates=[requirement(request.package, version)],
    )
    result = run_cell(plan, echo=None)
    probe = Probe(version, role, order, status=result.status, reason=result.reason)
    if result.status == "install-error":
        probe.log_tail = tail(result.log_tail, LOG_TAIL_LINES)
    elif result.status not in ("skipped",):
        probe.outcome = outcomes(outdir)
        if result.status not in RAN_STATUSES or not probe.outcome:
            # the run did not end in a trustworthy result (crashed, timeout, inconsistent...)
            probe.outcome["<run>"] = result.status
            probe.log_tail = tail(result.log_tail, LOG_TAIL_LINES)
    probe.seconds = round(time.monotonic() - start, 2)
    if echo is not None:
        shown = summarize_outcome(probe.outcome) if probe.outcome else probe.status
        echo.write(f"[bisect] {request.package} {version} ({role}): {shown}; {probe.seconds} s\n")
        echo.flush()
    return probe


# --- the venv: the cell's own pins, frozen and restored --------------------------------------


def freeze(target: Target) -> str:
    done = subprocess.run(
        [target.uv, "pip", "freeze", "--python", str(target.python)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if done.returncode != 0:
        raise Refused(f"`uv pip freeze` failed in {target.python}: {done.stderr.strip()}")
    return done.stdout


def prepare(target: Target, workdir: Path, echo: TextIO | None) -> Path:
    """Install the cell's pins into the venv and freeze that environment (the snapshot)."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "setup.log"
    log.write_text("")
    for cmd in target.setup:
        ran = run_logged(cmd, log, timeout_s=target.cell.timeout_s, cwd=ROOT, echo=None)
        if ran.returncode != 0:
            raise Refused(
                f"the cell {target.cell.id}'s own pins do not install:\n{tail(ran.output, 15)}"
            )
    snapshot = workdir / "cell-pins.txt"
    snapshot.write_text(freeze(target))
    if echo is not None:
        echo.write(f"[bisect] venv {target.python.parent.parent} holds {target.cell.id}'s pins\n")
    return snapshot


def restore(target: Target, snapshot: Path, log: Path) -> None:
    """Sync the venv back to the snapshot: exactly the cell's own pins, nothing else."""
    if not snapshot.read_text().strip():
        return  # nothing was installed by the setup: nothing to go back to
    cmd = [target.uv, "pip", "sync", "--python", str(target.python), *target.base_index_args]
    ran = run_logged(
        [*cmd, str(snapshot)], log, timeout_s=target.cell.timeout_s, cwd=ROOT, echo=None
    )
    if ran.returncode != 0:
        raise RuntimeError(f"could not restore the cell's pins:\n{tail(ran.output, 15)}")


# --- checks of the ends ----------------------------------------------------------------------


def check_end(request: Request, target: Target, probe: Probe, selection: list[str]) -> None:
    flag = "--from" if probe.role == "from" else "--to"
    where = f"cell {target.cell.id}"
    if probe.status == "skipped":
        raise Refused(f"{where} cannot run on this machine: {probe.reason}")
    if probe.skipped:
        raise Refused(
            f"{flag} {request.package}=={probe.version} does not install in {where}:\n"
            f"{probe.log_tail}"
        )
    said = [
        line.strip()
        for line in (probe_dir(target, request.package, probe.version) / "output.log")
        .read_text(errors="replace")
        .splitlines()
        if "not found:" in line or "no tests ran" in line or "deselected" in line
    ]
    keyword = f" with -k {request.keyword!r}" if request.keyword is not None else ""
    if probe.outcome.get("<run>") == "error" or not probe.outcome:
        names = ", ".join(request.tests)
        detail = ("; pytest says: " + " / ".join(said[-3:])) if said else ""
        raise Refused(f"--test {names}{keyword} collects nothing in {where}{detail}")
    for test, sel in zip(request.tests, selection, strict=True):
        if not any(selects(sel, nodeid) for nodeid in probe.outcome):
            raise Refused(f"--test {test}{keyword} collects nothing in {where}")


# --- the verdict -----------------------------------------------------------------------------


def summarize_outcome(outcome: Mapping[str, str]) -> str:
    counts = Counter(outcome.values())
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no tests"


def verdict(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """broke (a test fails after and did not before), fixed (the reverse, or a tracker XPASSes:
    an upstream fix), changed (both, or outcomes moved without anything failing)."""
    tests = set(before) | set(after)
    worse = {t for t in tests if after.get(t) in FAILING and before.get(t) not in FAILING}
    better = {t for t in tests if before.get(t) in FAILING and after.get(t) not in FAILING}
    better |= {t for t in tests if after.get(t) == "xpassed" and before.get(t) == "xfailed"}
    if worse and not better:
        return "broke"
    if better and not worse:
        return "fixed"
    return "changed"


def differences(before: Mapping[str, str], after: Mapping[str, str]) -> list[dict[str, str]]:
    return [
        {"test": t, "before": before.get(t, "absent"), "after": after.get(t, "absent")}
        for t in sorted(set(before) | set(after))
        if before.get(t) != after.get(t)
    ]


# --- the bisection ---------------------------------------------------------------------------


def _ends(request: Request, listing: rel.Releases) -> tuple[Version, Version]:
    """``--from`` and ``--to`` as releases of the listing, the older first (Refused otherwise,
    naming the nearest releases)."""
    ends = []
    for flag, text in (("--from", request.low), ("--to", request.high)):
        found = listing.find(text)
        if found is None:
            near = ", ".join(listing.nearest(text)) or "none"
            kind, why = (
                ("release", "") if request.pre else ("final release", "pre-releases need --pre; ")
            )
            raise Refused(
                f"{flag} {text} is not a {kind} of {request.package} on the configured index "
                f"({why}yanked releases are left out); nearest: {near}"
            )
        ends.append(found)
    low, high = ends
    if not low < high:
        raise Refused(
            f"--from {request.low} is not older than --to {request.high}: give the older release "
            "as --from (the search finds the first release after it that behaves like --to)"
        )
    return low, high


def _result(
    request: Request,
    target: Target,
    ends: tuple[Version, Version],
    between: Sequence[Version],
    answer: Answer,
    probes: list[Probe],
) -> dict[str, Any]:
    """The bisection's record (``reports/bisect.json``), less the restore and the time."""
    low, high = ends
    first_end = next(p for p in probes if p.role == "from")
    last_end = next(p for p in probes if p.role == "to")
    everything = [*between, high]
    candidates = [str(everything[i]) for i in answer.candidates]
    last_old = str(low if answer.last_old < 0 else between[answer.last_old])
    return {
        "schema": 1,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "package": request.package,
        "from": str(low),
        "to": str(high),
        "cell": target.cell.id,
        "tests": list(request.tests),
        "keyword": request.keyword,
        "pre": request.pre,
        "releases": [str(v) for v in [low, *between, high]],
        "answer": {
            "first": candidates[-1],
            "candidates": candidates,
            "last_like_from": last_old,
            "verdict": verdict(first_end.outcome, last_end.outcome),
            "changes": differences(first_end.outcome, last_end.outcome),
            "neither": [p.version for p in probes if p.like == "neither"],
        },
        "probes": [asdict(p) for p in sorted(probes, key=lambda p: Version(p.version))],
    }


def bisect(request: Request, target: Target, echo: TextIO | None = sys.stdout) -> dict[str, Any]:
    """Run the bisection; refusals raise Refused before any result is claimed."""
    started = time.monotonic()
    try:
        listing = rel.list_releases(
            request.package,
            python=target.python,
            uv=target.uv,
            index_args=merge_options(listing_index(target), request.index_args),
            pre=request.pre,
        )
    except rel.ReleaseError as exc:
        raise Refused(str(exc)) from None
    low, high = _ends(request, listing)
    between = listing.between(low, high)
    workdir = target.reports / "bisect-probes"
    selection = selection_ids(target, request.tests)
    snapshot = prepare(target, workdir, echo)
    probes: list[Probe] = []
    restored = False
    try:

        def probe(version: Version, role: str) -> Probe:
            order = len(probes) + 1
            done = run_probe(request, target, snapshot, str(version), role, order=order, echo=echo)
            probes.append(done)
            return done

        first_end = probe(low, "from")
        check_end(request, target, first_end, selection)
        first_end.like = "from"
        last_end = probe(high, "to")
        check_end(request, target, last_end, selection)
        last_end.like = "to"
        if first_end.outcome == last_end.outcome:
            raise Refused(
                f"both ends give the same outcome for the selected tests in {target.cell.id}: "
                f"{summarize_outcome(first_end.outcome)} "
                f"({json.dumps(first_end.outcome)}); nothing to bisect"
            )

        def classify(i: int) -> str | None:
            done = probe(between[i], "probe")
            if done.skipped:
                return None
            if done.outcome == last_end.outcome:
                done.like = "to"
                return NEW
            done.like = "from" if done.outcome == first_end.outcome else "neither"
            return OLD

        answer = search(len(between), classify)
    finally:
        restore(target, snapshot, workdir / "restore.log")
        restored = freeze(target) == snapshot.read_text()
    return _result(request, target, (low, high), between, answer, probes) | {
        "restored": restored,
        "seconds": round(time.monotonic() - started, 2),
    }


FLAGS_WITHOUT_VALUE = frozenset({"--no-index"})


def merge_options(*groups: Sequence[str]) -> list[str]:
    """Index options of several sources in order, each option given once (``--no-index`` twice
    is an error for uv)."""
    seen: set[tuple[str, ...]] = set()
    out: list[str] = []
    for group in groups:
        args = list(group)
        while args:
            flag = args.pop(0)
            option = (flag,) if flag in FLAGS_WITHOUT_VALUE or not args else (flag, args.pop(0))
            if option not in seen:
                seen.add(option)
                out += option
    return out


def listing_index(target: Target) -> list[str]:
    """The setup's index options for pip: uv's ``--index URL`` is pip's ``--extra-index-url``;
    the pip-compatible ones (``--index-url``, ``--find-links``, ``--no-index``) pass as given."""
    args, out = list(target.base_index_args), []
    while args:
        arg = args.pop(0)
        out.append("--extra-index-url" if arg == "--index" else arg)
    return out


# --- output ----------------------------------------------------------------------------------


def headline(result: dict[str, Any]) -> str:
    answer, pkg = result["answer"], result["package"]
    which = " or ".join(answer["candidates"])
    was = answer["last_like_from"]
    action = {
        "broke": "broke the selected tests (a regression)",
        "fixed": "fixed the selected tests (an upstream fix: a tracker or workaround can go)",
        "changed": "changed the selected tests' outcomes",
    }[answer["verdict"]]
    bounded = (
        f" — the releases in between could not be probed, so it is one of {which}"
        if len(answer["candidates"]) > 1
        else ""
    )
    if was == result["from"]:
        before = f"the release before it is --from {was} itself"
    else:
        before = f"{was} is the last release that behaves like --from {result['from']}"
    return f"{pkg} {which} {action}; {before}{bounded}"


def render_markdown(result: dict[str, Any]) -> str:
    answer = result["answer"]
    lines = [
        f"## bisect: {result['package']} {result['from']} → {result['to']} in {result['cell']}",
        "",
        f"**{headline(result)}**",
        "",
        "Tests: " + ", ".join(f"`{t}`" for t in result["tests"]),
    ]
    if result["keyword"] is not None:
        lines[-1] += f" with `-k {result['keyword']}`"
    if answer["changes"]:
        lines += ["", "| test | " + result["from"] + " | " + result["to"] + " |", "|---|---|---|"]
        lines += [f"| `{c['test']}` | {c['before']} | {c['after']} |" for c in answer["changes"]]
    if answer["neither"]:
        lines += [
            "",
            "Behaved like neither end (counted with --from): " + ", ".join(answer["neither"]),
        ]
    probed = {p["version"]: p for p in result["probes"]}
    lines += ["", "| release | probe | outcome | behaves like | seconds |", "|---|---|---|---|---|"]
    for version in result["releases"]:
        p = probed.get(version)
        if p is None:
            lines.append(f"| {version} | — | not probed | | |")
            continue
        if p["status"] == "install-error":
            shown = "did not install (skipped)"
        else:
            shown = summarize_outcome(p["outcome"])
        like = {"from": f"{result['from']} (from)", "to": f"{result['to']} (to)"}.get(
            p["like"] or "", p["like"] or "—"
        )
        role = p["role"] if p["role"] != "probe" else f"#{p['order']}"
        lines.append(f"| {version} | {role} | {shown} | {like} | {p['seconds']} |")
    probes = len(result["probes"])
    lines += [
        "",
        f"{probes} probes of {len(result['releases'])} releases in {result['seconds']} s; "
        f"venv restored to the cell's pins: {'yes' if result['restored'] else 'NO'}",
    ]
    for p in result["probes"]:
        if p["status"] == "install-error" and p["log_tail"]:
            lines += ["", f"<details><summary>{p['version']}: install log</summary>", "", "```"]
            lines += [p["log_tail"], "```", "</details>"]
    return "\n".join(lines) + "\n"


def parse_args(
    argv: Sequence[str], prog: str = "python -m harness.bisect.bisection"
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", required=True, help="a peer or axis package: safetensors")
    parser.add_argument("--from", dest="low", required=True, help="the older end: 0.4.5")
    parser.add_argument("--to", dest="high", required=True, help="the newer end: 0.8.0")
    parser.add_argument(
        "--test",
        action="append",
        required=True,
        help="a pytest node id, file or folder (repeatable)",
    )
    parser.add_argument("-k", dest="keyword", help="a pytest -k expression over the tests")
    parser.add_argument("--cell", help="a cell id of matrix.toml (default: the default cell)")
    parser.add_argument("--pre", action="store_true", help="probe pre-releases too")
    parser.add_argument("--python", type=Path, help="the venv to probe in (nox passes its own)")
    parser.add_argument("--reports", type=Path, default=REPORTS)
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrix.toml")
    parser.add_argument(
        "--index-url", action="append", default=[], help="listing and probes: pip/uv option"
    )
    parser.add_argument("--extra-index-url", action="append", default=[])
    parser.add_argument("--find-links", action="append", default=[])
    parser.add_argument("--no-index", action="store_true")
    args = parser.parse_args(list(argv))
    if args.python is None:
        parser.error("--python: the venv interpreter to probe in is required")
    return args


def index_args(args: argparse.Namespace) -> tuple[str, ...]:
    out: list[str] = []
    for flag in ("index_url", "extra_index_url", "find_links"):
        for value in getattr(args, flag):
            out += [f"--{flag.replace('_', '-')}", value]
    if args.no_index:
        out.append("--no-index")
    return tuple(out)


def main(argv: Sequence[str] | None = None, *, echo: TextIO = sys.stdout) -> int:
    """0: an answer; 2: refused (the message says why)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    request = Request(
        args.package,
        args.low,
        args.high,
        tuple(args.test),
        keyword=args.keyword,
        pre=args.pre,
        index_args=index_args(args),
    )
    try:
        matrix = load_matrix(args.matrix)
        cell = find_cell(matrix, args.cell)
        same_python(cell, args.python)
        target = target_for(matrix, cell, args.python, uv=uv_bin(), reports=args.reports)
        result = bisect(request, target, echo)
    except Refused as exc:
        echo.write(f"bisect refused: {exc}\n")
        return 2
    args.reports.mkdir(parents=True, exist_ok=True)
    out = args.reports / "bisect.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    echo.write("\n" + render_markdown(result) + f"\n→ {out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
