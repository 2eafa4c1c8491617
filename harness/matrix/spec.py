"""matrix.toml → validated, typed cells.

The one loader of the matrix axes: the noxfile, the GitHub matrix emitter and the test suite's
expected failures all go through :func:`load`. It uses only the standard library and
``packaging`` so that it also runs inside a cell's venv. Every validation error names the file,
the field and the bad value.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from harness.matrix import wheels
from harness.matrix.paths import DEFAULT_MATRIX
from harness.matrix.toml_table import Table, TomlError, read

DEFAULT_PATH = DEFAULT_MATRIX  # the repository's matrix.toml

TIERS = ("core", "extended", "downstream", "prerelease")
VERSION_TIERS = ("core", "extended")  # what a [[torch]] / [[torchao]] entry may name
# the axes [run] carry may name: TorchAO, whose cells of one torch share a venv
# (harness/cells/carry.py)
CARRY_AXES = ("torchao",)
_DIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a distribution's name (PEP 508)
_GROUP = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.]*$")  # a downstream group's name, inside cell ids
_LABEL = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
LATEST = "latest"  # a version label and pin resolved to the newest release at install time
ABSENT = "none"  # the label of an axis an installed cell's interpreter lacks (harness/installed)
_PYTHON = re.compile(r"^3\.(0|[1-9][0-9]*)$")
_BACKEND = re.compile(r"^[a-z][a-z0-9_]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLATFORMS = ("aix", "cygwin", "darwin", "emscripten", "linux", "wasi", "win32")  # sys.platform


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


# --- loading ------------------------------------------------------------------------------


class _Reader(Table):
    """A table of matrix.toml."""

    error = MatrixSpecError


def _requirements(r: _Reader, key: str) -> tuple[str, ...]:
    extra = r.strings(key, [])
    for i, item in enumerate(extra):
        try:
            Requirement(item)
        except InvalidRequirement as exc:
            raise r.fail(f"{key}[{i}]", f"is not a valid requirement: {exc}", item) from None
    return extra


def _versions(path: Path, doc: dict[str, Any], axis: str) -> tuple[AxisVersion, ...]:
    entries = doc.get(axis)
    if not isinstance(entries, list) or not entries:
        raise MatrixSpecError(path, axis, "must be a non-empty array of tables", entries)
    seen: dict[str, int] = {}
    out = []
    for i, entry in enumerate(entries):
        keys = ("version", "pin", "extra", "tier") + (
            ("torch",) if axis == "torchao" else ("torchvision",)
        )
        r = _Reader(path, f"{axis}[{i}]", entry, keys)
        label = r.get("version", str)
        if not _LABEL.match(label) and label != LATEST:
            raise r.fail("version", f"must be MAJOR.MINOR, e.g. '2.5', or {LATEST!r}", label)
        if label in seen:
            raise r.fail("version", f"duplicate of {axis}[{seen[label]}].version", label)
        seen[label] = i
        pin = r.get("pin", str)
        tier = r.get("tier", str, "core")
        if tier not in VERSION_TIERS:
            raise r.fail("tier", f"must be one of {list(VERSION_TIERS)}", tier)
        pairs = r.strings("torch", [])
        if "torch" in r.table and not pairs:
            raise r.fail(
                "torch",
                "must list at least one torch version (omit it to pair with every torch of the"
                " same tier)",
                [],
            )
        for j, paired_label in enumerate(pairs):
            if paired_label in pairs[:j]:
                raise r.fail(f"torch[{j}]", "is listed twice", paired_label)
        if (label == LATEST) != (pin == LATEST):
            raise r.fail("pin", f"{LATEST!r} goes with version {LATEST!r} only", pin)
        if label == LATEST:
            if tier != "extended":
                raise r.fail("tier", f"a {LATEST!r} entry must be in the extended tier", tier)
            out.append(AxisVersion(label, pin, _requirements(r, "extra"), tier, pairs))
            continue
        torchvision = r.get("torchvision", str, "")
        if torchvision and not _exact(torchvision):
            raise r.fail("torchvision", "must be an exact release MAJOR.MINOR.PATCH", torchvision)
        try:
            parsed = Version(pin)
        except InvalidVersion:
            raise r.fail("pin", "is not a PEP 440 version", pin) from None
        if parsed.local or parsed.is_devrelease or "*" in pin or len(parsed.release) < 3:
            raise r.fail("pin", "must be an exact release MAJOR.MINOR.PATCH", pin)
        if f"{parsed.major}.{parsed.minor}" != label:
            raise r.fail("pin", f"does not belong to version {label!r}", pin)
        out.append(AxisVersion(label, pin, _requirements(r, "extra"), tier, pairs, torchvision))
    return tuple(out)


def _exact(pin: str) -> bool:
    """An exact release MAJOR.MINOR.PATCH (no local part, no dev release, no wildcard)."""
    try:
        parsed = Version(pin)
    except InvalidVersion:
        return False
    return not (parsed.local or parsed.is_devrelease or "*" in pin or len(parsed.release) < 3)


def _downstream(
    path: Path, doc: dict[str, Any], torch: tuple[AxisVersion, ...]
) -> tuple[Downstream, ...]:
    """The ``[[downstream]]`` groups: each pins its libraries exactly and names core or extended
    torch versions that have a torchvision; a torch belongs to one group at most."""
    labels = {t.label: t for t in torch}
    owner: dict[str, str] = {}
    out: list[Downstream] = []
    for i, entry in enumerate(doc.get("downstream", [])):
        r = _Reader(path, f"downstream[{i}]", entry, ("name", "torch", "requirements", "about"))
        name = r.get("name", str)
        if not _GROUP.match(name):
            raise r.fail("name", "must be letters, digits and dots, e.g. '2024.12'", name)
        if any(g.name == name for g in out):
            raise r.fail("name", "is the name of another downstream group", name)
        chosen = r.strings("torch")
        if not chosen:
            raise r.fail("torch", "must list the torch versions the group is installed with", [])
        for j, label in enumerate(chosen):
            version = labels.get(label)
            if version is None:
                raise r.fail(f"torch[{j}]", f"unknown torch value; known: {list(labels)}", label)
            if not version.torchvision:
                raise r.fail(
                    f"torch[{j}]",
                    "has no torchvision pin (add torchvision = '...' to its [[torch]] entry)",
                    label,
                )
            if label in owner:
                raise r.fail(
                    f"torch[{j}]", f"is already in downstream group {owner[label]!r}", label
                )
            owner[label] = name
        requirements = _requirements(r, "requirements")
        if not requirements:
            raise r.fail("requirements", "must pin the group's libraries", [])
        for j, item in enumerate(requirements):
            specifiers = list(Requirement(item).specifier)
            if len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in item:
                raise r.fail(f"requirements[{j}]", "must be an exact pin name==version", item)
        out.append(Downstream(name, chosen, requirements, r.get("about", str, "")))
    return tuple(out)


def _backends(path: Path, doc: dict[str, Any]) -> dict[str, Backend]:
    table = doc.get("backends")
    if not isinstance(table, dict) or not table:
        raise MatrixSpecError(path, "backends", "must be a non-empty table", table)
    out = {}
    for name, entry in table.items():
        if not _BACKEND.match(name):
            raise MatrixSpecError(path, f"backends.{name}", "is not a valid backend name", name)
        r = _Reader(
            path,
            f"backends.{name}",
            entry,
            ("host_probe", "platforms", "torch_probe", "index_env", "env", "runs_on"),
        )
        if not any(key in r.table for key in ("host_probe", "platforms", "torch_probe")):
            raise MatrixSpecError(
                path,
                f"backends.{name}",
                "must say how a runner without it is detected: a host_probe command, the"
                " platforms it exists on, or a torch_probe expression",
            )
        probe = r.get("torch_probe", str, "True")
        if "torch_probe" in r.table:
            _check_torch_probe(r, probe)
        host_probe = r.strings("host_probe", [])
        if "host_probe" in r.table and not host_probe:
            raise r.fail("host_probe", "must name a command (a list of its words)", [])
        platforms = r.strings("platforms", [])
        if "platforms" in r.table and not platforms:
            raise r.fail("platforms", f"must list sys.platform values, from {list(PLATFORMS)}", [])
        for i, value in enumerate(platforms):
            if value not in PLATFORMS:
                raise r.fail(
                    f"platforms[{i}]",
                    f"is not a sys.platform value; known: {list(PLATFORMS)}",
                    value,
                )
        index_env = r.get("index_env", str, "")
        if index_env and not _ENV_NAME.match(index_env):
            raise r.fail("index_env", "is not an environment variable name", index_env)
        env = r.get("env", dict, {})
        for key, value in env.items():
            if not _ENV_NAME.match(key):
                raise r.fail(f"env.{key}", "is not an environment variable name", key)
            if not isinstance(value, str):
                raise r.fail(f"env.{key}", "must be a string", value)
        runs_on = r.strings("runs_on", ["ubuntu-24.04"])
        if not runs_on:
            raise r.fail("runs_on", "must list the runner labels of the backend's jobs", [])
        out[name] = Backend(
            name,
            host_probe=host_probe,
            platforms=platforms,
            torch_probe=probe,
            index_env=index_env,
            env=tuple(sorted(env.items())),
            runs_on=runs_on,
        )
    return out


def _check_torch_probe(r: _Reader, probe: str) -> None:
    """A torch probe is a Python expression that asks torch something: a constant can never
    be false, so it would detect nothing."""
    try:
        tree = ast.parse(probe, f"{r.where}.torch_probe", "eval")
    except SyntaxError:
        raise r.fail("torch_probe", "is not a Python expression", probe) from None
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    if "torch" not in names:
        raise r.fail(
            "torch_probe", "must ask torch (a constant is never false, so detects nothing)", probe
        )


def _selector(r: _Reader, axes: Mapping[str, Iterable[str]]) -> Selector:
    values: dict[str, tuple[str, ...]] = {}
    for axis, known in axes.items():
        chosen = r.strings(axis, [])
        known_list = list(known)
        for i, value in enumerate(chosen):
            if value not in known_list:
                raise r.fail(f"{axis}[{i}]", f"unknown {axis} value; known: {known_list}", value)
        values[axis] = chosen
    return Selector(**values)


def _reason(r: _Reader) -> str:
    reason: str = r.get("reason", str)
    if not reason.strip():
        raise r.fail("reason", "must not be empty", reason)
    return reason


RUN_KEYS = (
    "python",
    "default_python",
    "cell_timeout_s",
    "default_cell",
    "test_requirements",
    "reruns",
    "peer_requirements",
    "peer_tiers",
    "downstream_tests",
    "compat_tests",
    "downstream_requirements",
    "peer_suites",
    "carry",
    "prerelease",
)


def _run_python(path: Path, run: _Reader) -> tuple[tuple[str, ...], wheels.Published | None]:
    """``[run] python`` with the default Python first, and wheels.toml's record of them."""
    python = run.strings("python")
    if not python:
        raise run.fail("python", "must list at least one version")
    for i, py in enumerate(python):
        if not _PYTHON.match(py):
            raise run.fail(f"python[{i}]", "must look like '3.11'", py)
    if len(set(python)) != len(python):
        raise run.fail("python", "has a duplicate version", python)
    default_python = run.get("default_python", str, python[0])
    if default_python not in python:
        raise run.fail("default_python", f"must be one of {list(python)}", default_python)
    ordered = (default_python, *(p for p in python if p != default_python))
    if (path.parent / wheels.FILE).exists():
        try:
            return ordered, wheels.load(path.parent / wheels.FILE)
        except wheels.WheelsError as exc:
            raise MatrixSpecError(path, "run.python", str(exc)) from None
    if len(ordered) > 1:
        raise run.fail(
            "python",
            f"names several Pythons but {path.parent / wheels.FILE} is missing: run "
            "`python -m harness.matrix.wheels --write`",
            list(ordered),
        )
    return ordered, None


