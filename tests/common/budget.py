"""The nightly profile's time budget: a property generates its examples until it has them all or
its share of the cell's time is spent, whichever comes first, and a property the clock stopped
is reported as such (never hidden, never a failure).

Why: the nightly asks 10,000 examples per property, and a cell has one wall-clock limit for install
and tests (matrix.toml ``cell_timeout_s``, 1,500 s). Measured on this project's 2-core machine, the
default cell with 10,000 examples per property needs hours (``tests/compat/sharing/test_sharing.py`` alone
did not finish in 300 s), so every nightly cell ran past its limit and the night was red by timeout.
Now the properties of a cell share :data:`SHARE` of the cell's limit, split evenly among the
properties collected; the rest is for install, collection, the example-based tests and a rerun.

The ``corner`` profile (a cell on a non-default Python, ``tests/common/profiles.py``) has an example
budget instead, fixed and without a clock: each property draws
:func:`tests.common.profiles.examples_for` of the examples it asks for, and the terminal summary says so.

How, per property (only in the profiles of :data:`BUDGETED`; ``ci``, ``corner`` and ``replay``
never read the clock, so their verdicts never depend on time):

1. it runs in rounds, each a Hypothesis run of its own (each replays the example database
   first): :data:`CALIBRATION` examples, then each round as many as fit in what is left of the
   property's share at the cost per example measured so far, at most :data:`GROWTH` times the
   examples run so far (later examples are larger: measured here, one estimate from the first
   ten examples ran a property 3.7x past its share), until the property has all the examples
   its settings ask (10,000 in ``nightly``) or its share is spent;
2. when it ran fewer than asked, the property is recorded: the test's ``user_properties``
   (``hypothesis-budget``, in the reportlog the harness keeps), and a section of the terminal
   summary naming each one with its examples run, asked and seconds.

Measured here (2 cores, with other work running): the default cell under ``nightly`` took 425 s
in all (1,500 s limit), its 36 properties 21 s each; 16 of them stopped at the clock (the
longest ran 25 s), the others ran their 10,000 examples.

``$COMPAT_PROPERTY_BUDGET_S`` overrides the total for all properties of the session. A pytest
plugin: tests/common/cell_plugin.py registers it (``-p tests.common.budget`` does the same for another suite).

A property that needs another number of examples than the profile's in the deterministic runs
says so with ``@pytest.mark.examples(N)`` (:data:`MARKER`), never with ``@settings(max_examples=N)``:
an explicit setting overrides every profile, so the nightly drew those N too instead of exploring
its 10,000 (measured: a property marked 400 stopped at 400 under ``nightly``). The marker sets
what the property draws under ``ci`` (and its share under ``corner``); ``nightly`` and ``replay``
keep their own.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pytest
from hypothesis import settings

from tests.common import profiles

ENV: Final = "COMPAT_PROPERTY_BUDGET_S"
BUDGETED: Final = frozenset({"nightly"})
# the properties' share of a cell's limit. Measured on this machine (2 cores, like a GitHub
# hosted runner of a private repository; a public one has 4 cores of the same speed class, and a
# cell runs single-threaded): a cell's install takes ~60-180 s cold, collection ~10 s, the
# example-based tests ~40 s; a failing property is rerun once (pytest-rerunfailures), replaying
# its failure from the database first, in seconds. Half the limit leaves the other half for them.
SHARE: Final = 0.5
CALIBRATION: Final = 10  # the first round's examples
GROWTH: Final = 3  # a round runs at most this many times the examples run before it
PROPERTY: Final = "hypothesis-budget"
MARKER: Final = "examples"  # @pytest.mark.examples(N): the property's examples under ci / corner
FIXED: Final = frozenset({profiles.DEFAULT, profiles.CORNER})  # the profiles the marker sets


@dataclass(frozen=True)
class Cut:
    """A property the clock stopped: it ran ``ran`` of ``asked`` examples in ``seconds``."""

    test: str
    asked: int
    ran: int
    seconds: float
    budget: float

    def line(self) -> str:
        return (
            f"{self.test}: {self.ran} of {self.asked} examples in {self.seconds:.0f} s"
            f" (its share of the time budget: {self.budget:.0f} s)"
        )


def total_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds for all the session's properties: ``$COMPAT_PROPERTY_BUDGET_S``, else
    :data:`SHARE` of matrix.toml's ``cell_timeout_s`` (the matrix the harness runs), split
    evenly among the sessions that share the cell's deadline (``$COMPAT_MATRIX_SESSIONS``, set
    by the harness: a carry source's TorchAO-blocked run and its own run are two)."""
    from harness.matrix import (
        paths,
        spec,  # standard library + packaging only
    )

    raw = environ.get(ENV, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise pytest.UsageError(f"{ENV}={raw!r}: expected a positive number of seconds")
        return value
    shared = environ.get(paths.SESSIONS_ENV, "").strip() or "1"
    if not (shared.isdigit() and int(shared) > 0):
        raise pytest.UsageError(
            f"{paths.SESSIONS_ENV}={shared!r}: expected how many test sessions share the"
            " cell's deadline, a whole number from 1"
        )
    return SHARE * spec.load(paths.matrix_path(environ)).cell_timeout_s / int(shared)


def is_property(item: pytest.Item) -> bool:
    return isinstance(item, pytest.Function) and bool(
        getattr(item.obj, "is_hypothesis_test", False)
    )


def declared(item: Any) -> int | None:
    """The examples ``item`` asks for with ``@pytest.mark.examples(N)``, or None without it."""
    closest = getattr(item, "get_closest_marker", None)
    mark = closest(MARKER) if closest is not None else None
    if mark is None:
        return None
    value = mark.args[0] if len(mark.args) == 1 and not mark.kwargs else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{MARKER}{mark.args!r}: expected one positive number"
            " of examples, e.g. @pytest.mark.examples(200)"
        )
    return value


