"""The API reference (docs/api, built by ``nox -s docs``) covers the public API: every name in
``compat.__all__`` has an autodoc directive that names it as ``compat.NAME``, every public
integration module (``compat/integrations/*.py`` but the underscore ones) has a page of its own
that documents its whole ``__all__``, no other page exists, and the index's toctree lists every
page. Read from the sources without Sphinx or torch."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
# an autodoc directive and the dotted name it documents
DIRECTIVE = re.compile(r"^\.\. auto(\w+):: +(\S+)", re.MULTILINE)
# the options a module page needs so that every name of the module's __all__ is on it
MODULE_OPTIONS = ("   :members:", "   :undoc-members:")


def public_names() -> list[str]:
    """``compat.__all__`` as compat/__init__.py writes it (read without importing torch)."""
    tree = ast.parse((ROOT / "compat" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = ast.literal_eval(node.value)
            assert isinstance(names, list) and all(isinstance(n, str) for n in names)
            return names
    raise AssertionError("compat/__init__.py writes no __all__")


def integration_modules() -> list[str]:
    """The public integration modules: compat/integrations' modules but the underscore ones."""
    files = sorted((ROOT / "compat" / "integrations").glob("*.py"))
    return [f"compat.integrations.{f.stem}" for f in files if not f.stem.startswith("_")]


def pages() -> dict[str, str]:
    """docs/api's pages, the index among them, by name (the file's stem)."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(API.glob("*.rst"))}


def undocumented(names: list[str], texts: list[str]) -> list[str]:
    """The names of ``names`` that no autodoc directive in ``texts`` names as ``compat.NAME``."""
    named = {target for text in texts for _, target in DIRECTIVE.findall(text)}
    return [name for name in names if f"compat.{name}" not in named]


def module_page_problems(modules: list[str], by_name: dict[str, str]) -> list[str]:
    """What keeps each module from its own page ``<module>.rst``, documented whole there."""
    problems = []
    for module in modules:
        text = by_name.get(module)
        if text is None:
            problems.append(f"{module}: no page {module}.rst")
            continue
        if ("module", module) not in DIRECTIVE.findall(text):
            problems.append(f"{module}: its page has no '.. automodule:: {module}'")
        problems += [f"{module}: no '{o.strip()}'" for o in MODULE_OPTIONS if o not in text]
    return problems


def toctree(index: str) -> list[str]:
    """The entries of the index's toctree (its indented lines that are not options)."""
    lines = index[index.index(".. toctree::") :].splitlines()[1:]
    entries = []
    for line in lines:
        if line and not line.startswith(" "):
            break
        if line.strip() and not line.strip().startswith(":"):
            entries.append(line.strip())
    return entries


def test_every_public_name_is_documented_as_compat_name() -> None:
    names = public_names()
    assert len(names) == 27, "the README's table counts 27 public names"
    assert undocumented(names, list(pages().values())) == []


def test_the_compat_page_documents_public_names_only_under_compat() -> None:
    """No ``compat.device.normalize_device``: each entry is ``compat.NAME`` of ``compat.__all__``."""
    public = {f"compat.{name}" for name in public_names()}
    targets = [t for kind, t in DIRECTIVE.findall(pages()["compat"]) if kind != "module"]
    assert sorted(t for t in targets if t not in public) == []
    assert len(targets) == len(set(targets)), "a name is documented twice"


def test_every_public_integration_module_has_a_page_and_no_other_module_does() -> None:
    modules = integration_modules()
    expected = ["accelerate", "safetensors", "transformers"]
    assert modules == [f"compat.integrations.{m}" for m in expected]
    by_name = pages()
    assert module_page_problems(modules, by_name) == []
    assert ("module", "compat") in DIRECTIVE.findall(by_name.get("compat", ""))
    assert sorted(set(by_name) - {"index", "compat", *modules}) == []


def test_the_index_lists_every_page() -> None:
    by_name = pages()
    assert sorted(toctree(by_name["index"])) == sorted(set(by_name) - {"index"})


def test_the_readme_links_the_reference_and_says_how_to_build_it() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/api/index.rst)" in readme
    assert "nox -s docs" in readme and "build/api/index.html" in readme


def test_the_checks_see_a_missing_name_page_option_and_entry() -> None:
    text = ".. autofunction:: compat.save\n.. autofunction:: compat.saving.load\n"
    assert undocumented(["save", "load"], [text]) == ["load"]
    page = ".. automodule:: compat.integrations.x\n   :members:\n"
    assert module_page_problems(
        ["compat.integrations.x", "compat.integrations.y"], {"compat.integrations.x": page}
    ) == [
        "compat.integrations.x: no ':undoc-members:'",
        "compat.integrations.y: no page compat.integrations.y.rst",
    ]
    index = "T\n=\n\n.. toctree::\n   :maxdepth: 2\n\n   compat\n   other\n\nAfter.\n   not\n"
    assert toctree(index) == ["compat", "other"]
