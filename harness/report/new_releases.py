"""New releases seen: a version that a ``latest`` or prerelease cell installed and that is newer
than every pin of that distribution in the repository, so that the report and the nightly issue
say "new release seen: safetensors 0.9.0rc1, not in matrix.toml" the night it appears.

What counts as pinned: the torch and TorchAO axes of matrix.toml (``latest`` left out), each
``[[downstream]]`` group's requirements, and the ``name==version`` lines of the requirements files
matrix.toml installs into cells (``test_requirements``, ``peer_requirements``,
``downstream_requirements``). The distributions watched are torch, TorchAO and matrix.toml's
``[run] prerelease``. Standard library and ``packaging`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.matrix.spec import LATEST, Matrix

AXES = ("torch", "torchao")


def _exact(line: str) -> tuple[str, Version] | None:
    """``(name, version)`` of a requirement pinned with ``==``; None for anything else."""
    text = line.split("#", 1)[0].strip()
    if not text or text.startswith("-"):
        return None
    try:
        req = Requirement(text)
        (spec,) = req.specifier
        if spec.operator != "==" or "*" in spec.version:
            return None
        return str(canonicalize_name(req.name)), Version(spec.version)
    except (InvalidRequirement, InvalidVersion, ValueError):
        return None


def highest_pins(matrix: Matrix) -> dict[str, Version]:
    """Per distribution (canonical name), its highest version pinned anywhere in the repository."""
    found: dict[str, Version] = {}

    def add(name: str, version: Version) -> None:
        if name not in found or version > found[name]:
            found[name] = version

    for dist, versions in (("torch", matrix.torch), ("torchao", matrix.torchao)):
        for v in versions:
            if v.pin != LATEST:
                add(dist, Version(v.pin))
    lines = [line for group in matrix.downstream for line in group.requirements]
    files = (*matrix.test_requirements, *matrix.peer_requirements, *matrix.downstream_requirements)
    for rel in files:
        path = matrix.root / rel
        if path.is_file():
            lines += path.read_text().splitlines()
    for line in lines:
        pinned = _exact(line)
        if pinned:
            add(*pinned)
    return found


def watched(cell: Mapping[str, Any]) -> bool:
    """A cell that resolves versions at install time: the prerelease tier, or a ``latest`` pin."""
    return cell.get("tier") == "prerelease" or LATEST in (cell.get("torch"), cell.get("torchao"))


def seen(matrix: Matrix, cells: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Each (distribution, version) a watched cell installed above the highest pin, once, with
    the first cell that installed it and the pin it passed; sorted by distribution."""
    pins = highest_pins(matrix)
    names = dict.fromkeys([*AXES, *matrix.prerelease])
    out: dict[tuple[str, str], dict[str, str]] = {}
    for cell in cells:
        if not watched(cell):
            continue
        installed = cell.get("installed") or {}
        for dist in names:
            text = installed.get(dist)
            try:
                version = Version(str(text).split("+")[0]) if text else None
            except InvalidVersion:
                continue
            highest = pins.get(str(canonicalize_name(dist)))
            if version is None or (highest is not None and version <= highest):
                continue
            out.setdefault(
                (dist, str(version)),
                {
                    "dist": dist,
                    "version": str(version),
                    "highest_pin": str(highest) if highest else "none",
                    "cell": str(cell.get("id")),
                },
            )
    return [out[key] for key in sorted(out)]


def line(found: Mapping[str, str]) -> str:
    """One finding, as the report and the nightly issue say it."""
    return (
        f"new release seen: {found['dist']} {found['version']}, not in matrix.toml (highest pin: "
        f"{found['highest_pin']}; installed by {found['cell']})"
    )
