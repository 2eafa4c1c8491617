"""Mutation testing of compat across cells: how much of compat the suite pins down.

    nox -s mutation [-- --cell ID] [--since REF] [--sample N] [--resurvey REPORT] [--jobs N]
    python -m harness.mutation.runner run ...    (what the session runs, in nox's interpreter)
    python -m harness.mutation.runner score      (re-score reports/mutation.json with mutation.toml)

``mutation.toml`` says which compat modules are mutated in which cells (cpu cells of
matrix.toml), the goal, and the equivalent mutants. For each cell the run

1. refuses, before anything is installed, a dirty working tree (the run tests the commit, and
   the report names it), a cell the plan does not list or that is not a cpu cell of
   matrix.toml, an unreadable plan;
2. makes the cell's venv (``.nox/mutation-<cell>``: the cell's pins, the test requirements,
   ``requirements/mutation.txt``) and refuses if it does not hold exactly those versions or
   lacks the tool;
3. copies the commit (``git archive HEAD``) into ``.mutation/<cell>/`` (ignored by git; the
   working tree is never touched) and writes mutmut's configuration into the copy;
4. catalogues every mutant (:mod:`harness.mutation.tool`, in the venv), picks the mutants to run
   (all; or, incrementally, those in lines changed since ``--since`` plus a fixed, seeded sample
   of ``--sample`` others; or, for ``--resurvey``, those a full run of an ancestor did not detect
   or that lie in functions changed since, see :func:`load_base`), runs ``mutmut run`` on them
   with the Hypothesis ``ci`` profile (deterministic examples) and one thread per test process,
   and collects each mutant's verdict and the test that killed it.

The results and scores go to ``reports/mutation.json`` and a table on stdout. The score of a
module is (killed + timeout) / (mutants - equivalent): a timeout (the tests ran past mutmut's
limit of (estimated time + 1 s) x 15 x 2 CPU seconds, half of that in wall time) is a detected
mutant, as in mutmut's own score; a crash of the test process counts as killed. The run fails
when a goal module scores below the goal in a cell, a mutant was left undecided, or (a full
run) an entry of the equivalents matches no mutant or one a test kills. Standard library only.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from harness.matrix import paths, spec
from harness.matrix.errors import Refused
from harness.matrix.procs import Ran, Stop, answer, git, run_logged
from harness.mutation.plan import PLAN, Plan, load
from harness.mutation.report import TOOL, CellRun, build_report, table, write_report
from harness.mutation.resurvey import carry, change_beyond_new_tests, changed_functions

REQUIREMENTS: Final = paths.ROOT / "requirements" / "mutation.txt"
WORK: Final = paths.ROOT / ".mutation"  # the copies mutmut works in (ignored by git)
REPORT_NAME: Final = "mutation.json"  # a full run's report (committed)
INCREMENTAL_NAME: Final = "mutation-incremental.json"  # a --since run's (ignored by git)
REFUSED: Final = 2  # exit status of a refusal
RUN_TIMEOUT_S: Final = 6 * 3600


# --- refusals -----------------------------------------------------------------------------------


def check_clean(root: Path, outputs: Sequence[str] = (f"reports/{REPORT_NAME}",)) -> str:
    """The commit the run tests; Refused if the working tree differs from it (the run's own
    report, which it rewrites, aside)."""
    commit = git(root, "rev-parse", "HEAD").strip()
    status = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    dirty = [line for line in status if line.strip() and line[3:] not in outputs]
    if dirty:
        shown = ", ".join(line[3:] for line in dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        raise Refused(
            f"the working tree differs from HEAD ({len(dirty)} path(s): {shown}); the mutation run "
            "tests a commit (a copy of HEAD, named in the report): commit or stash first"
        )
    return commit


def check_installed(found: Mapping[str, str | None], want: Mapping[str, str], python: Path) -> None:
    """Refused unless ``python`` holds exactly ``want`` (dist -> version)."""
    wrong = [
        f"{d}=={v} (found {found.get(d) or 'nothing'})"
        for d, v in want.items()
        if found.get(d) != v
    ]
    if wrong:
        raise Refused(
            f"{python} does not hold the cell's pins and the tool: {', '.join(wrong)}; accepted: "
            "a venv with exactly these (nox -s mutation builds one)"
        )


def tool_pin(path: Path = REQUIREMENTS) -> str:
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith(f"{TOOL}=="):
            return line.split("==", 1)[1]
    raise Refused(f"{path} pins no {TOOL}==VERSION")


# --- choosing mutants ---------------------------------------------------------------------------


def changed_lines(root: Path, since: str) -> dict[str, set[int]]:
    """Lines of HEAD's compat/ files added or changed since the merge base of ``since``."""
    base = git(root, "merge-base", since, "HEAD").strip()
    diff = git(root, "diff", "--unified=0", "--no-color", base, "HEAD", "--", "compat/")
    out: dict[str, set[int]] = {}
    current = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and current is not None:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            if m:
                start, count = int(m.group(1)), int(m.group(2) or "1")
                out.setdefault(current, set()).update(range(start, start + count))
    return out


