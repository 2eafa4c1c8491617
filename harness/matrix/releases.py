"""A package's releases on the configured index, as the cell's interpreter sees them.

The listing asks pip (``pip index versions --json``, run through ``uv tool run`` so that the pip
version is pinned here and the venv needs no pip of its own). pip reads the user's own
configuration: ``pip.conf``, ``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``; the
caller may add index options (``--index-url``, ``--extra-index-url``, ``--find-links``,
``--no-index``) that apply to the listing and to the installs alike. No index is named here.

What a listing guarantees, on every pip this module pins:

- yanked releases are left out (PEP 592; pip's ``index versions`` skips them);
- only releases with a distribution the target interpreter can install are listed (its Python
  version, platform tags and ``Requires-Python``), because pip runs against that interpreter;
- local version labels collapse onto their public version (``2.5.0+cpu`` and ``2.5.0`` are one
  release: ``torch==2.5.0`` matches both);
- pre-releases (and dev releases) only when asked for.

Standard library and ``packaging`` only.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.matrix.errors import Refused

# `pip index versions --json` (stable output, yanked releases left out) as of this release.
PIP = "pip==26.3"
LIST_TIMEOUT_S = 300


class ReleaseError(Refused):
    """The index cannot answer for this package: it is unknown, or the listing failed.
    ``empty``: the listing worked and found no release the target can install."""

    def __init__(self, message: str, *, empty: bool = False) -> None:
        super().__init__(message)
        self.empty = empty


@dataclass(frozen=True)
class Releases:
    package: str
    versions: tuple[Version, ...]  # ascending, public versions, no yanked ones

    def between(self, low: Version, high: Version) -> list[Version]:
        """The releases strictly between ``low`` and ``high``, ascending."""
        return [v for v in self.versions if low < v < high]

    def find(self, text: str) -> Version | None:
        """The listed release ``text`` names (``2.5.0`` and ``2.5.0+cpu`` name the same one)."""
        try:
            wanted = Version(text)
        except InvalidVersion:
            return None
        public = Version(wanted.public)
        return public if public in self.versions else None

    def nearest(self, text: str, count: int = 2) -> list[str]:
        """Listed releases next to ``text`` (for an error message), or the newest ones."""
        try:
            wanted = Version(text)
        except InvalidVersion:
            return [str(v) for v in self.versions[-count:]]
        below = [str(v) for v in self.versions if v < wanted][-count:]
        above = [str(v) for v in self.versions if v > wanted][:count]
        return below + above


def pip_command(uv: str) -> list[str]:
    """A pinned pip, fetched once into uv's cache; it needs nothing installed in the venv."""
    return [uv, "tool", "run", "--quiet", "--from", PIP, "pip"]


def parse_listing(package: str, stdout: str, *, pre: bool) -> Releases:
    """The releases in pip's ``index versions --json`` output (untrusted text: checked)."""
    try:
        doc = json.loads(stdout)
        raw = doc["versions"]
        if not isinstance(raw, list):
            raise TypeError
    except (ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(
            f"pip's listing of {package!r} is not the JSON `pip index versions --json` writes: "
            f"{stdout[:200]!r}"
        ) from exc
    versions: set[Version] = set()
    for text in raw:
        try:
            version = Version(str(text))
        except InvalidVersion:
            continue  # a legacy, non-PEP 440 version: pip cannot select it either
        if version.is_prerelease and not pre:
            continue
        versions.add(Version(version.public))
    return Releases(str(canonicalize_name(package)), tuple(sorted(versions)))


def list_releases(
    package: str,
    *,
    python: Path,
    uv: str,
    index_args: Sequence[str] = (),
    pre: bool = False,
) -> Releases:
    """Every release of ``package`` the index offers ``python``; raises ReleaseError if none."""
    cmd = [*pip_command(uv), "--python", str(python), "index", "versions", "--json"]
    if pre:
        cmd.append("--pre")
    cmd += [*index_args, package]
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=LIST_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReleaseError(f"listing the releases of {package!r} failed: {exc}") from exc
    errors = done.stderr.strip().splitlines()
    if done.returncode != 0:
        if any("No matching distribution found" in line for line in errors):
            raise ReleaseError(
                f"unknown package {package!r}: the configured index has no release of it that "
                f"Python at {python} can install",
                empty=True,
            )
        detail = "\n".join(errors[-5:])
        raise ReleaseError(f"listing the releases of {package!r} failed:\n{detail}")
    releases = parse_listing(package, done.stdout, pre=pre)
    if not releases.versions:
        kind = "release" if pre else "final release (pre-releases need --pre)"
        raise ReleaseError(f"package {package!r} has no {kind} on the configured index", empty=True)
    return releases
