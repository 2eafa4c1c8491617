"""The verdicts of ``nox -s tests``, ``nox -s matrix`` and CI never depend on chance.

Every run but the nightly gets a derandomized Hypothesis profile (``tests/common/profiles.py``), and
under that profile two runs of a property draw exactly the same examples: drawn here from the
suite's own strategies, twice, and compared. The comparison itself is shown to notice when two
runs draw different examples (two seeds of an otherwise identical profile).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import SimpleNamespace

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from tests.common import budget, profiles
from tests.common.strategies import cases, families

# The environment each kind of run gives the test process (the harness passes its own through):
RUNS: Mapping[str, Mapping[str, str]] = {
    # a plain `nox -s tests` / `nox -s matrix` / `pytest` on a developer's machine
    "local": {},
    # .ci/run exports CI=true
    "ci-run": {"CI": "true"},
    # GitHub sets CI=true; matrix.yml passes its hypothesis-profile input, empty unless nightly
    "github": {"CI": "true", "HYPOTHESIS_PROFILE": ""},
    # the bisection's probes and bench/gpu_check.sh ask for it by name
    "named": {"HYPOTHESIS_PROFILE": "ci"},
    # the harness gives it to a cell on a Python other than the matrix's default
    "corner": {"HYPOTHESIS_PROFILE": "corner"},
}
STRATEGIES = {"cases": cases("cpu"), "families": families("cpu")}


def _draws(
    config: settings, strategy: st.SearchStrategy[object], seed_: int | None = None
) -> list[str]:
    """The examples one run of a property under ``config`` draws, as their reprs (a drawn case
    shows its bases' dtypes, shapes and seeds and each value's op chain)."""
    seen: list[str] = []

    @config
    @given(strategy)
    def prop(value: object) -> None:
        seen.append(repr(value))

    run = prop if seed_ is None else seed(seed_)(prop)
    run()
    return seen


@pytest.mark.parametrize("run", sorted(RUNS))
def test_every_run_but_the_nightly_gets_a_deterministic_profile(run: str) -> None:
    assert profiles.selected(RUNS[run]) in profiles.DETERMINISTIC
    assert profiles.selected({"HYPOTHESIS_PROFILE": "nightly"}) == "nightly"


def _distinct(names: Iterable[str]) -> list[str]:
    """One name per distinct settings among the profiles ``names``: ``corner`` is ``ci``'s
    settings (its share of examples is taken per property, by tests/common/budget.py), so what ``ci``
    draws is what ``corner`` draws, and one of them is enough to draw from."""
    kept: list[str] = []
    for name in sorted(names):
        if all(settings.get_profile(name) != settings.get_profile(other) for other in kept):
            kept.append(name)
    return kept


def test_the_corner_profile_is_the_ci_settings() -> None:
    assert settings.get_profile(profiles.CORNER) == settings.get_profile(profiles.DEFAULT)
    assert _distinct([profiles.CORNER, profiles.DEFAULT]) == [profiles.DEFAULT]
    assert _distinct(["nightly", profiles.DEFAULT]) == [profiles.DEFAULT, "nightly"]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("profile", _distinct({profiles.selected(env) for env in RUNS.values()}))
def test_two_runs_of_a_property_draw_the_same_examples(profile: str, strategy: str) -> None:
    config = settings(settings.get_profile(profile), max_examples=25)
    first = _draws(config, STRATEGIES[strategy])
    second = _draws(config, STRATEGIES[strategy])
    assert len(first) >= 10  # the property ran: there are examples to compare
    assert first == second


def test_the_comparison_sees_two_runs_that_draw_different_examples() -> None:
    # The same profile made random and seeded twice: deterministic, and the draws differ.
    config = settings(settings.get_profile(profiles.DEFAULT), derandomize=False, max_examples=10)
    assert _draws(config, STRATEGIES["cases"], 1) == _draws(config, STRATEGIES["cases"], 1)
    assert _draws(config, STRATEGIES["cases"], 1) != _draws(config, STRATEGIES["cases"], 2)


def test_the_nightly_explores_and_keeps_its_failures() -> None:
    nightly = settings.get_profile("nightly")
    assert not nightly.derandomize
    assert nightly.database is not None
    assert nightly.max_examples >= 1000
    replay = settings.get_profile("replay")
    assert replay.database is not None  # the nightly's database, replayed without new draws
    assert "generate" not in {phase.name for phase in replay.phases}


@pytest.mark.parametrize(("asked", "drawn"), [(60, 15), (400, 100), (30, 10), (8, 8), (1, 1)])
def test_a_corner_draws_a_quarter_of_the_examples_at_least_ten(asked: int, drawn: int) -> None:
    assert profiles.examples_for("corner", asked) == drawn
    assert profiles.examples_for("ci", asked) == asked


def test_under_the_corner_profile_a_property_runs_its_share_of_examples() -> None:
    # the plugin's own path (tests/common/budget.py), on a real property that asks for 60 examples
    seen: list[int] = []

    @settings(settings.get_profile("corner"), max_examples=60)
    @given(st.integers())
    def prop(value: int) -> None:
        seen.append(value)

    item = SimpleNamespace(obj=prop, nodeid="tests/x.py::prop")  # what the plugin reads
    plugin = budget.Budget()
    plugin.configure([], "corner")
    plugin.run(item, prop)  # type: ignore[arg-type]
    assert len(seen) == 15
    assert plugin.drawn == {"tests/x.py::prop": (15, 60)}
    assert prop._hypothesis_internal_use_settings.max_examples == 60  # restored
