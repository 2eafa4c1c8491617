"""The test matrix's harness, in layers; a package imports only from the layers before it.

- :mod:`harness.matrix`: what the matrix is (``matrix.toml``, published wheels, interpreters,
  backends) and the shared plumbing (repository paths, logged subprocesses);
- :mod:`harness.cells`: running cells and judging them (a cell, a group of cells sharing a venv,
  the whole run, carried verdicts, the evidence of a test run, the run's verdict, the installed
  cell);
- :mod:`harness.report`: the matrix report, its history across runs, the support window;
- :mod:`harness.ci`: GitHub Actions (the matrix JSON, the gate, commit statuses, the nightly's
  issue, upstream triggers);
- :mod:`harness.bisect` and :mod:`harness.mutation`: which release did it, and how much the suite
  catches (both run cells);
- :mod:`harness.dist`: the release's distributions, built once and checked, and the suite run
  against the installed wheel (it runs cells).
"""

# the layers, in order: a module imports from its own package and the packages of earlier layers
# (tests/harness/test_layers.py checks every import, and that there is no cycle)
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"matrix"}),
    frozenset({"cells"}),
    frozenset({"report", "bisect", "mutation", "dist"}),
    frozenset({"ci"}),
)
