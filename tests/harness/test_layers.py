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


# --- the harness held to compat's sizes ----------------------------------------------------------

HARNESS_SOURCES = [*sorted((ROOT / "harness").rglob("*.py")), ROOT / "noxfile.py"]
MAX_POSITIONAL = 6  # more positional arguments than this: name them


def big_units(path: Path) -> list[str]:
    limit = {"class": MAX_CLASS, "function": MAX_FUNCTION}
    return [f"{kind} {name}: {n} lines" for kind, name, n in sizes(path) if n > limit[kind]]


@pytest.mark.parametrize("path", HARNESS_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_harness_units_stay_small(path: Path) -> None:
    assert big_units(path) == []


def fixed_arity_names(paths: list[Path]) -> set[str]:
    """Names of the harness's own functions and classes that take no ``*args``: a long
    positional call to one of them is a call whose meaning hangs on the order."""
    fixed: set[str] = set()
    varargs: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                fixed.add(node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                (varargs if node.args.vararg else fixed).add(node.name)
    return fixed - varargs


def harness_modules_bound(tree: ast.Module) -> set[str]:
    """The names a file binds to harness modules (``from harness.cells import run as r``)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness"):
            bound.update(a.asname or a.name for a in node.names)
    return bound


def wide_calls(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Each call to a fixed-arity harness function or class (by name, or through a harness
    module the file imports) with more than MAX_POSITIONAL positional arguments, as
    ``file:line name(N)``; a call of another library's method (``session.run``) is not one."""
    names = fixed_arity_names(paths)
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = harness_modules_bound(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or len(node.args) <= MAX_POSITIONAL:
                continue
            func, name = node.func, ""
            if isinstance(func, ast.Name):
                name = func.id
            elif isinstance(func, ast.Attribute) and getattr(func.value, "id", "") in modules:
                name = func.attr
            if name in names and not any(isinstance(a, ast.Starred) for a in node.args):
                found.append(f"{path.relative_to(root)}:{node.lineno} {name}({len(node.args)})")
    return found


def test_harness_calls_name_their_arguments() -> None:
    assert wide_calls(HARNESS_SOURCES) == []


def test_the_size_checks_see_a_long_function_and_a_wide_call(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION))
    src = tmp_path / "big.py"
    src.write_text(
        f"def big():\n{body}\n\ndef seven(a, b, c, d, e, f, g):\n    pass\n\n"
        "def many(*args):\n    pass\n\nseven(1, 2, 3, 4, 5, 6, 7)\nmany(1, 2, 3, 4, 5, 6, 7)\n"
        "seven(1, 2, 3, 4, 5, 6, g=7)\n"
    )
    assert big_units(src) == [f"function big: {MAX_FUNCTION + 1} lines"]
    line = len(body.splitlines()) + 10
    assert wide_calls([src], root=tmp_path) == [f"big.py:{line} seven(7)"]


# --- compat's modules keep their private names to themselves -------------------------------------


def private_reaches(paths: list[Path]) -> list[str]:
    """Each place a compat module imports or reads another compat module's private name
    (``from compat.params import _resolve``, ``params._resolve``); a private module itself
    (``from compat import _features``) is the package's to share, its private names are not."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("compat"):
                if node.module in ("compat", "compat.integrations"):
                    modules.update(a.asname or a.name for a in node.names)
                    continue
                bad = [a.name for a in node.names if a.name.startswith("_")]
                found += [f"{path.name}:{node.lineno} from {node.module} import {n}" for n in bad]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return sorted(found, key=lambda f: (f.split(":")[0], int(f.split(":")[1].split()[0])))


def test_no_compat_module_reaches_into_another_modules_private_names() -> None:
    assert private_reaches(sorted((ROOT / "compat").rglob("*.py"))) == []


def exported(root: Path) -> dict[str, set[str]]:
    """Per public compat module (no underscore in its name), the names its ``__all__`` lists."""
    out: dict[str, set[str]] = {}
    for path in sorted((root / "compat").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        name = ".".join(p for p in parts if p != "__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = getattr(node, "targets", [])
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                out[name] = set(ast.literal_eval(node.value))  # type: ignore[attr-defined]
    return out


def public_reaches(paths: list[Path], public: dict[str, set[str]]) -> list[str]:
    """Each place a compat module imports a name from a public compat module that its
    ``__all__`` does not list: a public module holds its public API, and the helpers others
    share live in a private module (the move engine in ``_move.py``); or reads one through the
    module (``params.plan_move`` after ``from compat import params``)."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound: dict[str, str] = {}  # a local name -> the public module it is
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module in public):
                continue
            if node.module in ("compat", "compat.integrations"):  # the package: its modules
                bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
                continue
            bad = [a.name for a in node.names if a.name not in public[node.module]]
            found += [f"{path.name}:{node.lineno} from {node.module} import {n}" for n in bad]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = bound.get(node.value.id)
                listed = public.get(module or "")
                # a private name is private_reaches's to report
                if listed is not None and node.attr not in listed and node.attr[0] != "_":
                    found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_no_compat_module_imports_what_a_public_module_does_not_export() -> None:
    public = exported(ROOT)
    assert {"compat.params", "compat.meta", "compat.device"} <= set(public)
    assert public_reaches(sorted((ROOT / "compat").rglob("*.py")), public) == []


def test_the_export_check_sees_an_unlisted_import(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from compat.params import plan_move, set_module_tensor\n"
        "from compat import params as p\np.Move\np.set_module_tensor\np._private\n"
    )
    public = {"compat.params": {"set_module_tensor"}, "compat": {"params"}}
    assert public_reaches([src], public) == [
        "m.py:1 from compat.params import plan_move",
        "m.py:3 p.Move",
    ]


def test_the_private_name_check_sees_an_import_and_an_attribute(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from compat import params as p, _features\n"
        "from compat.params import _resolve, set_module_tensor\n"
        "p._resolve(1)\n_features.CUDA_BUILT\n_features._cache\np.__name__\n"
    )
    assert private_reaches([src]) == [
        "m.py:2 from compat.params import _resolve",
        "m.py:3 p._resolve",
        "m.py:5 _features._cache",
    ]


def test_the_harness_refuses_through_its_one_class() -> None:
    """A refusal of the harness is a Refused (harness/matrix/errors.py, a ValueError naming the
    bad value and what is accepted), or a subclass naming where the input came from: never a
    bare ValueError, which callers could not tell from a bug."""
    bare = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Raise)
                and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id == "ValueError"
            ):
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bare == [], f"raise Refused (harness.matrix.errors) instead: {bare}"


# what runs cells: installing, running the probe and pytest, a group's or a run's cells
RUNNING = frozenset(
    {
        "cells.run",
        "cells.cell",
        "cells.group_run",
        "cells.installed",
        "cells.install",
        "cells.probe",
    }
)
READERS = ("cells.verdict", "ci.gate", "report.pages", "report.support")


def test_reading_records_imports_nothing_that_runs_cells() -> None:
    """The verdict, the gate, the report and the support table read records (cells/record.py)
    against the selection (matrix/selection.py): nothing they import, directly or through
    another module, runs a cell."""
    graph = harness_imports(ROOT)
    for reader in READERS:
        seen, todo = set(), [reader]
        while todo:
            module = todo.pop()
            for dep in graph.get(module, set()) - seen:
                seen.add(dep)
                todo.append(dep)
        assert seen & RUNNING == set(), f"{reader} imports {sorted(seen & RUNNING)}"
