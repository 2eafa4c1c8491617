"""A cell in an existing interpreter: the suite against the torch and TorchAO already there.

    python -m harness.cells.installed --python PY [--backend cpu|cuda ...] [--reports DIR]
                                [--gpu-visible] [--strict] [--any-version] [--timeout-s N]

Nothing is installed. What ``PY`` holds is read first, without importing torch
(``harness/cells/probe.py --versions`` run by ``PY`` with this process's environment, so a
``PYTHONPATH`` counts): Python, torch, TorchAO, safetensors and each test requirement. The cell
is named from them (``installed-torch2.11-ao0.17-cuda``; ``noao`` / ``notorch`` for an absent
one) and its expected failures are matrix.toml's for the labels detected (:func:`expectations`).
If a requirement is unmet (a test requirement missing or at a version requirements/test.txt does
not accept, or no torch or TorchAO: the suite imports both), the cell is recorded as
``unmet-requirements`` with the pip commands that provide them from a wheel folder, and nothing
runs. Otherwise it runs like a matrix cell (:func:`harness.cells.cell.run_cell`, with no install
step) and writes the same files; it joins the reports folder's ``run.json`` so that the report
and the gate expect it. Standard library and ``packaging`` only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.cells.cell import harness_error, record, run_cell
from harness.cells.plan import PROBE, CellPlan, cell_pytest_args
from harness.cells.record import CellResult, summary_line
from harness.matrix import paths, spec
from harness.matrix.backends import is_absence
from harness.matrix.errors import Refused
from harness.matrix.procs import Echo, Stop
from harness.matrix.selection import Selection, cell_entry, manifest, write_manifest
from harness.matrix.spec import ABSENT, AxisVersion, Backend, Cell, ExpectedFailure, Matrix

TIER = "installed"  # the tier field of an installed cell's record (not a matrix.toml tier)
UNLISTED = "<unlisted>"  # matched against expectations for a version matrix.toml lacks
AXES = ("torch", "torchao")  # the suite imports both: neither may be absent
SHOWN = ("torch", "torchao", "safetensors")  # the versions an installed cell's record names
DETECT_TIMEOUT_S = 300  # reading versions; torch is imported only if it has no metadata
UNMET = "unmet-requirements"


class InstalledError(Refused):
    """The interpreter cannot be read or does not qualify; the message says why."""


# --- what the interpreter holds -----------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """What an interpreter holds, read without importing torch (``probe.py --versions``)."""

    python: str  # "3.12.1"
    executable: str
    prefix: str
    pythonpath: str
    installed: dict[str, str | None]  # distribution -> version (None: not installed)
    sources: dict[str, str] = field(default_factory=dict)


def interpreter(given: str) -> Path:
    """The interpreter ``--python`` names: a path, or a command on PATH. Never resolved: a
    venv's interpreter is a symlink to its base one, and following it leaves the venv."""
    path = Path(given) if os.sep in given else Path(shutil.which(given) or given)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise InstalledError(f"--python {given}: no executable interpreter there")
    return path.absolute()


def python_floor(root: Path) -> SpecifierSet | None:
    """The project's requires-python (pyproject.toml beside matrix.toml), if it has one."""
    try:
        with (root / "pyproject.toml").open("rb") as fh:
            wanted = tomllib.load(fh).get("project", {}).get("requires-python")
    except OSError:
        return None
    return SpecifierSet(wanted) if isinstance(wanted, str) else None