class Budget:
    """The session's budget: set up at collection, applied per property, summarised at the end."""

    def __init__(self) -> None:
        self.per_property = 0.0  # 0: no budget (a profile outside BUDGETED)
        self.cuts: list[Cut] = []
        self.profile = profiles.DEFAULT
        self.drawn: dict[str, tuple[int, int]] = {}  # corner: test -> (examples drawn, asked)

    def configure(self, items: list[pytest.Item], profile: str) -> None:
        self.profile = profile
        count = sum(1 for item in items if is_property(item))
        if profile in BUDGETED and count:
            self.per_property = total_seconds() / count

    def applies(self, item: pytest.Item) -> bool:
        if not is_property(item):
            return False
        if self.per_property > 0 or self.profile == profiles.CORNER:
            return True
        return self.profile in FIXED and declared(item) is not None

    def run_share(self, item: pytest.Function, call: Callable[[], Any]) -> None:
        """Run the property ``item`` with the examples its profile's share gives it: of the
        examples its marker declares under ``ci`` / ``corner``, else of its settings'."""
        test = item.obj
        asked_settings: settings = test._hypothesis_internal_use_settings
        marked = declared(item) if self.profile in FIXED else None
        asked = marked or int(asked_settings.max_examples)
        drawn = profiles.examples_for(self.profile, asked)
        if self.profile == profiles.CORNER:
            self.drawn[item.nodeid] = (drawn, asked)
        _with_examples(test, asked_settings, drawn, call)

    def run(self, item: pytest.Function, call: Callable[[], Any]) -> None:
        """Run the property ``item`` (``call`` calls it) within its share; record a cut.

        In rounds: :data:`CALIBRATION` examples, then each round at most :data:`GROWTH` times
        the examples run so far and no more than the time left allows at the cost measured so
        far (examples grow as Hypothesis explores, so the cost is measured again each round)."""
        if not self.per_property:
            self.run_share(item, call)
            return
        test = item.obj
        asked_settings: settings = test._hypothesis_internal_use_settings
        asked = int(asked_settings.max_examples)
        start = time.monotonic()
        ran = 0
        chunk = min(CALIBRATION, asked)
        while chunk > 0:
            _with_examples(test, asked_settings, chunk, call)
            ran += chunk
            spent = time.monotonic() - start
            left = self.per_property - spent
            if ran >= asked or left <= 0:
                break
            fits = int(left * ran / spent) if spent > 0 else asked
            chunk = min(asked - ran, GROWTH * ran, fits)
        if ran < asked:
            cut = Cut(item.nodeid, asked, ran, time.monotonic() - start, self.per_property)
            self.cuts.append(cut)
            item.user_properties.append((PROPERTY, json.dumps(cut.__dict__)))

    def summary(self, reporter: Any) -> None:
        if self.drawn:
            drawn = sum(d for d, _ in self.drawn.values())
            asked = sum(a for _, a in self.drawn.values())
            reporter.section(f"hypothesis: the {self.profile} profile's example budget")
            reporter.write_line(
                f"{len(self.drawn)} properties drew {drawn} of the {asked} examples they ask for"
                f" ({profiles.CORNER_SHARE:.0%} each, at least {profiles.CORNER_FLOOR})"
            )
        if not self.per_property:
            return
        reporter.section("hypothesis: properties stopped by the time budget")
        reporter.write_line(
            f"profile {profiles.selected()}: {self.per_property:.0f} s per property"
            f" ({ENV} or {SHARE} of the cell's limit, split evenly)"
        )
        for cut in self.cuts:
            reporter.write_line(cut.line())
        if not self.cuts:
            reporter.write_line("none: every property ran all the examples it asks for")


def _with_examples(test: Any, base: settings, examples: int, call: Callable[[], Any]) -> None:
    test._hypothesis_internal_use_settings = settings(base, max_examples=examples)
    try:
        call()
    finally:
        test._hypothesis_internal_use_settings = base


BUDGET = Budget()


def overriding(items: list[pytest.Item], profile: settings) -> list[str]:
    """The properties whose own settings ask another number of examples than ``profile``'s:
    an explicit ``max_examples`` (which every profile would then draw, the nightly's included)."""
    asked = {
        item.nodeid: int(item.obj._hypothesis_internal_use_settings.max_examples)
        for item in items
        if is_property(item)
    }
    return [f"{name} (max_examples={n})" for name, n in asked.items() if n != profile.max_examples]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    bad = overriding(items, settings.default)
    if bad:
        raise pytest.UsageError(
            "these properties set max_examples in @settings, which overrides every profile (the"
            f" nightly would draw only that many): {', '.join(bad)}; declare the examples of the"
            f" deterministic runs with @pytest.mark.{MARKER}(N) instead (tests/common/budget.py)"
        )
    BUDGET.configure(items, profiles.selected())


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A property under a budgeted profile runs within its share of the cell's time; under
    ``corner``, with its share of the examples."""
    if not BUDGET.applies(pyfuncitem):
        return None  # pytest calls the test as usual
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    BUDGET.run(pyfuncitem, lambda: pyfuncitem.obj(**args))
    return True


def pytest_terminal_summary(terminalreporter: Any) -> None:
    BUDGET.summary(terminalreporter)
