"""The peers' own test suites, run unmodified in the downstream cells: plain, then through compat.

A suite (:mod:`.suites`) is a peer's test files at the release the cell installed, taken from
that release's sdist on the configured package index (:mod:`.fetch`: located with ``uv pip
compile``, checked against the index's sha256, cached by hash). Each cell runs it twice in its
own interpreter (:mod:`.run`): plain, and with compat's patch installed for the whole pytest
session by a plugin (:mod:`.plugins`). The verdict is a diff per test id (:mod:`.diff`): passes
plain and fails through compat is a regression; fails plain and passes through compat is fixed;
a refusal compat lifts on purpose is listed with its reason (:mod:`.lifted`). The test module is
``tests/downstream/test_peer_suites.py``; the cell's record takes each suite's verdict from
``$COMPAT_MATRIX_PEERS``. Nothing here imports torch: the harness's own tests use it too.
"""
