"""The prerelease tier's install step: the newest release of each distribution, pre-releases
included, as the runner's index lists them for the cell's interpreter, installed pinned exactly.

``python -m harness.matrix.prerelease --python PY --uv UV DIST...`` lists each distribution's
releases (:func:`harness.matrix.releases.list_releases` with ``pre=True``: pip's ``index versions
--pre`` against that interpreter, the user's index configuration applied), picks the greatest, and
installs ``DIST==VERSION`` for all of them in one ``uv pip install`` over what the cell's pins
brought, so a pre-release replaces a final release of the same distribution (safetensors 0.8.0 by
0.9.0rc1) and their dependencies are resolved as usual. An exact pin is how uv and pip accept a
pre-release without allowing one anywhere else. It prints each choice; the cell records the
installed versions as every cell does. Exit status: uv's, or 1 when a listing fails (the reason
printed). Standard library and ``packaging`` only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.matrix import releases

LISTINGS_AT_ONCE = 5  # pip processes asking the index at once


def newest_pins(dists: Sequence[str], python: Path, uv: str) -> list[str]:
    """``dist==version`` for each of ``dists``: its greatest release, pre-releases included.

    Raises:
        releases.ReleaseError: a listing failed or found no release.
    """

    def newest(dist: str) -> str:
        found = releases.list_releases(dist, python=python, uv=uv, pre=True)
        return f"{dist}=={max(found.versions)}"

    with ThreadPoolExecutor(max_workers=LISTINGS_AT_ONCE) as pool:
        return list(pool.map(newest, dists))


def install_command(uv: str, python: Path, pins: Sequence[str]) -> list[str]:
    return [uv, "pip", "install", "--python", str(python), *pins]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.matrix.prerelease", description=__doc__
    )
    parser.add_argument("--python", type=Path, required=True, help="the cell's interpreter")
    parser.add_argument("--uv", required=True, help="the uv the cell installs with")
    parser.add_argument("dists", nargs="+", help="distributions to install at their newest")
    args = parser.parse_args(argv)
    try:
        pins = newest_pins(args.dists, args.python, args.uv)
    except releases.ReleaseError as exc:
        print(f"[prerelease] {exc}", file=sys.stderr)
        return 1
    print(f"[prerelease] newest on the index, pre-releases included: {' '.join(pins)}", flush=True)
    return subprocess.run(install_command(args.uv, args.python, pins), check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
