"""The peers' own test suites, unmodified, plain and through compat (tests/common/peers).

accelerate's ``tests/test_modeling_utils.py``, ``tests/test_big_modeling.py`` and
``tests/test_hooks.py`` at the release the cell installed, plain and with
``compat.integrations.accelerate.patch()`` installed for the whole session; safetensors' torch
tests (``bindings/python/tests/``) likewise with ``compat.integrations.safetensors.patch()``. The
files come from the release's sdist on the configured index, checked against its sha256 (for
a peer installed from a URL, a gate's candidate: the newest release's below it, said in the
entry's ``note``). A test
that passes plain and fails through compat fails this test (each one named, with the compat run's
failure); a refusal compat lifts on purpose is listed in tests/common/peers/lifted.py. Each
suite's verdict goes to ``$COMPAT_MATRIX_PEERS``, which the cell's record and the report read.

``nox -s matrix -- --peer-suites first`` deselects this module in all but one cell of each
downstream group (CI's budget); every other run has it in every downstream cell.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from tests.common.peers import check, fetch
from tests.common.peers.suites import SUITES, Suite


def _check(suite: Suite, tmp_path: Path) -> None:
    named = os.environ.get(check.RECORD_ENV)
    record = Path(named) if named else None
    logs = record.parent / "peers" if record is not None else tmp_path / "logs"
    try:
        release = importlib.metadata.version(suite.distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"the downstream tier installs {suite.distribution}")
    url = fetch.installed_from_url(suite.distribution)
    try:  # a candidate from a URL: the tests of the newest release below it
        sdist = fetch.locate(suite.distribution, release, tmp_path / "lock", below=bool(url))
        archive = fetch.download(sdist)
    except fetch.PeerFetchError as exc:
        failed = str(exc)
    else:
        failed = ""
    if failed:  # outside the except block: pytest shows the message once, not a chain
        check.write(record, suite.name, check.entry(suite, release, error=failed))
        pytest.fail(f"{suite.name} {release}: {failed}", pytrace=False)
    verdict = check.check(
        suite,
        archive,
        release=release,
        work=tmp_path / "runs",
        logs=logs,
        record=record,
        sha256=sdist.sha256,
        note=(
            f"installed from {url}; no sdist of {release} on the index: the tests of"
            f" {sdist.version}, the newest release below it, run against it"
            if url
            else ""
        ),
    )
    if not verdict["ok"]:
        pytest.fail(verdict["message"], pytrace=False)


def test_accelerate_suite(tmp_path: Path) -> None:
    _check(SUITES["accelerate"], tmp_path)


def test_safetensors_suite(tmp_path: Path) -> None:
    _check(SUITES["safetensors"], tmp_path)
