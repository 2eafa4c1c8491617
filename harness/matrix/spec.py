"""matrix.toml → validated, typed cells.

The one loader of the matrix axes: the noxfile, the GitHub matrix emitter and the test suite's
expected failures all go through :func:`load`. The types it builds live in
:mod:`harness.matrix.model`; they are re-exported here (``spec.Cell``, ``spec.Matrix``, ...). It
uses only the standard library and ``packaging`` so that it also runs inside a cell's venv. Every
validation error names the file, the field and the bad value.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from harness.matrix import wheels
from harness.matrix.model import (
    ABSENT,
    LATEST,
    TIERS,
    AxisVersion,
    Backend,
    Cell,
    Downstream,
    Exclusion,
    ExpectedFailure,
    Matrix,
    MatrixSpecError,
    Selector,
    label_key,
    paired,
)
from harness.matrix.paths import DEFAULT_MATRIX
from harness.matrix.toml_table import Table, read

__all__ = [
    "ABSENT",
    "CARRY_AXES",
    "DEFAULT_PATH",
    "LATEST",
    "PLATFORMS",
    "RUN_KEYS",
    "TIERS",
    "VERSION_TIERS",
    "AxisVersion",
    "Backend",
    "Cell",
    "Downstream",
    "Exclusion",
    "ExpectedFailure",
    "Matrix",
    "MatrixSpecError",
    "Selector",
    "label_key",
    "load",
    "paired",
]

DEFAULT_PATH = DEFAULT_MATRIX  # the repository's matrix.toml

VERSION_TIERS = ("core", "extended")  # what a [[torch]] / [[torchao]] entry may name
# the axes [run] carry may name: TorchAO, whose cells of one torch share a venv
# (harness/cells/carry.py)
CARRY_AXES = ("torchao",)
_DIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a distribution's name (PEP 508)
_GROUP = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.]*$")  # a downstream group's name, inside cell ids
_LABEL = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
_PYTHON = re.compile(r"^3\.(0|[1-9][0-9]*)$")
_BACKEND = re.compile(r"^[a-z][a-z0-9_]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLATFORMS = ("aix", "cygwin", "darwin", "emscripten", "linux", "wasi", "win32")  # sys.platform


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
