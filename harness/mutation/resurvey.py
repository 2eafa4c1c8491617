"""Which verdicts of an earlier full mutation run a resurvey may carry: per function, as mutmut
keeps its own results.

mutmut names a mutant by its function (``f``, ``Class.method``; a nested function belongs to the one
around it) and its index among that function's mutations, so a function whose code is the same at
HEAD as at the base commit has the same mutants, which :func:`carry` checks (same ids, same
changes). A detected one is carried when its function and the module's other code are unchanged and
the tests only grew (``harness.mutation.runner.tests_changed``: new test files, and new tests in
old ones, :func:`tests_added_only`): comments, docstrings, layout and every other function may
change freely. What this does not see, like mutmut itself: a changed
function that an unchanged one calls can hide an unchanged function's mutant from the test that
killed it. The nightly's full run judges every mutant again and catches that.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.matrix.errors import Refused
from harness.matrix.procs import git
from harness.mutation.report import DETECTED

# per changed module: the functions whose code changed, or None when the module's other code
# did (imports, constants, class attributes: any function may read them)
Changed = dict[str, "set[str] | None"]


def _without_docstring(node: ast.AST) -> ast.AST:
    body = getattr(node, "body", None)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        node = copy.copy(node)
        node.body = body[1:]  # type: ignore[attr-defined]
    return node


def functions(text: str) -> tuple[dict[str, str], str]:
    """Per function as mutmut names it, its code (the syntax tree, without its docstring:
    comments and layout do not count); and the code of everything else in the module."""
    tree = ast.parse(text)
    found: dict[str, str] = {}
    rest: list[ast.stmt] = []
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in _without_docstring(tree).body:  # type: ignore[attr-defined]
        if isinstance(node, kinds):
            found[node.name] = ast.dump(_without_docstring(node))
        elif isinstance(node, ast.ClassDef):
            cls = copy.copy(_without_docstring(node))
            kept = []
            for item in cls.body:  # type: ignore[attr-defined]
                if isinstance(item, kinds):
                    found[f"{node.name}.{item.name}"] = ast.dump(_without_docstring(item))
                else:
                    kept.append(item)
            cls.body = kept  # type: ignore[attr-defined]
            rest.append(cls)  # type: ignore[arg-type]
        else:
            rest.append(node)
    return found, ast.dump(ast.Module(body=rest, type_ignores=[]))


def _bound(node: ast.stmt) -> set[str]:
    """The module-level names a statement binds (a definition, an import, an assignment)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def tests_added_only(before: str, after: str) -> str | None:
    """None when a test module at ``after`` is the one at ``before`` with tests added and
    nothing else: every statement it had is there unchanged (comments, layout and the module's
    docstring aside), and each new one is an import or a definition of a name it did not bind,
    neither a hook (``pytest_*``) nor an autouse fixture, which would reach the old tests.
    Otherwise what else changed, in words. A mutant an old test killed is then still killed."""
    old = _without_docstring(ast.parse(before)).body  # type: ignore[attr-defined]
    new = _without_docstring(ast.parse(after)).body  # type: ignore[attr-defined]
    old_dumps = {ast.dump(node) for node in old}
    new_dumps = {ast.dump(node) for node in new}
    for node in old:
        if ast.dump(node) not in new_dumps:
            return f"line {node.lineno} of the old file changed or went"
    taken = set().union(*(_bound(node) for node in old))
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    for node in new:
        if ast.dump(node) in old_dumps:
            continue
        if not isinstance(node, definitions):
            return f"line {node.lineno} adds a statement that is not a definition or an import"
        clash = sorted(_bound(node) & taken)
        if clash:
            return f"line {node.lineno} binds {', '.join(clash)} again"
        hook = getattr(node, "name", "").startswith("pytest_")
        autouse = any("autouse" in ast.dump(d) for d in getattr(node, "decorator_list", []))
        if hook or autouse:
            return f"line {node.lineno} adds {'a hook' if hook else 'an autouse fixture'}"
        taken |= _bound(node)
    return None


def _show(root: Path, commit: str, path: str) -> str | None:
    """``path`` as of ``commit``; None where it does not exist there."""
    try:
        return git(root, "show", f"{commit}:{path}")
    except Refused:
        return None


def change_beyond_new_tests(root: Path, base: str, path: str, head: str = "HEAD") -> str | None:
    """What changed in test module ``path`` between ``base`` and ``head`` other than added tests
    (:func:`tests_added_only`), in words; None when it only grew."""
    before, after = _show(root, base, path), _show(root, head, path)
    if before is None or after is None:
        return "not in both commits"
    try:
        return tests_added_only(before, after)
    except SyntaxError as exc:
        return f"does not parse ({exc.msg})"


def changed_functions(root: Path, base: str, head: str = "HEAD") -> Changed:
    """Per module of compat/ that differs between ``base`` and ``head``: what changed in it."""
    names = git(root, "diff", "--name-only", base, head, "--", "compat/").split()
    changed: Changed = {}
    for path in names:
        if not path.endswith(".py"):
            continue
        before, after = _show(root, base, path), _show(root, head, path)
        if before is None or after is None:
            changed[path] = None
            continue
        old, old_rest = functions(before)
        new, new_rest = functions(after)
        if old_rest != new_rest:
            changed[path] = None
            continue
        moved = {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}
        if moved:
            changed[path] = moved
    return changed


def unchanged(changed: Mapping[str, set[str] | None], mutant: Mapping[str, Any]) -> bool:
    if mutant["module"] not in changed:
        return True
    functions_changed = changed[mutant["module"]]
    return functions_changed is not None and mutant["function"] not in functions_changed


def carry(base: Mapping[str, Any], catalog: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The base run's detected mutants in unchanged functions (``base["changed"]``), marked as
    carried and placed at their lines of today; RuntimeError unless the base judged exactly the
    catalogue's mutants of every unchanged function (same ids, same changes)."""
    changed: Changed = base.get("changed") or {}
    rows = {m["id"]: m for m in base["rows"] if unchanged(changed, m)}
    ours = {m["id"]: m for m in catalog if unchanged(changed, m)}
    if set(rows) != set(ours) or any(
        rows[i].get("before") != m["before"] or rows[i].get("after") != m["after"]
        for i, m in ours.items()
    ):
        raise RuntimeError(
            f"the base run at {base['commit'][:12]} judged other mutants than this catalogue "
            f"in the functions that did not change ({len(rows)} vs {len(ours)}): run the cell "
            "in full"
        )
    return [
        {
            **m,
            "line": ours[i].get("line", m.get("line")),
            "end_line": ours[i].get("end_line", m.get("end_line")),
            "carried_from": base["commit"],
        }
        for i, m in rows.items()
        if m.get("status") in DETECTED
    ]
