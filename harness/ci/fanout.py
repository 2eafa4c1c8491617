"""How a run's cells become GitHub jobs: one job per torch group, the unit ``nox -s matrix`` runs.

A *torch group* is every cell of one torch release on one backend: its TorchAO cells, its Python
corners and extended Pythons, and its downstream cells. One job runs it as ``nox -s matrix``
runs it locally (``nox -s matrix -- --cell ID ...``: one venv per Python and kind of cell, the
venvs side by side, TorchAO swapped in place, and the verdicts of the tests independent of
TorchAO carried within each set of cells that differ only in TorchAO, :mod:`harness.cells.carry`;
with ``--full`` every test runs everywhere and every carried verdict is checked), so GitHub gets
the same speed-up and the same honesty check as a local run, and pays one checkout, one
setup-python and one torch download per venv instead of per cell.

A group whose cells could run longer than a GitHub-hosted job may (:data:`limits.JOB_MINUTES`,
less :data:`JOB_ALLOWANCE_MIN` for the job's own steps; each cell is bounded by its
``timeout_s``) is split into chunks, at venv boundaries where it can be (a carry set is then
whole in one chunk), else between cells. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.cells import group_run
from harness.matrix import limits
from harness.matrix.spec import Cell, Matrix

JOB_ALLOWANCE_MIN = 10  # the job's checkout, setup-python, tools and upload, on top of its cells
BUDGET_MIN = limits.JOB_MINUTES.value - JOB_ALLOWANCE_MIN  # the cells' timeouts, summed, at most


@dataclass(frozen=True)
class Job:
    """One GitHub job: the cells of one torch group (or a chunk of one) on one backend."""

    name: str  # torch2.6-cpu, or torch2.6-cpu-2 for a chunk
    backend: str
    torch: str  # the torch pin
    cells: tuple[Cell, ...]

    @property
    def pythons(self) -> list[str]:
        """The Pythons its venvs need, the harness's own (``default``) last: setup-python puts
        the last of its list first on PATH."""
        return list(dict.fromkeys(c.python for c in self.cells))

    @property
    def timeout_minutes(self) -> int:
        """Its cells' timeouts summed, and the allowance for the job's own steps."""
        return math.ceil(sum(c.timeout_s for c in self.cells) / 60) + JOB_ALLOWANCE_MIN

    @property
    def tiers(self) -> list[str]:
        return list(dict.fromkeys(c.tier for c in self.cells))


def torch_groups(cells: Sequence[Cell]) -> dict[tuple[str, str], list[Cell]]:
    """Cells by (backend, torch label), in the order given."""
    out: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        out.setdefault((cell.backend.name, cell.torch.label), []).append(cell)
    return out


def _pieces(cells: Sequence[Cell], budget_s: int) -> list[list[Cell]]:
    """The group's venv groups (harness.cells.group_run.group_cells), in order; one that alone
    runs past ``budget_s`` is cut between its cells."""
    out: list[list[Cell]] = []
    for venv in group_run.group_cells(cells).values():
        piece: list[Cell] = []
        for cell in venv:
            if piece and sum(c.timeout_s for c in piece) + cell.timeout_s > budget_s:
                out.append(piece)
                piece = []
            piece.append(cell)
        out.append(piece)
    return out


def chunks(cells: Sequence[Cell], budget_s: int) -> list[list[Cell]]:
    """``cells`` in as few chunks as fit ``budget_s`` of summed timeouts, about equal, each a run
    of whole venv groups where one fits (:func:`_pieces`)."""
    pieces = _pieces(cells, budget_s)
    total = sum(c.timeout_s for c in cells)
    target = total / max(1, math.ceil(total / budget_s))
    out: list[list[Cell]] = [[]]
    for piece in pieces:
        held = sum(c.timeout_s for c in out[-1])
        size = sum(c.timeout_s for c in piece)
        if out[-1] and (held + size > budget_s or held + size / 2 > target):
            out.append([])
        out[-1].extend(piece)
    return out


def plan_jobs(cells: Sequence[Cell], budget_min: int = BUDGET_MIN) -> list[Job]:
    """One job per torch group of ``cells`` (in their order), split where its timeouts exceed
    ``budget_min``; chunks are numbered from 1 only where there are several."""
    jobs: list[Job] = []
    for (backend, label), group in torch_groups(cells).items():
        parts = chunks(group, budget_min * 60)
        for i, part in enumerate(parts, 1):
            name = f"torch{label}-{backend}" + (f"-{i}" if len(parts) > 1 else "")
            jobs.append(Job(name, backend, group[0].torch.pin, tuple(part)))
    return jobs


def entry(
    job: Job, matrix: Matrix, labels: Mapping[str, Sequence[str]], prefix: str
) -> dict[str, Any]:
    """The job's entry in the cell job's ``strategy.matrix``: what its steps read."""
    pythons = [p for p in job.pythons if p != matrix.default_python] + [matrix.default_python]
    return {
        "job": job.name,
        "backend": job.backend,
        "torch": job.torch,
        "pythons": "\n".join(pythons),
        "tiers": " ".join(job.tiers),
        "cells": " ".join(c.id for c in job.cells),
        "runs-on": list(labels.get(job.backend, ())),
        "artifact": f"{prefix}reports-{job.name}",
        "timeout-minutes": job.timeout_minutes,
    }