def select(
    mutants: Sequence[Mapping[str, Any]],
    changed: Mapping[str, set[int]] | None,
    sample: int,
    seed: int,
) -> list[str]:
    """Every mutant (``changed`` None), else those touching a changed line plus ``sample``
    others drawn with ``seed`` (the same sample for the same mutants)."""
    if changed is None:
        return [m["id"] for m in mutants]
    picked = [m["id"] for m in mutants if in_changed_lines(m, changed)]
    rest = sorted(m["id"] for m in mutants if m["id"] not in set(picked))
    extra = random.Random(seed).sample(rest, min(sample, len(rest)))
    return sorted(set(picked) | set(extra))


def in_changed_lines(mutant: Mapping[str, Any], changed: Mapping[str, set[int]]) -> bool:
    """Whether the mutant touches a line changed since the merge base."""
    lines = set(range(mutant["line"], mutant["end_line"] + 1))
    return bool(lines & changed.get(mutant["module"], set()))


# --- a resurvey: run again only what a full run of the same compat/ did not detect ------------


SHARED_HELPERS = (
    "tests/common"  # the helper package every suite imports (README: Where a test goes)
)


def judging_tests(plan: Plan) -> list[str]:
    """What the mutants are judged by: the test paths the plan runs (its arguments that are not
    options), and the shared helpers they import. A change elsewhere judges no mutant."""
    paths = [a.rstrip("/") for a in plan.tests if not a.startswith("-")]
    return [*paths, SHARED_HELPERS]


def tests_changed(root: Path, base: str, judging: Sequence[str]) -> list[str]:
    """Files under ``judging`` that changed since ``base`` other than by adding tests, each with
    what changed: an added conftest.py (it changes every test below it), a removed or renamed
    file, a changed one other than by new tests
    (:func:`harness.mutation.resurvey.tests_added_only`). New test files and new tests only add
    tests: a mutant they do not kill is still killed by the unchanged test that killed it before."""
    out = git(root, "diff", "--name-status", "--no-renames", base, "HEAD", "--", *judging)
    bad = []
    for line in out.splitlines():
        status, _, name = line.partition("\t")
        if status == "A" and Path(name).name != "conftest.py":
            continue
        if status == "A":
            bad.append(f"{name} (an added conftest)")
            continue
        why = status
        if status == "M" and name.endswith(".py"):
            found = change_beyond_new_tests(root, base, name)
            if found is None:
                continue
            why = f"M: {found}"
        bad.append(f"{name} ({why})")
    return bad


