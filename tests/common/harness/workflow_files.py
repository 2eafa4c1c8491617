"""The repository's GitHub workflow files, read as GitHub reads them (the harness suite's tests of
the workflows and of the jobs around the nightly issue share these)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return dict(doc)


def workflow(name: str) -> dict[str, Any]:
    return load(ROOT / ".github" / "workflows" / name)


def jobs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(doc["jobs"])


def steps(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in jobs(doc).items():
        for step in job.get("steps", []):
            yield name, step


def uses(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).startswith(f"{action}@")