def _run_files(run: _Reader) -> dict[str, Any]:
    """The ``[run]`` settings about what cells install and run, checked."""
    peer_tiers = run.strings("peer_tiers", [])
    for i, tier in enumerate(peer_tiers):
        if tier not in TIERS:
            raise run.fail(f"peer_tiers[{i}]", f"must be one of {list(TIERS)}", tier)
    downstream_tests = run.get("downstream_tests", str, "tests/downstream")
    if not downstream_tests.startswith("tests/"):
        raise run.fail("downstream_tests", "must be a folder under tests/", downstream_tests)
    compat_tests = run.get("compat_tests", str, "tests")
    if compat_tests != "tests" and not compat_tests.startswith("tests/"):
        raise run.fail("compat_tests", "must be tests/ or a folder under it", compat_tests)
    peer_suites = run.get("peer_suites", str, "")
    home = downstream_tests.rstrip("/") + "/"
    if peer_suites and not (peer_suites.startswith(home) and peer_suites.endswith(".py")):
        raise run.fail("peer_suites", f"must be a test module under {home}", peer_suites)
    return {
        "test_requirements": run.strings("test_requirements", []),
        "peer_requirements": run.strings("peer_requirements", []),
        "peer_tiers": peer_tiers,
        "downstream_tests": downstream_tests,
        "compat_tests": compat_tests,
        "downstream_requirements": run.strings("downstream_requirements", []),
        "peer_suites": peer_suites,
    }


