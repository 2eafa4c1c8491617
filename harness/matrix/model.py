"""What the matrix is: its axes' versions, backends, downstream groups, exclusions, expected
failures, cells, and :class:`Matrix` with its queries (which cells a tier holds, a cell's
requirements, its expected failures, what its pytest collects).

Built only by :func:`harness.matrix.spec.load`, which validates matrix.toml first; this module
trusts its fields. Standard library and ``packaging`` only, like the loader: it also runs inside
a cell's venv.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from harness.matrix import wheels
from harness.matrix.toml_table import TomlError

TIERS = ("core", "extended", "downstream", "prerelease")
LATEST = "latest"  # a version label and pin resolved to the newest release at install time
# the label of an axis an installed cell's interpreter lacks (harness/cells/installed.py)
ABSENT = "none"


class MatrixSpecError(TomlError):
    """matrix.toml is malformed; the message names the file, the field and the bad value."""


@dataclass(frozen=True)
class AxisVersion:
    """One value of the torch or TorchAO axis."""

    label: str  # "2.5": the axis label used in cell ids
    pin: str  # "2.5.1": the exact release installed
    extra: tuple[str, ...] = ()  # extra requirements installed with this version
    tier: str = "core"
    pairs: tuple[str, ...] = ()  # TorchAO only: the torch labels it is paired with
    torchvision: str = ""  # torch only: the torchvision release built for it (downstream cells)

    def requirement(self, dist: str) -> str:
        return dist if self.pin == LATEST else f"{dist}=={self.pin}"


@dataclass(frozen=True)
class Backend:
    name: str
    host_probe: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    torch_probe: str = "True"
    index_env: str = ""
    env: tuple[tuple[str, str], ...] = ()  # set for the cell's probe and test run
    runs_on: tuple[str, ...] = ("ubuntu-24.04",)  # GitHub Actions runner labels

    def index_url(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The package index to install torch from, if the user set one in the environment."""
        env = os.environ if environ is None else environ
        value = env.get(self.index_env, "").strip() if self.index_env else ""
        return value or None


@dataclass(frozen=True)
class Downstream:
    """A pinned group of downstream libraries (``[[downstream]]``): the downstream tier runs
    ``tests/downstream`` with it on each torch it lists, with each TorchAO of that torch's tier."""

    name: str  # "2024.12": in cell ids as ds2024.12
    torch: tuple[str, ...]  # the torch labels it is installed with
    requirements: tuple[str, ...]  # exact pins
    about: str = ""

    def distributions(self) -> list[str]:
        """The names of the distributions it pins, as written."""
        return [Requirement(r).name for r in self.requirements]


@dataclass(frozen=True)
class Selector:
    """Which cells an exclusion or expected failure applies to (empty tuple: every value).

    ``downstream`` names downstream groups: an entry that lists any applies to downstream cells
    of those groups only."""

    torch: tuple[str, ...] = ()
    torchao: tuple[str, ...] = ()
    backend: tuple[str, ...] = ()
    downstream: tuple[str, ...] = ()
    python: tuple[str, ...] = ()

    def matches(
        self,
        torch: str,
        torchao: str,
        backend: str,
        downstream: str | None = None,
        python: str | None = None,
    ) -> bool:
        """``python`` None: any Python (a caller that does not know it, e.g. validation)."""
        if self.downstream and downstream not in self.downstream:
            return False
        if self.python and python is not None and python not in self.python:
            return False
        return all(
            not allowed or value in allowed
            for allowed, value in (
                (self.torch, torch),
                (self.torchao, torchao),
                (self.backend, backend),
            )
        )


@dataclass(frozen=True)
class Exclusion:
    where: Selector
    reason: str