def load_base(
    path: Path, root: Path, plan: Plan, cells: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per cell, the full run in the report at ``path`` whose detected verdicts a resurvey may
    carry, with what changed in compat/ since (``harness.mutation.resurvey``); Refused unless the
    report (untrusted input) holds a full run of every cell of an ancestor of HEAD and no test
    file changed since (added ones aside). Then the mutants of every unchanged function are the
    same, and each detected one is still detected by the test that killed it."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Refused(f"--resurvey {path}: not a readable JSON report ({exc})") from None
    commit = report.get("commit") if isinstance(report, dict) else None
    if not isinstance(commit, str) or re.fullmatch(r"[0-9a-f]{40}", commit) is None:
        raise Refused(f"--resurvey {path}: no 'commit' of 40 hex digits in it; got {commit!r}")
    if answer(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=root, timeout=60) is None:
        raise Refused(f"--resurvey {path}: its commit {commit[:12]} is not an ancestor of HEAD")
    moved = changed_functions(root, commit)
    changed = tests_changed(root, commit, judging_tests(plan))
    if changed:
        raise Refused(
            f"--resurvey {path}: tests changed since {commit[:12]}: {', '.join(changed)}; a "
            "carried verdict needs the tests that gave it unchanged; run the cell in full"
        )
    bases = {}
    for cell in cells:
        found = report.get("cells", {}).get(cell) if isinstance(report.get("cells"), dict) else None
        if not isinstance(found, dict) or found.get("mode") != "full":
            raise Refused(f"--resurvey {path}: it holds no full run of {cell}")
        rows = [
            m
            for m in report.get("mutants", [])
            if isinstance(m, dict) and m.get("cell") == cell and isinstance(m.get("id"), str)
        ]
        bases[cell] = {
            "commit": commit,
            "installed": found.get("installed"),
            "seconds": found.get("seconds"),
            "rows": rows,
            "changed": moved,
        }
    return bases


# --- one cell -----------------------------------------------------------------------------------


def mutmut_config(plan: Plan, modules: Sequence[str], copy: Path) -> str:
    """The [tool.mutmut] table for the copy: only ``modules`` mutated, the plan's tests, the
    killer plugin, and every other top-level entry of the copy beside the tests."""
    also = sorted(
        p.name + ("/" if p.is_dir() else "")
        for p in copy.iterdir()
        if p.name not in ("compat", "tests", "mutants")
    )
    lines = [
        "",
        "[tool.mutmut]",
        'source_paths = ["compat/"]',
        f"only_mutate = {json.dumps(list(modules))}",
        f"pytest_add_cli_args_test_selection = {json.dumps(list(plan.tests))}",
        'pytest_add_cli_args = ["-p", "harness.mutation.tool", "-p", "no:cacheprovider"]',
        f"also_copy = {json.dumps(also)}",
        "",
    ]
    return "\n".join(lines)


def make_copy(root: Path, dest: Path) -> None:
    """HEAD's tree in ``dest`` (emptied first), through ``git archive``: never the work tree."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    blob = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD"], cwd=root, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")


class Progress:
    """mutmut's spinner, one line every ``every_s`` seconds (its frames end in ``\\r``)."""

    def __init__(self, prefix: str, every_s: float = 30.0, stream: Any = sys.stdout) -> None:
        self.prefix, self.every_s, self.stream, self.last = prefix, every_s, stream, 0.0

    def write(self, text: str, /) -> int:
        match = re.search(r"(\d+/\d+\s+\S+ \d+.*?)$", text.strip())
        now = time.monotonic()
        if match and now - self.last >= self.every_s:
            self.last = now
            self.stream.write(f"[{self.prefix}] {match.group(1)}\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def run_env() -> dict[str, str]:
    """The tests' environment: the deterministic profile, one thread per test process (torch's
    OpenMP pool does not survive mutmut's fork: forked workers hang on its lock)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPAT_MATRIX_")}
    env.update(
        CI="true",
        HYPOTHESIS_PROFILE="ci",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def _prepare_copy(plan: Plan, cell: str, root: Path) -> tuple[Path, list[str]]:
    """A copy of HEAD for the cell, configured for mutmut over the cell's modules."""
    copy = WORK / cell
    make_copy(root, copy)
    modules = plan.modules(cell, copy)
    if not modules:
        raise Refused(f"{plan.path}: the globs {list(plan.cells[cell])} of {cell} match no file")
    with (copy / "pyproject.toml").open("a", encoding="utf-8") as fh:
        fh.write(mutmut_config(plan, modules, copy))
    (copy / "killers").mkdir()
    return copy, modules


def _resurvey(
    base: Mapping[str, Any], catalog: list[dict[str, Any]], result: CellRun
) -> tuple[list[str], list[dict[str, Any]]]:
    """A resurvey's choice: the mutants to run again, and the detected ones carried from
    ``base``; says so in the result's mode."""
    carried = carry(base, catalog)
    done = {m["id"] for m in carried}
    chosen = sorted(m["id"] for m in catalog if m["id"] not in done)
    functions = sum(len(f) if f is not None else 1 for f in base["changed"].values())
    changed = (
        f" ({functions} changed function(s) or module(s) of compat/ since)"
        if base["changed"]
        else ""
    )
    result.mode = (
        f"resurvey of the full run at {base['commit'][:12]}: its {len(carried)} detected "
        f"mutants carried, the {len(chosen)} others run again{changed}"
    )
    result.base = {
        "commit": base["commit"],
        "seconds": base["seconds"],
        "carried": len(carried),
        "run_again": len(chosen),
    }
    return chosen, carried


def run_mutants(
    plan: Plan,
    cell: str,
    python: Path,
    *,
    root: Path,
    jobs: int,
    changed: Mapping[str, set[int]] | None,
    sample: int,
    seed: int,
    installed: dict[str, str | None],
    stop: Stop,
    base: Mapping[str, Any] | None = None,
) -> CellRun:
    copy, modules = _prepare_copy(plan, cell, root)
    log, killers = copy / "mutation.log", copy / "killers"
    env = run_env()
    env["COMPAT_MUTATION_KILLERS"] = str(killers)
    mode = (
        "full"
        if changed is None
        else f"changed lines since the merge base, plus {sample} sampled (seed {seed})"
    )
    result = CellRun(cell, modules, installed, mode)

    def step(name: str, cmd: list[str], echo: Any = None) -> Ran:
        ran = run_logged(cmd, log, timeout_s=RUN_TIMEOUT_S, cwd=copy, env=env, echo=echo, stop=stop)
        result.seconds[name] = round(ran.seconds, 1)
        if ran.returncode != 0:
            why = (
                "stopped"
                if ran.interrupted
                else ("timed out" if ran.timed_out else f"exit {ran.returncode}")
            )
            tail = "\n".join(ran.output.strip().splitlines()[-15:])
            raise RuntimeError(f"{cell}: {name} {why}; the log is {log}\n{tail}")
        return ran

    start = time.monotonic()
    tool = [str(python), "-m", "harness.mutation.tool"]
    step("catalog", [*tool, "catalog", "--out", "catalog.json", *modules])
    catalog = json.loads((copy / "catalog.json").read_text(encoding="utf-8"))
    carried: list[dict[str, Any]] = []
    if base is None:
        chosen = select(catalog, changed, sample, seed)
    else:
        chosen, carried = _resurvey(base, catalog, result)
    if chosen:
        names = [] if changed is None and base is None else chosen
        mutmut = [str(python), "-m", TOOL, "run", "--max-children", str(jobs), *names]
        step("mutmut", mutmut, Progress(cell))
        collect = ["collect", "--catalog", "catalog.json", "--killers", str(killers)]
        step("collect", [*tool, *collect, "--out", "results.json"])
        wanted = set(chosen)
        collected = json.loads((copy / "results.json").read_text(encoding="utf-8"))
        result.mutants = [m for m in collected if m["id"] in wanted]
        if changed is not None:  # which of the two an incremental run's mutant is
            for m in result.mutants:
                m["picked"] = "changed" if in_changed_lines(m, changed) else "sample"
    result.mutants += carried
    result.seconds["wall"] = round(time.monotonic() - start, 1)
    return result


# --- scoring and the report ---------------------------------------------------------------------


# --- the command line ---------------------------------------------------------------------------


def ensure_cell_venv(cell: spec.Cell, matrix: spec.Matrix, envdir: Path, uv: str) -> Path:
    from harness.cells.plan import install_commands
    from harness.cells.run import ensure_venv

    python = ensure_venv(uv, cell.python, envdir / f"mutation-{cell.id}")
    reqs = [str(matrix.root / r) for r in matrix.requirements_for(cell)] + [str(REQUIREMENTS)]
    for cmd in install_commands(cell, python, uv=uv, requirements=reqs):
        done = subprocess.run(
            cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
        )
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-10:])
            raise Refused(
                f"{cell.id}: installing the cell and {TOOL} failed (nothing ran):\n{tail}"
            )
    return python