def _suites_apart(run: _Reader, compat_tests: str, downstream_tests: str) -> None:
    """With downstream groups, compat's suite must be a folder apart from the downstream tier's:
    each cell runs its suite by path, and a folder holding the other would collect it too."""
    mine, theirs = compat_tests.rstrip("/") + "/", downstream_tests.rstrip("/") + "/"
    if mine.startswith(theirs) or theirs.startswith(mine):
        raise run.fail(
            "compat_tests",
            f"must be a folder apart from downstream_tests ({downstream_tests!r}), neither "
            "inside the other, where [[downstream]] groups exist",
            compat_tests,
        )


def _run_policy(run: _Reader) -> dict[str, Any]:
    """The ``[run]`` settings about how cells run, checked."""
    timeout = run.get("cell_timeout_s", int)
    if timeout <= 0:
        raise run.fail("cell_timeout_s", "must be a positive number of seconds", timeout)
    reruns = run.get("reruns", int, 0)
    if not 0 <= reruns <= 5:
        raise run.fail("reruns", "must be between 0 and 5", reruns)
    prerelease = run.strings("prerelease", [])
    for i, dist in enumerate(prerelease):
        if not _DIST.match(dist):
            raise run.fail(
                f"prerelease[{i}]", "must be a distribution name, e.g. 'safetensors'", dist
            )
    carry = run.strings("carry", [])
    for i, axis in enumerate(carry):
        if axis not in CARRY_AXES:
            raise run.fail(f"carry[{i}]", f"must be one of {list(CARRY_AXES)}", axis)
    return {
        "cell_timeout_s": timeout,
        "reruns": reruns,
        "prerelease": tuple(prerelease),
        "carry": carry,
    }