@dataclass(frozen=True)
class ExpectedFailure:
    tests: tuple[str, ...]
    where: Selector
    reason: str
    strict: bool = True
    origin: str = ""  # where it was declared: "xfail[3]"

    def as_record(self) -> dict[str, Any]:
        """The JSON form a cell carries (cell-spec.json) and tests/common/cell_plugin.py applies."""
        return {
            "tests": list(self.tests),
            "reason": self.reason,
            "strict": self.strict,
            "origin": self.origin,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ExpectedFailure:
        return cls(
            tuple(record["tests"]),
            Selector(),
            str(record["reason"]),
            bool(record.get("strict", True)),
            str(record.get("origin", "")),
        )

    def matches_test(self, nodeid: str) -> bool:
        return any(fnmatch.fnmatchcase(nodeid, pattern) for pattern in self.tests)


@dataclass(frozen=True)
class Cell:
    """One (python, torch, TorchAO, backend) combination."""

    python: str
    torch: AxisVersion
    torchao: AxisVersion
    backend: Backend
    timeout_s: int
    named_python: bool = False  # not the default Python: the id names it
    downstream: Downstream | None = None  # a downstream cell: the group it installs
    corner: bool = True  # a non-default Python's cell in its torch's tier (else: extended)
    # the prerelease tier's cell: these distributions at their newest release, pre-releases
    # included, installed after the pins (matrix.toml [run] prerelease); empty: any other cell
    prerelease: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        group = f"ds{self.downstream.name}-" if self.downstream else ""
        group += "pre-" if self.prerelease else ""
        py = f"py{self.python}-" if self.named_python else ""
        return f"torch{self.torch.label}-ao{self.torchao.label}-{group}{py}{self.backend.name}"

    @property
    def group(self) -> str | None:
        """The downstream group's name; None for a cell of compat's own suite."""
        return self.downstream.name if self.downstream else None

    @property
    def tier(self) -> str:
        if self.prerelease:
            return "prerelease"
        if self.downstream:
            return "downstream"
        if not self.corner or "extended" in (self.torch.tier, self.torchao.tier):
            return "extended"
        return "core"

    def requirements(self) -> list[str]:
        """The pins installed into the cell, torch first (a downstream cell: then torchvision
        and the group's pins)."""
        pins = [
            self.torch.requirement("torch"),
            self.torchao.requirement("torchao"),
            *self.torch.extra,
            *self.torchao.extra,
        ]
        if self.downstream:
            if self.torch.torchvision:
                pins.append(f"torchvision=={self.torch.torchvision}")
            pins.extend(self.downstream.requirements)
        return pins


@dataclass(frozen=True)
class Matrix:
    path: Path
    python: tuple[str, ...]  # the Python axis, the default Python first
    cell_timeout_s: int
    default_cell: tuple[str, str, str]
    test_requirements: tuple[str, ...]
    torch: tuple[AxisVersion, ...]
    torchao: tuple[AxisVersion, ...]
    backends: Mapping[str, Backend]
    exclusions: tuple[Exclusion, ...] = ()
    xfails: tuple[ExpectedFailure, ...] = field(default=())
    reruns: int = 0
    peer_requirements: tuple[str, ...] = ()  # the optional peer group (drift cells only)
    peer_tiers: tuple[str, ...] = ()
    downstream: tuple[Downstream, ...] = ()
    downstream_tests: str = "tests/downstream"  # what a downstream cell runs
    compat_tests: str = "tests"  # what every other cell runs: compat's own suite
    carry: tuple[
        str, ...
    ] = ()  # axes whose cells carry the verdicts of the tests independent of them
    published: wheels.Published | None = None  # wheels.toml; None: every Python of the axis
    downstream_requirements: tuple[str, ...] = ()  # installed in downstream cells only
    # the peers' own suites (tests/common/peers): the module `--peer-suites first` deselects
    # in all but one cell of each downstream group; "": none
    peer_suites: str = ""
    prerelease: tuple[str, ...] = ()  # the prerelease tier's distributions (newest, pre included)

    @property
    def default_python(self) -> str:
        return self.python[0]

    def ships(self, python: str, torch: AxisVersion, torchao: AxisVersion) -> bool:
        """Whether both releases were published for ``python`` (wheels.toml)."""
        if self.published is None:
            return True
        return self.published.ships("torch", torch.pin, python) and self.published.ships(
            "torchao", torchao.pin, python
        )

    def not_published(self, tiers: Iterable[str] = ("core",)) -> list[dict[str, str]]:
        """The combinations of ``tiers``' torch and TorchAO pairs with a Python of the axis that
        have no wheel, each with the release that lacks it (shown by the report, never run)."""
        wanted, out, published = set(tiers), [], self.published
        if published is None:
            return []
        for t in self.torch:
            for a in self.torchao:
                tier = "extended" if "extended" in (t.tier, a.tier) else "core"
                if not paired(t, a) or not wanted & {tier, "extended"}:
                    continue
                for py in self.python:
                    lacking = [
                        f"{dist} {v.pin}"
                        for dist, v in (("torch", t), ("torchao", a))
                        if not published.ships(dist, v.pin, py)
                    ]
                    if not lacking:
                        continue
                    out.append(
                        {
                            "python": py,
                            "torch": t.label,
                            "torchao": a.label,
                            "lacking": " and ".join(lacking),
                        }
                    )
        return out

    def corners(self, torch: AxisVersion) -> dict[str, AxisVersion]:
        """A torch's corner cells: its oldest and newest published Python other than the default
        one, each with the newest TorchAO of the torch's tier published for it."""
        pythons = [
            py
            for py in sorted(self.python, key=lambda p: int(p.split(".")[1]))
            if any(paired(torch, a) and self.ships(py, torch, a) for a in self.torchao)
        ]
        out: dict[str, AxisVersion] = {}
        for py in {pythons[0], pythons[-1]} if pythons else ():
            if py == self.default_python:
                continue
            same_tier = [
                a
                for a in self.torchao
                if paired(torch, a) and a.tier == torch.tier and self.ships(py, torch, a)
            ]
            if same_tier:
                out[py] = max(same_tier, key=lambda a: label_key(a.label))
        return out

    @property
    def root(self) -> Path:
        """The project the matrix belongs to: its tests/ and requirements/ sit beside it."""
        return self.path.resolve().parent

    def requirements_for(self, cell: Cell) -> list[str]:
        """Requirements files installed into ``cell`` after its pins."""
        peers = self.peer_requirements if cell.tier in self.peer_tiers else ()
        downstream = self.downstream_requirements if cell.downstream else ()
        return [*self.test_requirements, *peers, *downstream]

    def test_paths(self, cell: Cell) -> list[str]:
        """What the cell's pytest collects: a downstream cell the downstream tier's suite, every
        other cell compat's own (two folders, each with its own conftest: nothing is left out)."""
        return [self.downstream_tests if cell.downstream else self.compat_tests]

    def cells(
        self,
        *,
        tiers: Iterable[str] = ("core",),
        torch: str | None = None,
        torchao: str | None = None,
        backend: str | None = None,
        python: str | None = None,
    ) -> list[Cell]:
        """Every cell not excluded, in matrix.toml order (the downstream tier's after the
        others), filtered by the given axis values."""
        wanted = set(tiers)
        groups: list[Downstream | None] = [None, *self.downstream]
        out = []
        for group in groups:
            for cell in [*self._cells_of(group), *([] if group else self._prerelease_cells())]:
                if cell.tier not in wanted or self.excluded(cell) is not None:
                    continue
                if any(
                    want is not None and want != have
                    for want, have in (
                        (torch, cell.torch.label),
                        (torchao, cell.torchao.label),
                        (backend, cell.backend.name),
                        (python, cell.python),
                    )
                ):
                    continue
                out.append(cell)
        return out

    def _prerelease_cells(self) -> Iterable[Cell]:
        """The prerelease tier: on each backend, the ``latest`` torch with the ``latest`` TorchAO
        (compat's own suite, default Python), then ``[run] prerelease`` at their newest releases,
        pre-releases included (harness/matrix/prerelease.py, when the cell installs)."""
        latest = [
            (t, a)
            for t in self.torch
            for a in self.torchao
            if LATEST == t.pin == a.pin and paired(t, a)
        ]
        if not self.prerelease or not latest:
            return
        t, a = latest[0]
        for b in self.backends.values():
            yield Cell(
                self.default_python, t, a, b, self.cell_timeout_s, prerelease=self.prerelease
            )

    def _cells_of(self, group: Downstream | None) -> Iterable[Cell]:
        """Compat's own cells (``group`` None), or one downstream group's: each torch it lists
        with each TorchAO paired with that torch, core or extended (a group is not capped by the
        core tier: torch 2.6's includes TorchAO 0.9, which pairs with it). On the default
        Python every pair; on another Python (compat's own cells only) every published pair,
        the torch's corners in its tier and the rest extended."""
        corners = {t.label: self.corners(t) for t in self.torch} if group is None else {}
        for py in self.python:
            named = py != self.default_python
            if named and group is not None:
                continue  # the downstream tier runs on the default Python
            for b in self.backends.values():
                for t in self.torch:
                    if group is not None and t.label not in group.torch:
                        continue
                    for a in self.torchao:
                        if not paired(t, a):  # a downstream group too: core or extended TorchAO
                            continue
                        if not self.ships(py, t, a):
                            continue  # not published: Matrix.not_published shows it
                        corner = not named or corners[t.label].get(py) == a
                        yield Cell(
                            py,
                            t,
                            a,
                            b,
                            self.cell_timeout_s,
                            named_python=named,
                            downstream=group,
                            corner=corner,
                        )

    def excluded(self, cell: Cell) -> Exclusion | None:
        axes = (cell.torch.label, cell.torchao.label, cell.backend.name, cell.group, cell.python)
        for exclusion in self.exclusions:
            if exclusion.where.matches(*axes):
                return exclusion
        return None

    def xfails_for(
        self,
        torch: str,
        torchao: str,
        backend: str,
        downstream: str | None = None,
        python: str | None = None,
    ) -> list[ExpectedFailure]:
        """The expected failures of a cell (``python`` None: the default Python). A downstream
        cell runs the downstream tests only, so it takes the entries that name its group, and
        every other cell those that name none."""
        py = python or self.default_python
        return [
            x
            for x in self.xfails
            if bool(x.where.downstream) == (downstream is not None)
            and x.where.matches(torch, torchao, backend, downstream, py)
        ]

    def find_cell(
        self,
        torch: str,
        torchao: str,
        backend: str,
        downstream: str | None = None,
        python: str | None = None,
    ) -> Cell | None:
        """The cell of these axis values: compat's own (``downstream`` None) or a downstream
        group's, on ``python`` (None: the default Python)."""
        py = python or self.default_python
        for cell in self.cells(
            tiers=TIERS, torch=torch, torchao=torchao, backend=backend, python=py
        ):
            if cell.group == downstream:
                return cell
        return None

    def downstream_group(self, name: str) -> Downstream | None:
        return next((g for g in self.downstream if g.name == name), None)

    def default(self) -> Cell:
        cell = self.find_cell(*self.default_cell)
        if cell is None:  # load() already checked the values; only an exclusion can get here
            raise MatrixSpecError(self.path, "run.default_cell", "is excluded", self.default_cell)
        return cell


def label_key(label: str) -> tuple[int, Version]:
    """Numeric order of axis labels ("2.10" after "2.9"), with ``latest`` after every release
    and ``none`` (an installed cell's interpreter without it) before them."""
    if label == ABSENT:
        return (-1, Version("0"))
    return (1, Version("0")) if label == LATEST else (0, Version(label))


def paired(torch: AxisVersion, torchao: AxisVersion) -> bool:
    """Whether a torch and a TorchAO version make a cell: a TorchAO entry's ``torch`` list when
    it has one (TorchAO's own compatibility table), else every torch of the same tier."""
    return torch.label in torchao.pairs if torchao.pairs else torch.tier == torchao.tier
