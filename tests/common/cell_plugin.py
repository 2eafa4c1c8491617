"""The plumbing of a cell's test run, shared by the two suites a cell runs: compat's own
(``tests/compat``) and the downstream tier (``tests/downstream``). Each suite's conftest loads it
(``pytest_plugins``); the harness's tests and the act scenarios do not.

- Hypothesis profiles (``tests/common/profiles.py``): ``ci`` (derandomized: the default of every run),
  ``nightly`` (random exploration, 10,000 examples, an example database, each property within
  its share of the cell's time: ``tests/common/budget.py``), ``replay`` (replays that database);
  ``HYPOTHESIS_PROFILE`` picks one.
- The cell this run belongs to: from ``$COMPAT_MATRIX_CELL`` (written by the harness), else
  matched from matrix.toml by the installed torch / TorchAO versions (a plain ``pytest`` run).
- Expected failures declared in matrix.toml are applied to the matching tests here.
- JUnit suite properties record the cell and the exact installed versions.
- Each test starts with compat's memo caches empty.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.common import caches, profiles

profiles.load()


# what the harness blocked in this run (harness/cells/probe.py --block): its version is not read here
BLOCKED = frozenset(filter(None, os.environ.get("COMPAT_MATRIX_BLOCKED", "").split(",")))


def _version(dist: str) -> str | None:
    if dist in BLOCKED:
        return "blocked"
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _label(version: str | None) -> str:
    return ".".join((version or "").split("+")[0].split(".")[:2])


def _current_cell() -> dict[str, Any]:
    """The cell spec the harness wrote, or one matched from matrix.toml for a local run."""
    path = os.environ.get("COMPAT_MATRIX_CELL")
    if path:
        return dict(json.loads(Path(path).read_text()))
    from harness.matrix import spec  # the loader is standard library + packaging only

    matrix = spec.load()
    torch_label, ao_label = _label(_version("torch")), _label(_version("torchao"))
    group = _installed_group(matrix)
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if py not in matrix.python:
        py = matrix.default_python  # a Python off the axis: judged as the default one
    found = matrix.find_cell(torch_label, ao_label, "cpu", group, py)
    xfails = matrix.xfails_for(torch_label, ao_label, "cpu", group, py) if found else []
    return {
        "id": found.id if found else f"local-torch{torch_label}-ao{ao_label}",
        "torch": torch_label,
        "torchao": ao_label,
        "backend": None,  # a local run exercises every backend the machine exposes
        "python": None,
        "downstream": group,
        "xfails": [x.as_record() for x in xfails],
    }


def _installed_group(matrix: Any) -> str | None:
    """The downstream group whose pins are all installed here (a local run of tests/downstream
    in a venv made from one), else None."""
    from packaging.requirements import Requirement

    def installed(requirement: str) -> bool:
        pin = Requirement(requirement)
        version = _version(pin.name)
        return version is not None and pin.specifier.contains(version, prereleases=True)

    for group in matrix.downstream:
        if all(installed(r) for r in group.requirements):
            return str(group.name)
    return None


CELL = _current_cell()


@pytest.fixture(scope="session")
def matrix_cell() -> dict[str, Any]:
    return CELL


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from harness.matrix.spec import ExpectedFailure  # the one matcher of matrix.toml's patterns

    xfails = [ExpectedFailure.from_record(entry) for entry in CELL["xfails"]]
    for item in items:
        for xfail in xfails:
            if xfail.matches_test(item.nodeid):
                reason = f"[matrix.toml {xfail.origin}, cell {CELL['id']}] {xfail.reason}"
                item.add_marker(pytest.mark.xfail(reason=reason, strict=xfail.strict))


@pytest.fixture(scope="session", autouse=True)
def _junit_suite_properties(record_testsuite_property: Any) -> None:
    for key in ("id", "torch", "torchao", "backend", "python"):
        if CELL.get(key):
            record_testsuite_property(f"cell.{key}", CELL[key])
    for dist in ("torch", "torchao", "numpy", "safetensors", "hypothesis"):
        record_testsuite_property(f"installed.{dist}", _version(dist) or "absent")


_COMPAT_CACHES: list[dict[object, object]] = []  # their memo caches, found again with them
_SEEN: list[tuple[int, int]] = [(-1, -1)]  # (len(sys.modules), id of compat) when found


def _compat_caches() -> list[dict[object, object]]:
    now = (len(sys.modules), id(sys.modules.get("compat")))
    if now != _SEEN[0]:  # a module was imported or removed, or compat replaced: look again
        _COMPAT_CACHES[:] = caches.found(caches.compat_modules().values())
        _SEEN[0] = now
    return _COMPAT_CACHES


@pytest.fixture(autouse=True)
def _cold_compat_caches() -> None:
    """Each test starts with compat's memo caches empty (module-level dicts named ``_*_cache``):
    a test exercises the code it calls, not a result an earlier test left cached. Mutation
    testing needs it too: with warm caches a mutant in a cached path runs in no test at all.
    compat's modules and their caches are looked up again only when sys.modules changed size
    (scanning its thousands of entries before each test cost ~4 s of a cell, and compat's
    modules' names ~0.15 s more)."""
    for cache in _compat_caches():
        cache.clear()


def pytest_configure(config: pytest.Config) -> None:
    # the nightly profile's time budget per property (tests/common/budget.py)
    config.pluginmanager.import_plugin("tests.common.budget")