def _axes(
    path: Path, doc: dict[str, Any], published: wheels.Published | None, default_python: str
) -> tuple[tuple[AxisVersion, ...], tuple[AxisVersion, ...]]:
    """The torch and TorchAO axes, each pin known to wheels.toml and every torch paired."""
    torch = _versions(path, doc, "torch")
    torchao = _versions(path, doc, "torchao")
    for dist, versions in (("torch", torch), ("torchao", torchao)):
        for v in versions:
            try:  # every pin has its entry: a release added since wheels.toml was written
                if published is not None:
                    published.ships(dist, v.pin, default_python)
            except wheels.WheelsError as exc:
                raise MatrixSpecError(path, f"{dist} {v.label}", str(exc)) from None
    labels = [t.label for t in torch]
    for i, a in enumerate(torchao):
        for j, label in enumerate(a.pairs):
            if label not in labels:
                raise MatrixSpecError(
                    path, f"torchao[{i}].torch[{j}]", f"unknown torch value; known: {labels}", label
                )
    for i, t in enumerate(torch):
        if not any(paired(t, a) for a in torchao):
            raise MatrixSpecError(
                path,
                f"torch[{i}]",
                "is paired with no TorchAO version (see torchao[].torch)",
                t.label,
            )
    return torch, torchao


def _default_cell(
    path: Path, run: _Reader, axes: Mapping[str, list[str]]
) -> tuple[_Reader, tuple[str, str, str]]:
    d = _Reader(path, "run.default_cell", run.get("default_cell", dict), tuple(axes))
    for axis, known in axes.items():
        value = d.get(axis, str)
        if value not in known:
            raise d.fail(axis, f"unknown {axis} value; known: {known}", value)
    return d, (d.table["torch"], d.table["torchao"], d.table["backend"])


