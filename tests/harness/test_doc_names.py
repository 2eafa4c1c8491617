"""Every file, module and symbol the docs name exists (issue 44): a renamed module, a moved
function or a deleted file fails here, not in a newcomer's hands.

Read from the README, docs/*.md and the docstrings of compat/ and harness/: a path in backticks
(``harness/cells/run.py``, ``tests/common/strategies.py``, ``docs/gate.md``) must be a file or folder
of the repository; a dotted name of compat or the harness (``harness.cells.run``,
``compat.meta.materialize``, ``pages.SECTIONS`` where ``pages`` is a harness module) must be a
module, or a name that module defines at its top level.

docs/design.md's Layout block (issue 55) names every module of compat/ and the harness with its
one concern, and nothing under them that is not there.
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


DESIGN = ROOT / "docs" / "design.md"
LAYOUT = re.compile(r"^## Layout\n.*?^```\n(.*?)^```", re.MULTILINE | re.DOTALL)
# a full path of compat or the harness in a concern (``harness/__init__.py``), not a tail of one
CONCERN_PATH = re.compile(r"(?<![\w./])((?:compat|harness)/[\w./]*\w)")


def layout_lines(text: str) -> list[str]:
    """The lines of the first fenced block after the ``## Layout`` heading."""
    found = LAYOUT.search(text)
    assert found is not None, "docs/design.md: no ``` block after '## Layout'"
    return found.group(1).splitlines()


def layout_entries(lines: list[str]) -> dict[str, str]:
    """Each path the Layout block names, rebuilt from the indentation, with its concern.

    The block's format: a line is a name (a file, a folder ending in ``/``, or a path in one,
    ``bisect/bisection.py``) then its concern, indented two spaces deeper than the folder line it
    sits in. A line indented more than two spaces deeper than the entry above it names nothing:
    it continues that entry's concern (the wrapped prose of ``docs/``, ``tests/``, ``reports/``).
    """
    entries: dict[str, str] = {}
    folders: list[tuple[int, str]] = []  # (indent, path) of the folders enclosing the line
    last, path = -2, ""  # the previous entry's indent and path
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip():
            continue
        if indent > last + 2:
            entries[path] = f"{entries[path]} {line.strip()}".strip()
            continue
        name, _, concern = line.strip().partition(" ")
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = (folders[-1][1] if folders else "") + name
        entries[path] = concern.strip()
        if name.endswith("/"):
            folders.append((indent, path))
        last = indent
    return entries


def design_layout() -> dict[str, str]:
    return layout_entries(layout_lines(DESIGN.read_text(encoding="utf-8")))


def package_modules() -> set[str]:
    """Every module file of compat and the harness, ``__init__.py`` left out."""
    return {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }


def test_the_design_layout_names_every_module_with_its_concern() -> None:
    entries = design_layout()
    missing = sorted(package_modules() - entries.keys())
    assert missing == [], f"docs/design.md's Layout leaves out {', '.join(missing)}"
    bare = sorted(module for module in package_modules() if not entries[module])
    assert bare == [], f"docs/design.md's Layout names without a concern: {', '.join(bare)}"


def test_every_path_the_design_layout_names_exists() -> None:
    entries = design_layout()
    named = [path for path in entries if path.startswith(tuple(f"{p}/" for p in PACKAGES))]
    named += [path for concern in entries.values() for path in CONCERN_PATH.findall(concern)]
    absent = sorted({path for path in named if not (ROOT / path).exists()})
    assert absent == [], f"docs/design.md's Layout names what is not there: {', '.join(absent)}"


def test_the_layout_paths_are_rebuilt_from_the_indentation() -> None:
    text = (
        "## Layout\n\n```\n"
        "top.toml       the one source\n"
        "harness/       layers (harness/__init__.py):\n"
        "  matrix/      shared\n"
        "    paths.py     where things live\n"
        "  bisect/bisection.py  bisection\n"
        "docs/          upstream-bugs.md: the bugs;\n"
        "               tests/compat/ wrapped prose\n"
        "```\n"
    )
    assert layout_entries(layout_lines(text)) == {
        "top.toml": "the one source",
        "harness/": "layers (harness/__init__.py):",
        "harness/matrix/": "shared",
        "harness/matrix/paths.py": "where things live",
        "harness/bisect/bisection.py": "bisection",
        "docs/": "upstream-bugs.md: the bugs; tests/compat/ wrapped prose",
    }
    assert CONCERN_PATH.findall("layers (harness/__init__.py): tests/compat/ x") == [
        "harness/__init__.py"
    ]
