"""Sphinx configuration of compat's API reference: one page per public module, from the
docstrings (``nox -s docs`` builds it with warnings as errors and every reference resolved)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer

# compat is imported from the work tree (the docs session installs its dependencies, not compat)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import compat

project = "compat"
release = version = compat.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
html_theme = "alabaster"

autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
# signatures name the alias, linked to its entry, instead of spelling out the union
autodoc_type_aliases = {"DeviceLike": "compat.DeviceLike"}
# the docstrings' sections (Raises:) are Google style
napoleon_numpy_docstring = False

nitpicky = True
# Names outside compat cannot resolve offline (no intersphinx: the build fetches nothing); only
# torch's, collections.abc's and os.PathLike appear in compat's signatures. Built-in classes and
# exceptions need no entry: Sphinx does not report them.
nitpick_ignore_regex = [
    ("py:class", r"torch\..*"),  # torch's classes in signatures (Tensor, device, dtype, nn.Module)
    ("py:class", r"collections\.abc\.(Iterable|Iterator|Mapping|Sequence)"),  # standard library
    ("py:class", r"os\.PathLike"),  # standard library: file-name parameters
]


def _defining_module(name: str) -> str | None:
    """The public module of compat whose ``__all__`` lists ``name`` (compat re-exports it)."""
    for module_name, module in sorted(sys.modules.items()):
        if module_name.startswith("compat.") and name in getattr(module, "__all__", ()):
            return module_name
    return None


def _alias_comment(
    app: Sphinx, what: str, name: str, obj: object, options: Any, lines: list[str]
) -> None:
    """A re-exported alias (``compat.DeviceLike``) is documented by the ``#:`` comment in the
    module that defines it; autodoc looks in ``compat`` and would show the alias's class's
    docstring (``types.UnionType``'s) instead."""
    if what != "data" or not name.startswith("compat.") or name.count(".") != 1:
        return
    short = name.removeprefix("compat.")
    module_name = _defining_module(short)
    if module_name is None:
        return
    comment = ModuleAnalyzer.for_module(module_name).find_attr_docs().get(("", short))
    if comment:
        lines[:] = list(comment)


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", _alias_comment)