def installed_in(python: Path) -> dict[str, str | None]:
    names = "torch,torchao,hypothesis,pytest," + TOOL
    out = subprocess.run(
        [str(python), str(paths.ROOT / "harness" / "cells" / "probe.py"), "--versions", names],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise Refused(f"{python} cannot report what it holds: {out.stderr.strip()[-300:]}")
    return dict(json.loads(out.stdout)["installed"])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nox -s mutation --")
    p.add_argument("--cell", action="append", help="a cell of mutation.toml (default: every one)")
    p.add_argument(
        "--since", help="only mutants in lines changed since the merge base with this ref"
    )
    p.add_argument(
        "--sample",
        type=int,
        default=0,
        help="with --since: also this many others, a fixed seeded sample",
    )
    p.add_argument("--seed", type=int, help="the sample's seed (0), the audit's (the plan's)")
    p.add_argument(
        "--resurvey",
        type=Path,
        help="a full run's report of an ancestor: carry its detected mutants of unchanged "
        "functions, run the others again (new test files only)",
    )
    p.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="mutants tested side by side"
    )
    p.add_argument(
        "--python",
        type=Path,
        help="an existing venv's interpreter (one --cell), instead of building one",
    )
    p.add_argument("--envdir", type=Path, default=paths.ROOT / ".nox")
    p.add_argument("--reports", type=Path, default=paths.DEFAULT_REPORTS)
    p.add_argument(
        "--plan", type=Path, default=PLAN, help="the mutation plan (default: mutation.toml)"
    )
    p.add_argument(
        "--root", type=Path, default=paths.ROOT, help="the git work tree whose HEAD is tested"
    )
    p.add_argument(
        "--audit",
        type=int,
        metavar="N",
        help="no mutation run: fuzz N drawn equivalents and the control against the original "
        "(harness/mutation/audit.py; --seed overrides the plan's)",
    )
    return p


