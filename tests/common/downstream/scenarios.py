"""The downstream tier's scenario marker: each test is one route (``alone`` or ``compat``) of one
scenario of one library (tests/downstream/conftest.py records them for the cell's report)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

ROUTES = ("alone", "compat")
F = TypeVar("F", bound=Callable[..., Any])


def scenario(library: str, title: str, route: str, link: str = "") -> Callable[[F], F]:
    """Name a test as one route of one downstream scenario."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, not {route!r}")
    marker = pytest.mark.scenario(library=library, title=title, route=route, link=link)

    def mark(fn: F) -> F:
        return marker(fn)  # type: ignore[no-any-return]

    return mark
