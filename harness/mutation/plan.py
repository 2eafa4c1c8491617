"""The mutation plan (``mutation.toml``): cells, modules, the goal, the equivalent mutants.

:func:`load` checks every field and names the bad one with its value; :class:`Equivalent`
matches a mutant by module, function and its change (the source lines before and after,
whitespace at the ends of lines aside), wherever the line moved. Standard library only.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness.matrix import paths, spec
from harness.matrix.errors import Refused

PLAN: Final = paths.ROOT / "mutation.toml"


@dataclass(frozen=True)
class Equivalent:
    module: str
    function: str
    line: int
    before: str
    after: str
    why: str
    cells: tuple[str, ...] = ()  # empty: every cell

    def matches(self, mutant: Mapping[str, Any], cell: str) -> bool:
        return (
            (not self.cells or cell in self.cells)
            and mutant["module"] == self.module
            and mutant["function"] == self.function
            and _norm(mutant["before"]) == _norm(self.before)
            and _norm(mutant["after"]) == _norm(self.after)
        )


@dataclass(frozen=True)
class Audit:
    """``nox -s mutation -- --audit N``'s settings: the control mutant (a killable one the fuzz
    must catch, matched like an equivalent), inputs per mutant and Hypothesis' seed."""

    control: Equivalent
    examples: int
    seed: int


@dataclass(frozen=True)
class Plan:
    path: Path
    goal: float
    goal_modules: tuple[str, ...]
    tests: tuple[str, ...]
    cells: dict[str, tuple[str, ...]]  # cell id -> module globs
    equivalents: tuple[Equivalent, ...] = field(default=())
    audit: Audit | None = None

    def modules(self, cell: str, root: Path) -> list[str]:
        found = sorted(
            str(p.relative_to(root))
            for pattern in self.cells[cell]
            for p in root.glob(pattern)
            if p.is_file()
        )
        return sorted(set(found))


def _norm(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines())


def _fail(path: Path, where: str, problem: str) -> Refused:
    return Refused(f"{path}: {where} {problem}")


def load(path: Path = PLAN, matrix: spec.Matrix | None = None) -> Plan:
    """Read and check ``mutation.toml``; every problem names the field and the bad value."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise Refused(f"{path}: cannot read the mutation plan ({exc})") from None
    unknown = set(doc) - {"run", "cell", "equivalent", "audit"}
    if unknown:
        raise _fail(
            path,
            "top level",
            f"has unknown tables {sorted(unknown)}; accepted: run, cell, equivalent, audit",
        )
    run = doc.get("run", {})
    goal = run.get("goal")
    if not isinstance(goal, float | int) or isinstance(goal, bool) or not 0 < goal <= 1:
        raise _fail(path, "run.goal", f"{goal!r} is not a number in (0, 1]")
    goal_modules = run.get("goal_modules", [])
    tests = run.get("tests", [])
    for name, value in (("run.goal_modules", goal_modules), ("run.tests", tests)):
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise _fail(path, name, f"{value!r} is not a non-empty list of strings")
    matrix = matrix or spec.load()
    cpu = {c.id for c in matrix.cells(tiers=spec.TIERS, backend="cpu")}
    cells: dict[str, tuple[str, ...]] = {}
    for i, entry in enumerate(doc.get("cell", [])):
        cell, modules = entry.get("cell"), entry.get("modules")
        if cell not in cpu:
            raise _fail(
                path,
                f"cell[{i}].cell",
                f"{cell!r} is not a cpu cell of matrix.toml; accepted: {', '.join(sorted(cpu))}",
            )
        if (
            not isinstance(modules, list)
            or not modules
            or not all(isinstance(m, str) and m.startswith("compat/") for m in modules)
        ):
            raise _fail(path, f"cell[{i}].modules", f"{modules!r} is not a list of compat/ globs")
        if cell in cells:
            raise _fail(path, f"cell[{i}].cell", f"{cell!r} is listed twice")
        cells[cell] = tuple(modules)
    if not cells:
        raise _fail(path, "cell", "is empty: no cell to mutate in")
    equivalents = []
    fields = {"module", "function", "line", "before", "after", "why", "cells"}
    for i, entry in enumerate(doc.get("equivalent", [])):
        where = f"equivalent[{i}]"
        extra = set(entry) - fields
        missing = fields - {"cells"} - set(entry)
        if extra or missing:
            raise _fail(
                path,
                where,
                f"has fields {sorted(entry)} (missing {sorted(missing)}, unknown {sorted(extra)})",
            )
        texts = [entry[k] for k in ("module", "function", "before", "after", "why")]
        if not all(isinstance(t, str) and t.strip() for t in texts):
            raise _fail(path, where, "needs non-empty strings module, function, before, after, why")
        if not isinstance(entry["line"], int) or entry["line"] < 1:
            raise _fail(path, f"{where}.line", f"{entry['line']!r} is not a line number")
        only = entry.get("cells", [])
        if not isinstance(only, list) or any(c not in cells for c in only):
            raise _fail(path, f"{where}.cells", f"{only!r} names a cell the plan does not list")
        equivalents.append(
            Equivalent(
                entry["module"],
                entry["function"],
                entry["line"],
                entry["before"],
                entry["after"],
                entry["why"],
                tuple(only),
            )
        )
    audit = _audit(path, doc["audit"]) if "audit" in doc else None
    return Plan(
        path, float(goal), tuple(goal_modules), tuple(tests), cells, tuple(equivalents), audit
    )


def _audit(path: Path, table: Any) -> Audit:
    fields = {"control", "examples", "seed"}
    if not isinstance(table, dict) or set(table) != fields:
        got = sorted(table) if isinstance(table, dict) else table
        raise _fail(path, "audit", f"has {got!r}; accepted: exactly {sorted(fields)}")
    control = table["control"]
    keys = {"module", "function", "before", "after"}
    if not isinstance(control, dict) or set(control) != keys:
        raise _fail(path, "audit.control", f"{control!r} needs exactly {sorted(keys)}")
    if not all(isinstance(control[k], str) and control[k].strip() for k in keys):
        raise _fail(path, "audit.control", f"{control!r} needs non-empty strings")
    for name in ("examples", "seed"):
        value = table[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < (name == "examples"):
            raise _fail(path, f"audit.{name}", f"{value!r} is not a whole number (examples >= 1)")
    return Audit(
        Equivalent(
            control["module"],
            control["function"],
            1,
            control["before"],
            control["after"],
            "the audit's control: a killable mutant the fuzz must catch",
        ),
        table["examples"],
        table["seed"],
    )