def _exclusions(
    path: Path,
    doc: dict[str, Any],
    selectable: Mapping[str, list[str]],
    pairs: list[tuple[AxisVersion, AxisVersion]],
    groups: list[str | None],
) -> tuple[Exclusion, ...]:
    """``[[exclude]]``: each entry must match a cell."""
    out = []
    for i, entry in enumerate(doc.get("exclude", [])):
        r = _Reader(path, f"exclude[{i}]", entry, (*selectable, "reason"))
        where = _selector(r, selectable)
        if not any(
            where.matches(t.label, a.label, b, g)
            for t, a in pairs
            for b in selectable["backend"]
            for g in groups
        ):
            raise MatrixSpecError(
                path,
                f"exclude[{i}]",
                "matches no cell (is a torch / TorchAO pair misnamed?)",
                entry,
            )
        out.append(Exclusion(where, _reason(r)))
    return tuple(out)


def _xfails(
    path: Path, doc: dict[str, Any], selectable: Mapping[str, list[str]], downstream_tests: str
) -> tuple[ExpectedFailure, ...]:
    """``[[xfail]]``: node-id patterns under tests/, downstream ones only for downstream groups."""
    out = []
    home = downstream_tests.rstrip("/") + "/"
    for i, entry in enumerate(doc.get("xfail", [])):
        r = _Reader(path, f"xfail[{i}]", entry, (*selectable, "tests", "reason", "strict"))
        tests = r.strings("tests")
        if not tests or any(not t.startswith("tests/") for t in tests):
            raise r.fail(
                "tests", "must list pytest node-id patterns starting with 'tests/'", list(tests)
            )
        where = _selector(r, selectable)
        for j, pattern in enumerate(tests):
            if pattern.startswith(home) != bool(where.downstream):
                raise r.fail(
                    f"tests[{j}]",
                    f"a downstream cell runs {home} only: an entry lists its tests if and only if "
                    "it names downstream groups",
                    pattern,
                )
        out.append(
            ExpectedFailure(tests, where, _reason(r), r.get("strict", bool, True), f"xfail[{i}]")
        )
    return tuple(out)


def load(path: Path | str = DEFAULT_PATH) -> Matrix:
    """Read and validate matrix.toml; raise :class:`MatrixSpecError` on the first fault."""
    path = Path(path)
    doc = read(path, MatrixSpecError)
    _Reader(
        path, "", doc, ("run", "torch", "torchao", "backends", "downstream", "exclude", "xfail")
    )
    run = _Reader(path, "run", doc.get("run"), RUN_KEYS)
    python, published = _run_python(path, run)
    files, policy = _run_files(run), _run_policy(run)
    torch, torchao = _axes(path, doc, published, python[0])
    backends = _backends(path, doc)
    downstream = _downstream(path, doc, torch)
    if downstream:
        _suites_apart(run, files["compat_tests"], files["downstream_tests"])
    axes = {
        "torch": [v.label for v in torch],
        "torchao": [v.label for v in torchao],
        "backend": list(backends),
    }
    selectable = {**axes, "downstream": [g.name for g in downstream], "python": list(python)}
    d, default_cell = _default_cell(path, run, axes)
    pairs = [(t, a) for t in torch for a in torchao if paired(t, a)]
    groups: list[str | None] = [None, *(g.name for g in downstream)]
    matrix = Matrix(
        path=path,
        python=python,
        default_cell=default_cell,
        torch=torch,
        torchao=torchao,
        backends=backends,
        exclusions=_exclusions(path, doc, selectable, pairs, groups),
        xfails=_xfails(path, doc, selectable, files["downstream_tests"]),
        downstream=downstream,
        published=published,
        **files,
        **policy,
    )
    if matrix.find_cell(*default_cell) is None:
        raise d.fail("torch", "names an excluded cell", default_cell)
    return matrix


if __name__ == "__main__":  # `python -m harness.matrix.spec [path]`: validate and list the cells
    m = load(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_PATH)
    for c in m.cells(tiers=TIERS):
        print(c.id, c.tier, " ".join(c.requirements()))
