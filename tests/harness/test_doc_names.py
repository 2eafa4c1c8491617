"""Every file, module and symbol the docs name exists (issue 44): a renamed module, a moved
function or a deleted file fails here, not in a newcomer's hands.

Read from the README, docs/*.md and the docstrings of compat/ and harness/: a path in backticks
(``harness/cells/run.py``, ``tests/common/strategies.py``, ``docs/gate.md``) must be a file or folder
of the repository; a dotted name of compat or the harness (``harness.cells.run``,
``compat.meta.materialize``, ``pages.SECTIONS`` where ``pages`` is a harness module) must be a
module, or a name that module defines at its top level.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGES = ("compat", "harness")
PATH = re.compile(r"`((?:compat|harness|tests|bench|docs|requirements|\.ci|\.github)/[\w./-]*)`")
DOTTED = re.compile(r"`((?:compat|harness)(?:\.\w+)+)`")
# a unique module of compat or the harness by its short name and a constant or class of it
# (``pages.SECTIONS``); other dotted words in backticks are JSON keys, files or other libraries'
SHORT = re.compile(r"`(\w+)\.([A-Z]\w*)`")
# files of other projects the docs name: the peers' own test files (accelerate's, safetensors')
# and the caller workflow a user adds to their own repository
EXTERNAL = frozenset(
    {
        "tests/test_modeling_utils.py",
        "tests/test_big_modeling.py",
        "tests/test_hooks.py",
        "tests/data/",
        ".github/workflows/compat-matrix.yml",
    }
)


def module_file(dotted: str) -> Path | None:
    path = ROOT.joinpath(*dotted.split("."))
    for found in (path.with_suffix(".py"), path / "__init__.py"):
        if found.is_file():
            return found
    return None


@cache
def top_level(path: Path) -> frozenset[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def resolves(dotted: str) -> bool:
    """A module, or a module followed by names it defines (a class's attribute is not read)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        found = module_file(".".join(parts[:cut]))
        if found is not None:
            return cut == len(parts) or parts[cut] in top_level(found)
    return False


@cache
def short_modules() -> dict[str, Path]:
    """Module names of compat and the harness that are unique, as the docs shorten them."""
    seen: dict[str, list[Path]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.stem != "__init__":
                seen.setdefault(path.stem, []).append(path)
    return {name: paths[0] for name, paths in seen.items() if len(paths) == 1}


def texts() -> list[tuple[str, str]]:
    out = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in DOCS]
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)):
                    doc = ast.get_docstring(node)
                    if doc:
                        out.append((f"{path.relative_to(ROOT)} ({getattr(node, 'name', '')})", doc))
    return out


def unknown_names(named: list[tuple[str, str]]) -> list[str]:
    bad = []
    for where, text in named:
        for path in PATH.findall(text):
            clean = path.rstrip(".")
            if clean in EXTERNAL or "*" in clean or "<" in clean:
                continue
            if not (ROOT / clean).exists():
                bad.append(f"{where}: {path}")
        bad += [f"{where}: {d}" for d in DOTTED.findall(text) if not resolves(d)]
        for module, name in SHORT.findall(text):
            path = short_modules().get(module)  # a module file: a name of it, never a submodule
            if path is not None and name not in top_level(path):
                bad.append(f"{where}: {module}.{name}")
    return bad


def test_every_file_module_and_symbol_the_docs_name_exists() -> None:
    assert unknown_names(texts()) == []


def test_the_check_sees_a_missing_file_module_and_symbol() -> None:
    text = (
        "`harness/report/report.py` `harness.report.pages.NOPE` `pages.SECTIONS` "
        "`report.SECTIONS` `harness.cells.run` `compat.meta.materialize` `docs/gate.md`"
    )
    assert unknown_names([("doc", text)]) == [
        "doc: harness/report/report.py",
        "doc: harness.report.pages.NOPE",
        "doc: report.SECTIONS",
    ]
