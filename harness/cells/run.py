"""A matrix run: the cells a selection should run, one venv per group, groups side by side.

``nox -s matrix`` (and the gate and baseline sessions) call :func:`run_matrix` in the nox
process itself: the groups run in threads (their cells are subprocesses), a SIGINT or SIGTERM
reaches every running cell through one :class:`~harness.matrix.procs.Stop`, and the manifest
``reports/run.json`` says which cells should have run (the selection minus nothing: a cell of
an absent backend is recorded as skipped), so the verdict (:mod:`harness.cells.verdict`) is judged
from what should have run, not from the records that happen to exist.

Each group's venv is made here with ``uv venv`` under nox's envdir (``matrix-<group>``) and kept
for the next run; the group sessions (``nox -s tests-torch2.5-cpu``) keep their own. With
``prune`` (``nox -s matrix -- --prune``: a disk that cannot hold every group at once, such as the
extended tier on every Python), a group whose venv the run has to make installs through a uv cache
of its own inside that venv, in its own turn instead of ahead, and the venv goes (cache and all)
once its cells are recorded; venvs that were there before the run are used and kept as usual.
Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from harness.cells import group_run
from harness.cells.cell import harness_error, record
from harness.cells.plan import install_commands
from harness.cells.record import CellResult
from harness.matrix import paths
from harness.matrix.errors import Refused
from harness.matrix.procs import Echo, Stop, run_logged
from harness.matrix.selection import Selection, manifest, write_manifest
from harness.matrix.spec import Cell, Matrix

# --peer-suites: the peers' own suites (matrix.toml peer_suites) in every downstream cell, or
# only in the first cell of each downstream group and backend (CI's budget)
PEER_SUITES = ("every", "first")
PREFETCH_DIR = "prefetch"  # in the reports folder: each group's install made ahead, its log
OWN_CACHE = ".uv-cache"  # under a pruned group's venv: the uv cache its installs go through


def peer_deselection(
    matrix: Matrix, cells: Sequence[Cell], mode: str = "every"
) -> dict[str, dict[str, str]]:
    """Cell id -> {matrix.toml's peer_suites module: why} for each downstream cell that leaves
    it out: with ``mode`` ``first``, every downstream cell but the first of ``cells`` (in their
    order) of each group and backend; nothing with ``every`` (or no peer_suites module)."""
    if mode not in PEER_SUITES:
        raise Refused(f"--peer-suites must be one of {PEER_SUITES}, not {mode!r}")
    if mode == "every" or not matrix.peer_suites:
        return {}
    first: dict[tuple[str, str], str] = {}
    out: dict[str, dict[str, str]] = {}
    for cell in cells:
        if not cell.group:
            continue
        ran = first.setdefault((cell.group, cell.backend.name), cell.id)
        if ran != cell.id:
            why = f"--peer-suites first: group {cell.group}'s peer suites run in {ran}"
            out[cell.id] = {matrix.peer_suites: why}
    return out


def ensure_venv(uv: str, python: str, path: Path, version: str | None = None) -> Path:
    """A venv of ``python`` (a version, or an interpreter's path whose version is ``version``)
    at ``path`` (kept if it already is one of that version), its interpreter."""
    path = path.absolute()
    interpreter = path / "bin" / "python"
    cfg = path / "pyvenv.cfg"
    if interpreter.exists() and cfg.exists():
        pairs = (line.split("=", 1) for line in cfg.read_text().splitlines() if "=" in line)
        info = {key.strip(): value.strip() for key, value in pairs}
        if info.get("version_info", "").startswith(f"{version or python}."):
            return interpreter
    subprocess.run(
        [uv, "venv", "--quiet", "--clear", "--python", python, str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    return interpreter


class Prefixed:
    """Lines from several groups on one stream, each line prefixed with its group."""

    _lock = threading.Lock()

    def __init__(self, stream: Echo, prefix: str) -> None:
        self.stream, self.prefix, self._partial = stream, prefix, ""

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        if lines:
            with self._lock:
                self.stream.write("".join(f"[{self.prefix}] {line}\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self.stream.flush()


@dataclass
class _MatrixRun:
    """One run of a selection: its groups' venvs, prepared ahead, and their cells run."""

    matrix: Matrix
    selection: Selection
    envdir: Path
    reports: Path
    uv: str
    candidates: Sequence[str]
    jobs: int
    echo: Echo | None
    stop: Stop
    full: bool
    pruned: set[str] = field(default_factory=set)
    deselect: dict[str, dict[str, str]] = field(default_factory=dict)
    threads: int = 1
    prepared: dict[str, Future[Path]] = field(default_factory=dict)

    def venv(self, name: str) -> Path:
        return self.envdir / f"matrix-{name}"

    def own_env(self, name: str) -> dict[str, str]:
        """What every command of a pruned group adds to its environment: its own uv cache."""
        if name not in self.pruned:
            return {}
        return {"UV_CACHE_DIR": str(self.venv(name).absolute() / OWN_CACHE)}

    def prepare(self, name: str, cells: list[Cell]) -> Path:
        """The group's venv with its first cell's pins, made ahead of the group's turn (in its
        turn, when the group is pruned)."""
        first = cells[0]
        wanted = self.selection.interpreters.get(first.python, first.python)
        python = ensure_venv(self.uv, wanted, self.venv(name), first.python)
        requirements = [str(self.matrix.root / r) for r in self.matrix.requirements_for(first)]
        log = self.reports / PREFETCH_DIR / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        for cmd in install_commands(
            first, python, uv=self.uv, requirements=requirements, candidates=self.candidates
        ):
            ran = run_logged(
                cmd,
                log,
                timeout_s=first.timeout_s,
                cwd=self.matrix.root,
                echo=None,
                stop=self.stop,
                env={**os.environ, **self.own_env(name)},
            )
            if ran.returncode != 0:
                break  # the cell meets it again in its own install, and records it
        return python

    def group(self, name: str, cells: list[Cell]) -> list[CellResult]:
        echo = self.echo
        out = (
            echo if echo is None or self.jobs == 1 else Prefixed(echo, name.removeprefix("tests-"))
        )
        try:
            try:
                python = (
                    self.prepared[name].result()
                    if name in self.prepared
                    else self.prepare(name, cells)
                )
            except (OSError, subprocess.CalledProcessError) as exc:
                return [harness_error(cell, exc, self.reports) for cell in cells]
            return group_run.run_cells(
                self.matrix,
                cells,
                python=python,
                reports=self.reports,
                uv=self.uv,
                candidates=self.candidates,
                echo=out,
                stop=self.stop,
                full=self.full,
                threads=self.threads,
                env=self.own_env(name),
                deselect=self.deselect,
            )
        finally:
            if name in self.pruned:  # every cell has its record by now
                shutil.rmtree(self.venv(name), ignore_errors=True)

    def run_groups(self, groups: Mapping[str, list[Cell]]) -> list[CellResult]:
        """Every group's cells, ``jobs`` groups side by side; venvs and installs run ahead of
        the tests, in order, so that downloads overlap the tests of the groups before (a warm
        install is a no-op check of ~0.5 s)."""
        results: list[CellResult] = []
        installs = ThreadPoolExecutor(max_workers=max(1, self.jobs), thread_name_prefix="prefetch")
        self.prepared = {
            name: installs.submit(self.prepare, name, cells)
            for name, cells in groups.items()
            if name not in self.pruned  # a pruned group installs in its own turn: disk bounded
        }
        with installs, ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            futures: dict[Future[list[CellResult]], list[Cell]] = {
                pool.submit(self.group, name, cells): cells for name, cells in groups.items()
            }
            while not all(f.done() for f in futures):
                self.stop.wait(0.2)  # the main thread stays free to take the signal
            for future, cells in futures.items():
                try:
                    results += future.result()
                except Exception as exc:  # a bug in the group's own plumbing: its cells say so
                    results += [harness_error(cell, exc, self.reports) for cell in cells]
        return results


def run_matrix(
    matrix: Matrix,
    selection: Selection,
    *,
    envdir: Path,
    reports: Path,
    uv: str,
    candidates: Sequence[str] = (),
    jobs: int = 1,
    echo: Echo | None = sys.stdout,
    stop: Stop | None = None,
    full: bool = False,
    prune: bool = False,
    peer_suites: str = "every",
) -> list[CellResult]:
    """Run the selection; every cell of it ends with a record (or shows as "no record").
    ``full``: every test in every cell, the carried verdicts checked (:mod:`harness.cells.carry`).
    ``prune``: a group whose venv does not exist yet gets one with its own uv cache inside, made
    in the group's turn, and removed after its cells: the run holds at most ``jobs`` such venvs
    on disk at a time, on top of what was there before (see the module's docstring).
    ``peer_suites``: ``first`` runs the peers' own suites in one downstream cell per group and
    backend only (:func:`peer_deselection`; the other cells' records say where they ran).

    The caller holds ``stop.on_signals()`` so that SIGINT / SIGTERM stop the running cells."""
    stop = stop or Stop()
    # the report is of this run: results of earlier selections must not linger in it
    shutil.rmtree(paths.cells_dir(reports), ignore_errors=True)
    shutil.rmtree(reports / PREFETCH_DIR, ignore_errors=True)
    write_manifest(reports, manifest(selection, "running", candidates=candidates))
    results: list[CellResult] = [
        record(cell, "skipped", reason, reports)
        for cell in selection.cells
        if (reason := selection.skip_reason(cell)) is not None
    ]
    groups = group_run.group_cells([c for c in selection.cells if selection.skip_reason(c) is None])
    runnable = [c for c in selection.cells if selection.skip_reason(c) is None]
    this = _MatrixRun(
        matrix=matrix,
        selection=selection,
        envdir=envdir,
        reports=reports,
        uv=uv,
        candidates=candidates,
        jobs=jobs,
        echo=echo,
        stop=stop,
        full=full,
        deselect=peer_deselection(matrix, runnable, peer_suites),
        # each group's share of the cores, when they run side by side
        threads=max(1, (os.cpu_count() or 1) // max(1, min(jobs, len(groups)))),
    )
    this.pruned = {name for name in groups if prune and not this.venv(name).exists()}
    results += this.run_groups(groups)
    state = "interrupted" if stop.requested else "finished"
    write_manifest(reports, manifest(selection, state, candidates=candidates, signal=stop.signal))
    order = {cell.id: i for i, cell in enumerate(selection.cells)}
    return sorted(results, key=lambda r: order[r.id])
