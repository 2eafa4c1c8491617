"""The side of the mutation run that lives in the cell's venv, next to mutmut (never in nox's).

* ``python -m harness.mutation.tool catalog --out FILE MODULE...``: every mutant mutmut makes of
  those modules (run from the copy's root), with its name, function, line and the change as
  source lines before and after, from mutmut's own mutation step (so the names are the ones
  ``mutmut run`` tests, checked against its results afterwards).
* ``python -m harness.mutation.tool collect --catalog FILE --killers DIR --out FILE``: after
  ``mutmut run``, each catalogued mutant's exit code and duration from mutmut's records
  (``mutants/**/*.meta``) and the test that killed it.
* As a pytest plugin (``-p harness.mutation.tool``, given to every pytest mutmut starts), it
  records the first failing test of each mutant's run under ``$COMPAT_MUTATION_KILLERS``:
  mutmut stops at the first failure (``-x``) and does not say which test it was.

Imports mutmut and libcst only inside those functions: the module itself is importable
anywhere (the harness tests check its parts without them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KILLERS_ENV = "COMPAT_MUTATION_KILLERS"
MUTANT_MARK = "__mutmut_"


def _safe(name: str) -> str:
    """A file name for a mutant's name (class methods hold a non-ASCII separator)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "~", name)


# --- the pytest plugin ----------------------------------------------------------------------------


def pytest_runtest_logreport(report: Any) -> None:
    """Record the first failing test of a mutant's run (setup, call or teardown)."""
    folder = os.environ.get(KILLERS_ENV)
    if not folder or not report.failed:
        return
    from mutmut.mutation.trampoline import get_mutant_under_test

    mutant = get_mutant_under_test()
    if MUTANT_MARK not in mutant:  # the stats, clean and forced-fail runs
        return
    path = Path(folder) / _safe(mutant)
    if not path.exists():
        path.write_text(json.dumps({"mutant": mutant, "test": report.nodeid}) + "\n")


# --- catalog --------------------------------------------------------------------------------------


def change_lines(
    lines: list[str], start: tuple[int, int], end: tuple[int, int], new: str
) -> tuple[str, str]:
    """The source lines a node spans (1-based lines, 0-based columns), before and after its
    text is replaced by ``new``."""
    (first, col), (last, end_col) = start, end
    before = "".join(lines[first - 1 : last]).rstrip("\n")
    after = (lines[first - 1][:col] + new + lines[last - 1][end_col:]).rstrip("\n")
    return before, after


def catalog(modules: Sequence[str]) -> list[dict[str, Any]]:
    """Every mutant of ``modules`` (paths relative to the current folder), in mutmut's order."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider
    from mutmut.mutation.file_mutation import create_mutations
    from mutmut.mutation.trampoline_templates import mangle_function_name
    from mutmut.utils.format_utils import get_mutant_name

    out: list[dict[str, Any]] = []
    for module_path in modules:
        code = Path(module_path).read_text(encoding="utf-8")
        module, mutations, _, _ = create_mutations(module_path, code)
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        # mutmut mutates top-level functions and the methods of top-level classes only
        owner: dict[Any, str | None] = {}
        for stmt in module.body:
            if isinstance(stmt, cst.FunctionDef):
                owner[stmt] = None
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                for item in stmt.body.body:
                    if isinstance(item, cst.FunctionDef):
                        owner[item] = stmt.name.value
        lines = code.splitlines(keepends=True)
        numbers: dict[Any, int] = {}
        for mutation in mutations:
            function = mutation.contained_by_top_level_function
            if function not in owner:
                continue  # module-level code: mutmut leaves it alone
            number = numbers[function] = numbers.get(function, 0) + 1
            cls = owner[function]
            mangled = mangle_function_name(name=function.name.value, class_name=cls)
            pos = positions[mutation.original_node]
            before, after = change_lines(
                lines,
                (pos.start.line, pos.start.column),
                (pos.end.line, pos.end.column),
                module.code_for_node(mutation.mutated_node),
            )
            out.append(
                {
                    "id": get_mutant_name(Path(module_path), f"{mangled}{MUTANT_MARK}{number}"),
                    "module": module_path,
                    "function": f"{cls}.{function.name.value}" if cls else function.name.value,
                    "line": pos.start.line,
                    "end_line": pos.end.line,
                    "before": before,
                    "after": after,
                }
            )
    return out


# --- collect --------------------------------------------------------------------------------------


def collect(entries: list[dict[str, Any]], killers: Path) -> list[dict[str, Any]]:
    """``entries`` (the catalog) with mutmut's exit code, its status word and duration, and the
    killing test where one was recorded. A mutant mutmut did not test gets exit code None."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code

    records: dict[str, tuple[int | None, float | None]] = {}
    for module in sorted({e["module"] for e in entries}):
        data = SourceFileMutationData(path=module)
        data.load()
        for name, code in data.exit_code_by_key.items():
            records[name] = (code, data.durations_by_key.get(name))
    known = {e["id"] for e in entries}
    unknown = sorted(set(records) - known)
    if unknown:  # mutmut made mutants our catalog does not know: its numbering changed
        raise RuntimeError(f"mutmut tested mutants the catalog lacks: {unknown[:5]}")
    out = []
    for entry in entries:
        code, duration = records.get(entry["id"], (None, None))
        killer = killers / _safe(entry["id"])
        test = json.loads(killer.read_text())["test"] if killer.exists() else None
        out.append(
            {
                **entry,
                "exit_code": code,
                "tool_status": status_by_exit_code[code],
                "duration_s": None if duration is None else round(float(duration), 3),
                "killed_by": test,
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.mutation.tool")
    sub = parser.add_subparsers(dest="command", required=True)
    cat = sub.add_parser("catalog")
    cat.add_argument("--out", type=Path, required=True)
    cat.add_argument("modules", nargs="+")
    col = sub.add_parser("collect")
    col.add_argument("--catalog", type=Path, required=True)
    col.add_argument("--killers", type=Path, required=True)
    col.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "catalog":
        result = catalog(args.modules)
    else:
        result = collect(json.loads(args.catalog.read_text()), args.killers)
    args.out.write_text(json.dumps(result, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