def _cells_asked(plan: Plan, args: argparse.Namespace) -> list[str]:
    """The cells to run, the options checked against each other (Refused naming the clash)."""
    cells: list[str] = args.cell or list(plan.cells)
    bad = [c for c in cells if c not in plan.cells]
    if bad:
        raise Refused(
            f"unsupported cell {bad[0]!r}: mutation.toml mutates in {', '.join(plan.cells)} only"
        )
    if args.python and len(cells) != 1:
        raise Refused("--python is one cell's interpreter: give exactly one --cell with it")
    if args.sample and not args.since:
        raise Refused("--sample adds to --since's mutants; give --since REF too")
    if args.resurvey and args.since:
        raise Refused("--resurvey judges every mutant and --since only some: give one")
    if args.audit is not None:
        if args.since or args.resurvey:
            raise Refused("--audit runs no mutation run: not with --since or --resurvey")
        if len(cells) != 1 and args.cell:
            raise Refused("--audit audits one cell: give at most one --cell with it")
        cells = cells[:1]  # without --cell: the plan's first cell
    return cells


def _cell_python(
    matrix: spec.Matrix, cell_id: str, args: argparse.Namespace, pin: str
) -> tuple[Path, dict[str, str | None]]:
    """The cell's interpreter (given, or a venv built with the cell's pins) and what it has,
    refused unless it holds the cell's torch, TorchAO and the tool's pin."""
    cell = next(c for c in matrix.cells(tiers=spec.TIERS, backend="cpu") if c.id == cell_id)
    if args.python:
        python = args.python
    else:
        from harness.matrix.interpreters import uv_bin

        python = ensure_cell_venv(cell, matrix, args.envdir, uv_bin())
    installed = installed_in(python)
    want = {"torch": cell.torch.pin, "torchao": cell.torchao.pin, TOOL: pin}
    check_installed(installed, want, python)
    return python, installed


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    stop = Stop()
    try:
        matrix = spec.load()
        plan = load(args.plan, matrix)
        cells = _cells_asked(plan, args)
        commit = check_clean(args.root)
        changed = changed_lines(args.root, args.since) if args.since else None
        if changed == {} and not args.sample:
            print(f"[mutation] no line of compat/ changed since {args.since}: no mutant to judge")
            return 0
        bases = load_base(args.resurvey, args.root, plan, cells) if args.resurvey else {}
        pin = tool_pin()
        runs = []
        with stop.on_signals():
            for cell_id in cells:
                python, installed = _cell_python(matrix, cell_id, args, pin)
                if args.audit is not None:
                    return audit(plan, cell_id, python, args)
                base = bases.get(cell_id)
                if base is not None and base["installed"] != installed:
                    raise Refused(
                        f"--resurvey: the base run of {cell_id} had {base['installed']}, this "
                        f"venv has {installed}"
                    )
                print(
                    f"[mutation] {cell_id}: torch {installed['torch']}, "
                    f"TorchAO {installed['torchao']}, {TOOL} {installed[TOOL]}",
                    flush=True,
                )
                one = run_mutants(
                    plan,
                    cell_id,
                    python,
                    root=args.root,
                    jobs=args.jobs,
                    changed=changed,
                    sample=args.sample,
                    seed=args.seed or 0,
                    installed=installed,
                    stop=stop,
                    base=base,
                )
                print(
                    f"[mutation] {cell_id}: {len(one.mutants)} mutants "
                    f"in {one.seconds['wall']:.0f} s",
                    flush=True,
                )
                runs.append(one)
    except Refused as exc:
        print(f"[mutation] refused: {exc}", file=sys.stderr)
        return REFUSED
    report, problems = build_report(plan, runs, commit=commit, jobs=args.jobs)
    args.reports.mkdir(parents=True, exist_ok=True)
    write_report(args.reports / (INCREMENTAL_NAME if args.since else REPORT_NAME), report)
    print(table(report))
    for problem in problems:
        print(f"[mutation] {problem}", file=sys.stderr)
    return 1 if problems else 0


