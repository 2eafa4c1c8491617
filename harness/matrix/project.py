"""The project's own release facts, read from its files without importing compat (or torch):
the version compat writes once (``compat.__version__``), which the build, the wheel's cells and
the changelog all take from here. Standard library only."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.matrix.errors import Refused

PACKAGE = "compat"


def written_version(root: Path) -> str:
    """``compat.__version__`` as ``<root>/compat/__init__.py`` writes it (a string literal)."""
    init = root / PACKAGE / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
            raise Refused(f"{init}: __version__ must be a string literal, not {ast.dump(node)}")
    raise Refused(f"{init} writes no __version__ = '...': the release's one version")
