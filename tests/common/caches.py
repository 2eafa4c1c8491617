"""compat's memo caches (module-level dicts named ``_*_cache``): finding compat's loaded modules
and emptying their caches. The suite's conftest empties them before every test; the mutation
audit's differential runs (tests/common/differential.py) empty each copy's before every input."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType


def compat_modules() -> dict[str, ModuleType]:
    """compat's modules now in ``sys.modules``, by name."""
    return {k: m for k, m in list(sys.modules.items()) if k == "compat" or k.startswith("compat.")}


def found(modules: Iterable[ModuleType]) -> list[dict[object, object]]:
    """The memo caches of ``modules`` (compat binds each once, at import, and only empties it)."""
    return [
        value
        for module in modules
        for attr, value in vars(module).items()
        if attr.startswith("_") and attr.endswith("_cache") and isinstance(value, dict)
    ]


def clear(modules: Iterable[ModuleType]) -> None:
    """Empty every memo cache of ``modules``."""
    for cache in found(modules):
        cache.clear()