def audit(plan: Plan, cell: str, python: Path, args: argparse.Namespace) -> int:
    """``--audit N`` in one cell (harness/mutation/audit.py): HEAD copied, N equivalents fuzzed."""
    from harness.mutation import audit as mutation_audit

    copy = WORK / "audit" / cell
    make_copy(args.root, copy)
    modules = sorted({e.module for e in plan.equivalents})
    with (copy / "pyproject.toml").open("a", encoding="utf-8") as fh:
        fh.write(mutmut_config(plan, modules, copy))  # the catalogue reads mutmut's settings
    report = mutation_audit.audit_cell(
        plan, cell, python, copy, n=args.audit, seed=args.seed, jobs=args.jobs, env=run_env()
    )
    report["commit"] = git(args.root, "rev-parse", "HEAD")
    return mutation_audit.finish(report, args.reports)


def score(argv: Sequence[str]) -> int:
    """Re-classify a report's mutants with the current mutation.toml and print the table."""
    score_parser = argparse.ArgumentParser(prog="python -m harness.mutation.runner score")
    score_parser.add_argument(
        "--from", dest="source", type=Path, default=paths.DEFAULT_REPORTS / REPORT_NAME
    )
    score_parser.add_argument(
        "--write", action="store_true", help="write the re-scored report back"
    )
    score_parser.add_argument("--plan", type=Path, default=PLAN)
    args = score_parser.parse_args(list(argv))
    plan = load(args.plan)
    old = json.loads(args.source.read_text(encoding="utf-8"))
    runs = []
    for cell, info in old["cells"].items():
        mine = [m for m in old["mutants"] if m["cell"] == cell]
        runs.append(
            CellRun(
                cell,
                info["modules"],
                info["installed"],
                info["mode"],
                mutants=mine,
                seconds=info["seconds"],
                base=info.get("base"),  # a resurvey keeps naming the full run it builds on
            )
        )
    report, problems = build_report(plan, runs, commit=old["commit"], jobs=old["machine"]["jobs"])
    report["generated"] = old["generated"]
    if args.write:
        write_report(args.source, report)
    print(table(report))
    for problem in problems:
        print(f"[mutation] {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["score"]:
        return score(argv[1:])
    if argv[:1] == ["run"]:
        argv = argv[1:]
    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
