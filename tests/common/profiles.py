"""The Hypothesis profiles of every test run, and which one a run gets (one source for both).

- ``ci``: derandomized (each property's examples are derived from its own code, so two runs of
  the same code draw the same examples), 60 examples, no example database. Every run gets it
  unless ``HYPOTHESIS_PROFILE`` names another: ``nox -s tests``, ``nox -s matrix`` (locally and
  in CI), the gate, the bisection, the mutation run. Their verdicts never depend on chance.
- ``nightly``: random exploration, 10,000 examples per property; failing examples are saved in
  the example database ``.hypothesis/examples`` (the nightly keeps it as an artifact).
- ``corner``: ``ci`` with a quarter of each property's examples (:func:`examples_for`; at least
  10, or all it asks for below that), still derandomized. The harness gives it to a cell on a
  Python other than the matrix's default (a Python corner), unless ``HYPOTHESIS_PROFILE`` names
  a profile: the same torch and TorchAO get their full ``ci`` budget in the default Python's
  cell of the same run, and the corner is there to run every test on its interpreter. Measured
  (``python bench/bench_matrix.py corner-budget``): the same lines and branches of compat run
  under it as under ``ci``, in ~60 % of the suite's time.
- ``replay``: only replays what the example database holds (a nightly's failures: unpack its
  ``hypothesis-<session>`` artifact into ``.hypothesis/examples``), generating nothing new, so
  it is deterministic too: ``HYPOTHESIS_PROFILE=replay nox -s tests-torch2.6-ao0.8-cpu``.

Standard library and hypothesis only: the harness's own tests (no torch) load it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

ROOT: Final = Path(__file__).resolve().parent.parent
DATABASE: Final = ROOT / ".hypothesis" / "examples"
DEFAULT: Final = "ci"
CORNER: Final = "corner"
CORNER_SHARE: Final = 0.25  # of the examples a property asks for, in the corner profile
CORNER_FLOOR: Final = 10  # ... but never fewer than this (or all it asks for, if fewer)
ENV: Final = "HYPOTHESIS_PROFILE"
# the profiles whose examples are fixed by the code alone (two runs, same examples)
DETERMINISTIC: Final = frozenset({"ci", "corner", "replay"})
_QUIET: Final = [HealthCheck.too_slow]


def register() -> None:
    settings.register_profile(
        "ci",
        derandomize=True,
        deadline=None,
        database=None,
        max_examples=60,
        print_blob=True,
        suppress_health_check=_QUIET,
    )
    # ci itself; the share of examples is applied per property (tests/common/budget.py)
    settings.register_profile(CORNER, parent=settings.get_profile("ci"))
    # derandomize and the database are set outright: Hypothesis loads its own derandomized "ci"
    # profile where CI is set (GitHub, .ci/run), and a new profile inherits from the loaded one
    settings.register_profile(
        "nightly",
        derandomize=False,
        max_examples=10_000,
        deadline=None,
        database=DirectoryBasedExampleDatabase(str(DATABASE)),
        print_blob=True,
        suppress_health_check=_QUIET,
    )
    settings.register_profile(
        "replay",
        derandomize=False,
        deadline=None,
        database=DirectoryBasedExampleDatabase(str(DATABASE)),
        phases=(Phase.explicit, Phase.reuse),
        print_blob=True,
        suppress_health_check=_QUIET,
    )


def examples_for(profile: str, asked: int) -> int:
    """How many examples a property that asks for ``asked`` draws under ``profile``: all of
    them, but in ``corner`` :data:`CORNER_SHARE` of them, at least :data:`CORNER_FLOOR`."""
    if profile != CORNER:
        return asked
    return max(min(asked, CORNER_FLOOR), round(asked * CORNER_SHARE))


def selected(environ: Mapping[str, str] = os.environ) -> str:
    """The profile a run with this environment gets: ``$HYPOTHESIS_PROFILE``, else ``ci``."""
    return environ.get(ENV) or DEFAULT


def load(environ: Mapping[str, str] = os.environ) -> str:
    """Register the profiles and load the selected one; its name."""
    register()
    name = selected(environ)
    settings.load_profile(name)
    return name
