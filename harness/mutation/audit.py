"""``nox -s mutation -- --audit N``: does a sample of ``mutation.toml``'s equivalents hold up?

A reviewer's spot check, automated. In one cell (the plan's first, or ``--cell``):

1. HEAD's tree is copied to ``.mutation/audit/<cell>/`` and its mutants catalogued
   (:mod:`harness.mutation.tool`, mutmut's own mutation step);
2. ``N`` equivalents that apply in the cell are drawn (``random.Random(seed)``, the seed of the
   ``[audit]`` table or ``--seed``: the same entries every time for a seed), plus the control
   mutant of ``[audit]`` (a killable mutant: a fuzz that misses it proves nothing);
3. each is applied to a copy of ``compat/`` (the catalogued lines replaced by the mutant's), and
   :mod:`tests.common.differential` runs the public API on the original and on the mutant side
   by side (``examples`` inputs of the rounds that reach the mutated module), in the cell's venv;
4. ``reports/mutation-audit.json`` and a table say, per entry, "same on K inputs" or the first
   (shrunk) input on which the two differ, with both outcomes.

The audit fails (exit 1) when an equivalent differs or runs past its time, when the control is
not caught, or when a drawn entry matches no catalogued mutant. Standard library only.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from harness.matrix.errors import Refused
from harness.mutation.plan import Equivalent, Plan

REPORT_NAME: Final = "mutation-audit.json"
TIMEOUT_S: Final = 900  # one mutant's fuzz; a mutant that hangs there is not equivalent


def match(entry: Equivalent, catalog: Sequence[Mapping[str, Any]], cell: str) -> dict[str, Any]:
    """The catalogued mutant ``entry`` names (of several with the same change, the one nearest
    the entry's line); Refused when none does."""
    found = [dict(m) for m in catalog if entry.matches({**m}, cell)]
    if not found:
        raise Refused(
            f"{entry.module}:{entry.function} {entry.before.strip()!r} -> "
            f"{entry.after.strip()!r} matches no catalogued mutant in {cell}"
        )
    return min(found, key=lambda m: (abs(m["line"] - entry.line), m["line"]))


def applicable(
    plan: Plan, cell: str, catalog: Sequence[Mapping[str, Any]] | None = None
) -> list[Equivalent]:
    """The plan's equivalents that apply in ``cell`` (and, given a catalogue, match one of its
    mutants), in the plan's order."""
    pool = [e for e in plan.equivalents if not e.cells or cell in e.cells]
    if catalog is None:
        return pool
    return [e for e in pool if any(e.matches({**m}, cell) for m in catalog)]


def draw(
    plan: Plan, cell: str, n: int, seed: int, catalog: Sequence[Mapping[str, Any]] | None = None
) -> list[Equivalent]:
    """``n`` of the plan's equivalents that apply in ``cell`` (and, given a catalogue, match one
    of its mutants: a stale entry is the full run's to report), drawn with ``seed``."""
    pool = applicable(plan, cell, catalog)
    if not 1 <= n <= len(pool):
        raise Refused(f"--audit {n}: {cell} has {len(pool)} equivalents; accepted: 1..{len(pool)}")
    return random.Random(seed).sample(pool, n)


def apply(original: Path, mutant: Mapping[str, Any], dest: Path) -> None:
    """``original``'s compat/ in ``dest``/compat with the mutant's lines replaced."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(original / "compat", dest / "compat")
    path = dest / mutant["module"]
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    first, last = mutant["line"], mutant["end_line"]
    was = "".join(lines[first - 1 : last]).rstrip("\n")
    if was != mutant["before"]:
        raise Refused(f"{path}:{first}: holds {was!r}, the catalogue says {mutant['before']!r}")
    lines[first - 1 : last] = [mutant["after"] + "\n"]
    path.write_text("".join(lines), encoding="utf-8")


def fuzz(
    python: Path,
    copy: Path,
    mutant_dir: Path,
    module: str,
    *,
    examples: int,
    seed: int,
    env: Mapping[str, str],
) -> dict[str, Any]:
    """:mod:`tests.common.differential` on the original and one mutant: its verdict and seconds."""
    out = mutant_dir / "difference.json"
    cmd = [
        str(python), "-m", "tests.common.differential",
        "--original", str(copy), "--mutant", str(mutant_dir), "--module", module,
        "--examples", str(examples), "--seed", str(seed), "--out", str(out),
    ]  # fmt: skip
    start = time.monotonic()
    try:
        done = subprocess.run(
            cmd, cwd=copy, env=dict(env), capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return {"verdict": "timeout", "seconds": TIMEOUT_S}
    seconds = round(time.monotonic() - start, 1)
    if done.returncode not in (0, 1) or not out.exists():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-12:])
        return {"verdict": "error", "seconds": seconds, "error": tail}
    difference = json.loads(out.read_text(encoding="utf-8"))["difference"]
    verdict = "differs" if difference else "same"
    return {"verdict": verdict, "seconds": seconds, "difference": difference}


def audit_cell(
    plan: Plan,
    cell: str,
    python: Path,
    copy: Path,
    *,
    n: int,
    seed: int | None,
    jobs: int,
    env: Mapping[str, str],
) -> dict[str, Any]:
    """Audit ``n`` drawn equivalents and the control in ``cell``; the report (see the module)."""
    if plan.audit is None:
        raise Refused(f"{plan.path}: has no [audit] table (control, examples, seed)")
    settings = plan.audit
    seed = settings.seed if seed is None else seed
    modules = sorted({e.module for e in plan.equivalents} | {settings.control.module})
    catalog_path = copy / "audit-catalog.json"
    cmd = [str(python), "-m", "harness.mutation.tool", "catalog", "--out", str(catalog_path)]
    done = subprocess.run([*cmd, *modules], cwd=copy, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{cell}: cataloguing the mutants failed:\n{done.stderr[-2000:]}")
    catalog = json.loads(catalog_path.read_text(encoding="utf-8"))
    chosen = [("control", settings.control)] + [
        ("equivalent", e) for e in draw(plan, cell, n, seed, catalog)
    ]
    matched = applicable(plan, cell, catalog)
    stale = [e for e in applicable(plan, cell) if e not in matched]
    jobs_in = []
    for k, (role, entry) in enumerate(chosen):
        mutant = match(entry, catalog, cell)
        folder = copy / "audit" / f"{k:03d}"
        apply(copy, mutant, folder)
        jobs_in.append((role, entry, mutant, folder))
    print(
        f"[audit] {cell}: the control and {n} equivalents (seed {seed}), "
        f"{settings.examples} inputs each, {jobs} side by side",
        flush=True,
    )

    def one(item: tuple[str, Equivalent, dict[str, Any], Path]) -> dict[str, Any]:
        role, entry, mutant, folder = item
        got = fuzz(
            python, copy, folder, entry.module, examples=settings.examples, seed=seed, env=env
        )
        row = {
            "role": role,
            "id": mutant["id"],
            "module": entry.module,
            "function": entry.function,
            "line": mutant["line"],
            "before": mutant["before"].strip(),
            "after": mutant["after"].strip(),
            "why": entry.why,
            **got,
        }
        print(f"[audit] {describe(row)}", flush=True)
        return row

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        rows = list(pool.map(one, jobs_in))
    return {
        "cell": cell,
        "seed": seed,
        "examples": settings.examples,
        "drawn": n,
        "pool": len(matched),
        "stale": [f"{e.module}:{e.line} {e.function}: {e.before.strip()!r}" for e in stale],
        "rows": rows,
    }


def describe(row: Mapping[str, Any]) -> str:
    where = (
        f"{row['module']}:{row['line']} {row['function']}: {row['before']!r} -> {row['after']!r}"
    )
    verdict = row["verdict"]
    if verdict == "same":
        text = "same outcome on every input"
    elif verdict == "differs":
        diff = row["difference"]
        text = f"DIFFERS in {diff['api']} on {diff['input']}"
    else:
        text = verdict.upper() + (f": {row.get('error', '')[-300:]}" if "error" in row else "")
    return f"{row['role']:<10} {where}: {text} ({row['seconds']} s)"


def problems(report: Mapping[str, Any]) -> list[str]:
    """What makes the audit fail: an equivalent that is not one, a control not caught."""
    out = []
    for row in report["rows"]:
        if row["role"] == "control" and row["verdict"] != "differs":
            out.append(
                f"the control mutant was not caught ({row['verdict']}): the fuzz cannot be "
                f"trusted to find a difference; {describe(row)}"
            )
        if row["role"] == "equivalent" and row["verdict"] != "same":
            out.append(f"not an equivalent: {describe(row)}")
    return out


def write(report: Mapping[str, Any], reports: Path) -> Path:
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / REPORT_NAME
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def finish(report: dict[str, Any], reports: Path) -> int:
    """Write the report, print the verdicts; the exit status."""
    path = write(report, reports)
    found = problems(report)
    same = sum(1 for r in report["rows"] if r["role"] == "equivalent" and r["verdict"] == "same")
    print(
        f"[audit] {report['cell']}: {same} of {report['drawn']} equivalents behave the same on "
        f"{report['examples']} inputs each; control "
        f"{'caught' if not any('control' in p for p in found) else 'MISSED'}; {path}",
        flush=True,
    )
    for problem in found:
        print(f"[audit] {problem}", file=sys.stderr)
    return 1 if found else 0
