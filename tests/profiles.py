"""The Hypothesis profiles of every test run, and which one a run gets (one source for both).

- ``ci``: derandomized (each property's examples are derived from its own code, so two runs of
  the same code draw the same examples), 60 examples, no example database. Every run gets it
  unless ``HYPOTHESIS_PROFILE`` names another: ``nox -s tests``, ``nox -s matrix`` (locally and
  in CI), the gate, the bisection, the mutation run. Their verdicts never depend on chance.
- ``nightly``: random exploration, 10,000 examples per property; failing examples are saved in
  the example database ``.hypothesis/examples`` (the nightly keeps it as an artifact).
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
ENV: Final = "HYPOTHESIS_PROFILE"
# the profiles whose examples are fixed by the code alone (two runs, same examples)
DETERMINISTIC: Final = frozenset({"ci", "replay"})
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


def selected(environ: Mapping[str, str] = os.environ) -> str:
    """The profile a run with this environment gets: ``$HYPOTHESIS_PROFILE``, else ``ci``."""
    return environ.get(ENV) or DEFAULT


def load(environ: Mapping[str, str] = os.environ) -> str:
    """Register the profiles and load the selected one; its name."""
    register()
    name = selected(environ)
    settings.load_profile(name)
    return name
