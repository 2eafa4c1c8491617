"""The downstream tier's plumbing: the seeds' scenarios, each written twice.

The cell plumbing is compat's suite's (``tests/common/cell_plugin.py``). Every scenario test
carries ``@scenario(library, title, route, link)`` (``tests/common/downstream/scenarios.py``): ``route`` is ``alone``
(the library as users run it, no compat) or ``compat`` (the same job through compat's API or
integration, which must pass in every downstream cell). An ``alone`` test asserts the behaviour
users need; where the library breaks it, it is a strict expected failure: next to the test
(``@pytest.mark.tracker``) when it breaks in every cell, in matrix.toml (an ``[[xfail]]`` naming
the downstream group and versions) when it depends on the versions. So the report's downstream
grid shows, per library and cell, whether it works alone and through compat, and the gate tells
an upstream candidate that changes an ``alone`` outcome apart from compat's own verdict.

The collected scenarios are written to ``$COMPAT_MATRIX_SCENARIOS`` (the harness reads them into
the cell's record, beside each test's outcome). Nothing here downloads: every model is built from
a small local config, with no pretrained weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest_plugins = ("tests.common.cell_plugin",)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "scenario(library, title, route, link): one route of a downstream scenario"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    named: dict[str, dict[str, str]] = {}
    for item in items:
        found = item.get_closest_marker("scenario")
        if found is not None:
            named[item.nodeid] = {
                "library": found.kwargs["library"],
                "scenario": found.kwargs["title"],
                "route": found.kwargs["route"],
                "link": found.kwargs.get("link", ""),
            }
    path = os.environ.get("COMPAT_MATRIX_SCENARIOS")
    if path and named:
        Path(path).write_text(json.dumps(named, indent=1, sort_keys=True) + "\n")
