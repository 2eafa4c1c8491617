"""The mutation plan (``mutation.toml``): cells, modules, the goal, the equivalent mutants.

:func:`load` checks every field (through :mod:`harness.matrix.toml_table`, the reader of
matrix.toml too) and names the bad one with its value; :class:`Equivalent`
matches a mutant by module, function and its change (the source lines before and after,
whitespace at the ends of lines aside), wherever the line moved. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness.matrix import paths, spec
from harness.matrix.toml_table import Table, TomlError, read

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


class PlanError(TomlError):
    """mutation.toml is malformed; the message names the file, the field and the bad value."""


class _Table(Table):
    error = PlanError


def _nonempty(t: Table, key: str) -> str:
    value: str = t.get(key, str)
    if not value.strip():
        raise t.fail(key, "must not be empty", value)
    return value


def load(path: Path = PLAN, matrix: spec.Matrix | None = None) -> Plan:
    """Read and check ``mutation.toml`` (through :mod:`harness.matrix.toml_table`, as
    matrix.toml is read); every problem names the field and the bad value."""
    doc = _Table(path, "", read(path, PlanError), ("run", "cell", "equivalent", "audit"))
    run = _Table(path, "run", doc.get("run", dict), ("tool", "goal", "goal_modules", "tests"))
    goal = run.get("goal", (float, int))
    if not 0 < goal <= 1:
        raise run.fail("goal", "is not a number in (0, 1]", goal)
    goal_modules, tests = run.strings("goal_modules"), run.strings("tests")
    for key, value in (("goal_modules", goal_modules), ("tests", tests)):
        if not value:
            raise run.fail(key, "must not be empty", list(value))
    matrix = matrix or spec.load()
    cpu = {c.id for c in matrix.cells(tiers=spec.TIERS, backend="cpu")}
    cells: dict[str, tuple[str, ...]] = {}
    for i, entry in enumerate(doc.get("cell", list, [])):
        t = _Table(path, f"cell[{i}]", entry, ("cell", "modules"))
        cell, modules = t.get("cell", str), t.strings("modules")
        if cell not in cpu:
            accepted = ", ".join(sorted(cpu))
            raise t.fail("cell", f"is not a cpu cell of matrix.toml; accepted: {accepted}", cell)
        if not modules or not all(m.startswith("compat/") for m in modules):
            raise t.fail("modules", "is not a list of compat/ globs", list(modules))
        if cell in cells:
            raise t.fail("cell", "is listed twice", cell)
        cells[cell] = modules
    if not cells:
        raise doc.fail("cell", "is empty: no cell to mutate in")
    equivalents = [
        _equivalent(_Table(path, f"equivalent[{i}]", entry, _FIELDS), cells)
        for i, entry in enumerate(doc.get("equivalent", list, []))
    ]
    audit = (
        _audit(_Table(path, "audit", doc.table["audit"], _AUDIT)) if "audit" in doc.table else None
    )
    return Plan(
        path,
        goal=float(goal),
        goal_modules=goal_modules,
        tests=tests,
        cells=cells,
        equivalents=tuple(equivalents),
        audit=audit,
    )


_FIELDS = ("module", "function", "line", "before", "after", "why", "cells")
_AUDIT = ("control", "examples", "seed")
_CHANGE = ("module", "function", "before", "after")


def _equivalent(t: Table, cells: Mapping[str, Any]) -> Equivalent:
    module, function = _nonempty(t, "module"), _nonempty(t, "function")
    before, after, why = _nonempty(t, "before"), _nonempty(t, "after"), _nonempty(t, "why")
    line = t.get("line", int)
    if line < 1:
        raise t.fail("line", "is not a line number", line)
    only = t.strings("cells", [])
    unknown = [c for c in only if c not in cells]
    if unknown:
        raise t.fail("cells", "names a cell the plan does not list", unknown[0])
    return Equivalent(module, function, line, before=before, after=after, why=why, cells=only)


def _audit(t: Table) -> Audit:
    control = _Table(t.path, "audit.control", t.get("control", dict), _CHANGE)
    module, function, before, after = (_nonempty(control, key) for key in _CHANGE)
    examples, seed = t.get("examples", int), t.get("seed", int)
    if examples < 1:
        raise t.fail("examples", "is not a whole number >= 1", examples)
    if seed < 0:
        raise t.fail("seed", "is not a whole number", seed)
    return Audit(
        Equivalent(
            module,
            function,
            1,
            before,
            after,
            "the audit's control: a killable mutant the fuzz must catch",
        ),
        examples,
        seed,
    )
