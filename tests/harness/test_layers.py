"""The house: the harness in layers without cycles, and compat's units small enough to read.

The harness's packages import only from their own package and earlier layers
(``harness.LAYERS``), every module is in a package, and the module import graph has no cycle,
counting imports made inside functions. compat keeps each class within 250 lines and each
function within 80 (docstrings included), so a unit can be read in one sitting.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import harness

ROOT = Path(__file__).resolve().parents[2]
MAX_CLASS, MAX_FUNCTION = 250, 80


def harness_imports(root: Path) -> dict[str, set[str]]:
    """Per module (``pkg.mod``), the harness modules it imports, anywhere in its code."""
    graph: dict[str, set[str]] = {}
    for path in sorted((root / "harness").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(root / "harness")
        assert len(rel.parts) == 2, f"harness/{rel} is not in a package of harness.LAYERS"
        name = f"{rel.parts[0]}.{path.stem}"
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("harness")
            ):
                parts = node.module.split(".")
                assert len(parts) >= 2, f"{name} imports from the harness root: {node.module}"
                if len(parts) >= 3:
                    deps.add(f"{parts[1]}.{parts[2]}")
                else:
                    deps.update(f"{parts[1]}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == "harness" and len(parts) >= 3:
                        deps.add(f"{parts[1]}.{parts[2]}")
    return graph


def violations(graph: dict[str, set[str]]) -> list[str]:
    layer = {pkg: i for i, pkgs in enumerate(harness.LAYERS) for pkg in pkgs}
    found = []
    for module, deps in sorted(graph.items()):
        pkg = module.split(".")[0]
        if pkg not in layer:
            found.append(f"{module}: package {pkg!r} is in no layer")
            continue
        for dep in sorted(deps):
            other = dep.split(".")[0]
            if other != pkg and layer.get(other, len(layer)) >= layer[pkg]:
                found.append(f"{module} imports {dep}, which is not in an earlier layer")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                found.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def test_the_harness_imports_only_from_earlier_layers_and_has_no_cycle() -> None:
    graph = harness_imports(ROOT)
    assert {m.split(".")[0] for m in graph} == set().union(*harness.LAYERS)
    assert violations(graph) == []
    assert cycles(graph) == []


def test_the_checks_see_an_upward_import_and_a_cycle() -> None:
    graph = {"matrix.spec": {"cells.cell"}, "cells.cell": {"matrix.spec"}}
    assert violations(graph) == ["matrix.spec imports cells.cell, which is not in an earlier layer"]
    assert cycles(graph) == [["cells.cell", "matrix.spec", "cells.cell"]]
    assert violations({"tools.x": set()}) == ["tools.x: package 'tools' is in no layer"]


def sizes(path: Path) -> list[tuple[str, str, int]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            out.append((kind, node.name, node.end_lineno - node.lineno + 1))
    return out


@pytest.mark.parametrize(
    "path", sorted((ROOT / "compat").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_compat_units_stay_small(path: Path) -> None:
    limit = {"class": MAX_CLASS, "function": MAX_FUNCTION}
    big = [f"{kind} {name}: {n} lines" for kind, name, n in sizes(path) if n > limit[kind]]
    assert big == []


def test_the_size_check_sees_a_long_function(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION)
    assert sizes(long) == [("function", "f", MAX_FUNCTION + 1)]


def test_every_refusal_of_the_harness_is_one_class() -> None:
    """Callers turn refusals into an exit status by catching one class: every ValueError the
    harness defines derives from harness.matrix.errors.Refused."""
    import importlib
    import inspect

    from harness.matrix.errors import Refused

    defined = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if path.name == "__init__.py" or rel.parts[-2:] == ("mutation", "tool"):
            continue  # tool.py imports mutmut, which only the mutation venv holds
        module = importlib.import_module(".".join(rel.parts))
        for name, obj in vars(module).items():
            own = inspect.isclass(obj) and obj.__module__ == module.__name__
            if own and issubclass(obj, ValueError):
                defined.append(obj)
                assert issubclass(obj, Refused), f"{module.__name__}.{name}"
    assert len(defined) >= 8  # spec, wheels, releases, installed, history, trigger, status, gha