def detect(python: Path, names: Sequence[str], *, floor: SpecifierSet | None = None) -> Found:
    """Read what ``python`` holds. Raises :class:`InstalledError` if it does not run, is below
    the project's Python floor, or its answer is not what the probe writes."""
    env = {**os.environ}
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def ask(cmd: list[str]) -> str:
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=DETECT_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                env=env,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstalledError(f"{python}: cannot be run ({type(exc).__name__}: {exc})") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise InstalledError(f"{python}: exited {done.returncode} when asked ({last})")
        return done.stdout

    version = ask([str(python), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
    version = version.strip()
    if floor is not None and version not in floor:
        raise InstalledError(
            f"{python} is Python {version}; the harness and the suite need Python {floor}"
            " (pyproject.toml requires-python)"
        )
    answer = ask([str(python), str(PROBE), "--versions", ",".join(names)])
    try:
        data = json.loads(answer)
        return Found(
            str(data["python"]),
            str(data["executable"]),
            str(data["prefix"]),
            str(data["pythonpath"]),
            {str(k): (None if v is None else str(v)) for k, v in data["installed"].items()},
            {str(k): str(v) for k, v in data.get("sources", {}).items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InstalledError(f"{python}: unreadable answer from probe.py ({exc})") from None


# --- the labels and the expectations ----------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """The detected value of one axis (torch or TorchAO) and whether matrix.toml lists it."""

    dist: str
    version: str | None  # None: not installed
    label: str  # MAJOR.MINOR, or ABSENT
    listed: bool
    note: str = ""  # why it is not listed

    def matched(self) -> str:
        """The value expectations are matched with: the label, or one no selector lists."""
        return self.label if self.listed else UNLISTED


def axis(dist: str, version: str | None, versions: Sequence[AxisVersion]) -> Axis:
    """A version is listed when it is a final release (a local part such as ``+cu130`` and
    post-releases allowed) whose MAJOR.MINOR is one of matrix.toml's labels for ``dist``."""
    if version is None:
        return Axis(dist, None, ABSENT, False, f"{dist} is not installed")
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise InstalledError(f"{dist} reports version {version!r}, not a PEP 440 version") from None
    label = f"{parsed.major}.{parsed.minor}"
    labels = [v.label for v in versions if v.label != spec.LATEST]
    if parsed.is_prerelease:
        return Axis(dist, version, label, False, f"{dist} {version} is a pre-release")
    if label not in labels:
        return Axis(dist, version, label, False, f"matrix.toml lists no {dist} {label}")
    return Axis(dist, version, label, True)


def expectations(matrix: Matrix, torch: Axis, torchao: Axis, backend: str) -> list[ExpectedFailure]:
    """matrix.toml's [[xfail]] entries for the detected labels. For an axis whose value is not
    listed (or absent) only the entries that name no value of that axis apply (no ``torch`` /
    ``torchao`` key: the version-independent ones); the backend selects as for any cell."""
    return matrix.xfails_for(torch.matched(), torchao.matched(), backend)


# --- the test requirements -------------------------------------------------------------------


@dataclass(frozen=True)
class Unmet:
    requirement: str  # as pip takes it
    found: str | None  # the installed version; None: not installed

    def __str__(self) -> str:
        state = "not installed" if self.found is None else f"found {self.found}"
        return f"{self.requirement} ({state})"


def requirements_of_tests(matrix: Matrix) -> list[Requirement]:
    """The requirements of matrix.toml's test_requirements files, in order."""
    out = []
    for rel in matrix.test_requirements:
        path = matrix.root / rel
        for n, raw in enumerate(path.read_text().splitlines(), 1):
            line = raw.split(" #")[0].strip()
            if not line or line.startswith("#"):
                continue
            try:
                out.append(Requirement(line))
            except InvalidRequirement as exc:
                raise InstalledError(f"{path}:{n}: not a requirement ({exc}): {line!r}") from None
    return out


def unmet(
    requirements: Sequence[Requirement], found: Found, *, any_version: bool = False
) -> tuple[list[Unmet], list[str]]:
    """The unmet requirements, and notes on those accepted at another version (--any-version)."""
    env = {"python_version": ".".join(found.python.split(".")[:2])}
    missing, notes = [], []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        have = found.installed.get(req.name)
        if have is None:
            missing.append(Unmet(str(req), None))
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            if any_version:
                notes.append(f"{req.name} {have} accepted in place of {req}")
            else:
                missing.append(Unmet(str(req), have))
    return missing, notes


def torchao_hint(matrix: Matrix, torch: Axis) -> str:
    """What to install for an absent TorchAO: the first TorchAO matrix.toml pairs with this
    torch (``torchao==0.17.0`` for torch 2.11), or any TorchAO for a torch it does not list."""
    for t in matrix.torch:
        if torch.listed and t.label == torch.label:
            for ao in matrix.torchao:
                if spec.paired(t, ao):
                    return ao.requirement("torchao")
    return "torchao"


def advice(python: Path, found: Found, missing: Sequence[Unmet]) -> str:
    """How to provide unmet requirements from a wheel folder (the exact pip commands)."""
    reqs = " ".join(shlex.quote(u.requirement) for u in missing)
    wheels = shlex.quote(str(paths.WHEELS))
    py = ".".join(found.python.split(".")[:2])
    return "\n".join(
        [
            "Nothing was installed. Bring the wheels in a folder and install them from it:",
            "  where a package index is reachable (same platform):",
            f"    python3 -m pip download --only-binary=:all: --python-version {py}"
            f" -d {wheels} {reqs}",
            "  then, into this interpreter (a venv without pip: uv pip install --python PY ...):",
            f"    {python} -m pip install --no-index --find-links {wheels} {reqs}",
            "  or beside it, leaving its environment as it is:",
            f"    {python} -m pip install --no-index --find-links {wheels} --target SITE {reqs}",
            "    export PYTHONPATH=SITE",
        ]
    )


# --- the cell ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstalledCell(Cell):
    """A cell of an existing interpreter: named from what it holds, installs nothing."""

    gpu_visible: bool = False  # the backend's env (hiding accelerators) is not applied

    @property
    def id(self) -> str:
        torch = "notorch" if self.torch.label == ABSENT else f"torch{self.torch.label}"
        ao = "noao" if self.torchao.label == ABSENT else f"ao{self.torchao.label}"
        visible = "-gpu-visible" if self.gpu_visible else ""
        return f"installed-{torch}-{ao}-{self.backend.name}{visible}"

    @property
    def tier(self) -> str:
        return TIER

    def requirements(self) -> list[str]:
        return []  # nothing is installed


@dataclass
class Detection:
    """Everything decided before a cell runs: the axes, the unmet requirements, the notes."""

    python: Path
    found: Found
    torch: Axis
    torchao: Axis
    missing: list[Unmet]
    notes: list[str]

    def cell(
        self, matrix: Matrix, backend: Backend, *, gpu_visible: bool, timeout_s: int
    ) -> InstalledCell:
        py = ".".join(self.found.python.split(".")[:2])
        t = AxisVersion(self.torch.label, self.torch.version or "")
        a = AxisVersion(self.torchao.label, self.torchao.version or "")
        return InstalledCell(py, t, a, backend, timeout_s, gpu_visible=gpu_visible)

    def said(self) -> list[str]:
        """What the run says before it starts: unlisted versions, versions accepted anyway."""
        return [*(a.note for a in (self.torch, self.torchao) if not a.listed), *self.notes]

    def environment(self, cell: InstalledCell, xfails: Sequence[ExpectedFailure]) -> dict[str, Any]:
        """What cell.json says about where the cell ran (its ``environment``)."""
        unlisted = [a.note for a in (self.torch, self.torchao) if not a.listed]
        return {
            "label": "installed, GPU visible" if cell.gpu_visible else "installed",
            "interpreter": str(self.python),
            "executable": self.found.executable,
            "prefix": self.found.prefix,
            "pythonpath": self.found.pythonpath,
            "python": self.found.python,
            "versions": {name: self.found.installed.get(name) for name in SHOWN},
            "sources": dict(self.found.sources),
            "listed": {a.dist: a.listed for a in (self.torch, self.torchao)},
            "expectations": (
                "version-independent only: " + "; ".join(unlisted)
                if unlisted
                else f"matrix.toml's for torch {self.torch.label}, TorchAO {self.torchao.label}"
            ),
            "xfails": [x.origin for x in xfails],
            "backend_env": {} if cell.gpu_visible else dict(cell.backend.env),
            "notes": self.said(),
            "unmet": [str(u) for u in self.missing],
        }


def inspect(matrix: Matrix, python: Path, *, any_version: bool = False) -> Detection:
    """Read ``python`` and decide what it lacks; nothing is imported beyond metadata."""
    requirements = requirements_of_tests(matrix)
    names = list(dict.fromkeys([*SHOWN, *(r.name for r in requirements)]))
    found = detect(python, names, floor=python_floor(matrix.root))
    torch = axis("torch", found.installed.get("torch"), matrix.torch)
    torchao = axis("torchao", found.installed.get("torchao"), matrix.torchao)
    missing, notes = unmet(requirements, found, any_version=any_version)
    if torch.version is None:
        missing.insert(0, Unmet("torch", None))
    if torchao.version is None:
        missing.insert(1 if torch.version is None else 0, Unmet(torchao_hint(matrix, torch), None))
    return Detection(python, found, torch, torchao, missing, notes)


# --- the run ------------------------------------------------------------------------------------


def join_manifest(reports: Path, cells: Sequence[Cell], echo: Echo | None) -> None:
    """Add the cells to the reports folder's run.json (replacing entries of the same id), or
    write one holding only them: the report and the gate then expect them like any cell."""
    path = reports / paths.RUN_FILE
    data: dict[str, Any] | None = None
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
                raise Refused("no list of cells")
        except (OSError, ValueError) as exc:
            if echo is not None:
                echo.write(f"[installed] {path} is unreadable ({exc}): writing a new one\n")
            data = None
    if data is None:
        backends = tuple(dict.fromkeys(c.backend.name for c in cells))
        data = manifest(Selection((), backends, tuple(cells)), "finished")
    else:
        ids = {c.id for c in cells}
        kept = [e for e in data["cells"] if not (isinstance(e, dict) and e.get("id") in ids)]
        data["cells"] = kept + [cell_entry(c) for c in cells]
        data["written"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_manifest(reports, data)


def absent_backend_skips(result: CellResult) -> list[str]:
    """Tests of the cell skipped because its own backend is absent (``needs a CUDA device``)."""
    name = result.backend.lower()
    return sorted(n for n, why in result.skips.items() if is_absence(why) and name in why.lower())


def run_installed(
    matrix: Matrix,
    detection: Detection,
    backends: Sequence[str],
    *,
    reports: Path,
    gpu_visible: bool = False,
    timeout_s: int | None = None,
    echo: Echo | None = sys.stdout,
    stop: Stop | None = None,
) -> list[CellResult]:
    """One cell per backend in the detected interpreter; each ends with its cell.json."""
    stop = stop or Stop()
    cells = [
        detection.cell(
            matrix,
            matrix.backends[b],
            gpu_visible=gpu_visible,
            timeout_s=timeout_s or matrix.cell_timeout_s,
        )
        for b in backends
    ]
    join_manifest(reports, cells, echo)
    results = []
    for cell in cells:
        xfails = expectations(matrix, detection.torch, detection.torchao, cell.backend.name)
        environment = detection.environment(cell, xfails)
        try:
            if detection.missing:
                result = record(
                    cell,
                    UNMET,
                    f"{detection.python} lacks {len(detection.missing)} requirement(s): "
                    + ", ".join(str(u) for u in detection.missing),
                    reports,
                    log_tail=advice(detection.python, detection.found, detection.missing),
                    environment=environment,
                )
            elif stop.requested:
                why = f"the run was stopped ({stop.signal}) before this cell started"
                result = record(cell, "interrupted", why, reports, environment=environment)
            else:
                outdir = paths.cell_dir(reports, cell.id)
                plan = CellPlan(
                    cell,
                    detection.python,
                    outdir,
                    [],  # nothing is installed
                    cell_pytest_args(cell, outdir, matrix.test_paths(cell), matrix.reruns),
                    [x.as_record() for x in xfails],
                    env=environment["backend_env"],
                    cwd=matrix.root,
                )
                result = run_cell(plan, echo=echo, stop=stop)
                result.environment = environment
                result.write(outdir)
        except Exception as exc:  # one cell's harness failure is that cell's status
            result = harness_error(cell, exc, reports)
        results.append(result)
    return results


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m harness.cells.installed``."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.cells.installed",
        description="Run the suite as a cell in an existing interpreter; install nothing.",
    )
    parser.add_argument("--python", required=True, help="the interpreter (a path or a command)")
    parser.add_argument("--backend", action="append", help="default: cpu; repeatable")
    parser.add_argument(
        "--reports", type=Path, default=None, help="default: $COMPAT_MATRIX_REPORTS or reports"
    )
    parser.add_argument("--matrix", type=Path, default=None, help="default: $COMPAT_MATRIX_TOML")
    parser.add_argument(
        "--gpu-visible",
        action="store_true",
        help="do not apply the backend's env from matrix.toml (the cpu backend's hides the GPU);"
        " the cell id gains -gpu-visible",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail if a cell is skipped, or a test skips, for the cell's backend being absent",
    )
    parser.add_argument(
        "--any-version",
        action="store_true",
        help="accept a test requirement at a version requirements/test.txt does not (recorded)",
    )
    parser.add_argument("--timeout-s", type=int, default=None, help="default: cell_timeout_s")
    return parser


def main(argv: Sequence[str] | None = None, *, echo: Echo = sys.stdout) -> int:
    args = parser().parse_args(argv)
    try:
        matrix = spec.load(args.matrix or paths.matrix_path())
        backends = list(dict.fromkeys(args.backend or ["cpu"]))
        for name in backends:
            if name not in matrix.backends:
                raise InstalledError(
                    f"--backend {name}: unknown; accepted: {sorted(matrix.backends)}"
                )
            if args.gpu_visible and not matrix.backends[name].env:
                raise InstalledError(
                    f"--gpu-visible changes nothing for {name}: matrix.toml sets no env for it"
                )
        if args.timeout_s is not None and args.timeout_s <= 0:
            raise InstalledError(f"--timeout-s {args.timeout_s}: must be a positive number")
        detection = inspect(matrix, interpreter(args.python), any_version=args.any_version)
    except (InstalledError, spec.MatrixSpecError) as exc:
        print(f"[installed] {exc}", file=sys.stderr)
        return 2
    for note in detection.said():
        echo.write(f"[installed] {note}: only the version-independent expectations apply\n")
    reports = args.reports or paths.reports_path()
    stop = Stop()
    with stop.on_signals():
        results = run_installed(
            matrix,
            detection,
            backends,
            reports=reports,
            gpu_visible=args.gpu_visible,
            timeout_s=args.timeout_s,
            echo=echo,
            stop=stop,
        )
    code = max((_said(result, args.strict, echo) for result in results), default=0)
    echo.flush()
    return code


def _said(result: CellResult, strict: bool, echo: Echo) -> int:
    """Write the cell's summary; 1 if it fails the run (``--strict``: a skip for an absent
    backend fails it too), else 0."""
    echo.write(f"[installed] {summary_line(result)}\n")
    if result.status == UNMET:
        echo.write(result.log_tail + "\n")
    if not result.ok:
        return 1
    if strict and result.status == "skipped":
        echo.write(f"[installed] --strict: {result.id} did not run: {result.reason}\n")
        return 1
    skipped = absent_backend_skips(result) if strict else []
    if skipped:
        echo.write(
            f"[installed] --strict: {len(skipped)} test(s) of {result.id} skipped for"
            f" an absent {result.backend}: {', '.join(skipped)}\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
