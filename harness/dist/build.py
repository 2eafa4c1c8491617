"""compat's distributions, built once and checked: ``nox -s dist``.

    python -m harness.dist.build [--root DIR] [--out DIR] [--reports DIR] [--uv UV] [--no-twine]
        [--tag TAG]

uv builds the sdist and the wheel of the project at ``--root`` into ``--out`` (``dist/``; its
earlier distributions of this project are removed first, so the folder holds exactly one of
each), then every check below runs, and ``reports/dist.json`` records the two files (name, size,
sha256), the version and each check's problems. Exit 0 when no check found a problem, 1 when one
did (each printed with what it expected), 2 when the input is refused: ``--tag`` (the release
workflow's) that is not ``v`` + the version compat writes is refused before anything is built.

- **the wheel** holds every module of the tree's ``compat/``, ``compat/py.typed`` and the
  LICENSE byte for byte, and nothing outside ``compat/`` and its ``.dist-info``;
- **the sdist** holds the LICENSE, pyproject.toml, README.md, ``compat/py.typed`` and every
  module of ``compat/``;
- **the metadata** (the wheel's METADATA): the project's name, the version compat/__init__.py
  writes (``compat.__version__``, read without importing torch), pyproject.toml's
  ``requires-python``, its license, and each of its extras with every requirement it names;
- **twine check --strict** on both: what the index checks at upload (the long description
  renders). ``--no-twine`` leaves it out (a venv without twine: the harness's own tests).
"""

from __future__ import annotations

import argparse
import email
import email.message
import hashlib
import json
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.matrix import paths
from harness.matrix.errors import Refused
from harness.matrix.project import PACKAGE, written_version

LICENSE = "LICENSE"
MARKER = f"{PACKAGE}/py.typed"  # PEP 561: compat is typed
SDIST_FILES = (LICENSE, "pyproject.toml", "README.md", MARKER)
REPORT = "dist.json"
SCHEMA = 1


@dataclass(frozen=True)
class Dists:
    """One sdist and one wheel of the project."""

    sdist: Path
    wheel: Path


def tree_modules(root: Path) -> set[str]:
    """Every ``.py`` file of the tree's ``compat/``, as archive names (``compat/_move.py``)."""
    return {
        p.relative_to(root).as_posix()
        for p in (root / PACKAGE).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def build(root: Path, out: Path, uv: str) -> Dists:
    """uv's build of ``root`` into ``out``, after removing the project's earlier distributions
    there; refused when uv fails or does not leave exactly one sdist and one wheel."""
    out.mkdir(parents=True, exist_ok=True)
    stem = "compat_matrix-"
    for old in [*out.glob(f"{stem}*.whl"), *out.glob(f"{stem}*.tar.gz")]:
        old.unlink()
    done = subprocess.run(
        [uv, "build", "--out-dir", str(out), str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise Refused(f"uv build {root} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    wheels, sdists = sorted(out.glob(f"{stem}*.whl")), sorted(out.glob(f"{stem}*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        found = [p.name for p in [*wheels, *sdists]]
        raise Refused(f"{out} holds {found} after the build, not one sdist and one wheel")
    return Dists(sdist=sdists[0], wheel=wheels[0])


def wheel_problems(wheel: Path, root: Path) -> list[str]:
    """What the wheel lacks or holds that it should not (empty: nothing)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        licenses = [n for n in names if n.endswith(f".dist-info/licenses/{LICENSE}")]
        problems = [f"the wheel lacks {m}" for m in sorted(tree_modules(root) - names)]
        if MARKER not in names:
            problems.append(
                f"the wheel lacks {MARKER}: type checkers would treat compat as untyped"
            )
        if len(licenses) != 1:
            problems.append(f"the wheel holds {len(licenses)} .dist-info/licenses/{LICENSE}, not 1")
        elif archive.read(licenses[0]) != (root / LICENSE).read_bytes():
            problems.append(f"the wheel's {licenses[0]} differs from the tree's {LICENSE}")
    stray = sorted(n for n in names if not n.startswith(f"{PACKAGE}/") and ".dist-info/" not in n)
    return problems + [f"the wheel holds {n}, outside {PACKAGE}/ and its .dist-info" for n in stray]


def sdist_problems(sdist: Path, root: Path) -> list[str]:
    """What the sdist lacks (empty: nothing); names are read below its top folder."""
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    wanted = set(SDIST_FILES) | tree_modules(root)
    return [f"the sdist lacks {name}" for name in sorted(wanted - names)]


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        found = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        if len(found) != 1:
            raise Refused(f"{wheel.name} holds {len(found)} .dist-info/METADATA files, not 1")
        return email.message_from_bytes(archive.read(found[0]))


def metadata_problems(meta: email.message.Message, root: Path) -> list[str]:
    """Where the wheel's metadata disagrees with pyproject.toml and compat's written version."""
    project: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = {
        "Name": project["name"],
        "Version": written_version(root),
        "Requires-Python": project["requires-python"],
        "License-Expression": project["license"],
    }
    problems = [
        f"the metadata's {field} is {meta[field]!r}, not {value!r}"
        for field, value in wanted.items()
        if meta[field] != value
    ]
    extras = set(meta.get_all("Provides-Extra") or [])
    requires = [r.replace('"', "'") for r in meta.get_all("Requires-Dist") or []]
    for extra, reqs in sorted(project.get("optional-dependencies", {}).items()):
        if extra not in extras:
            problems.append(f"the metadata provides no extra {extra!r} (it has {sorted(extras)})")
        for req in reqs:
            if not any(r.startswith(req) and f"extra == '{extra}'" in r for r in requires):
                problems.append(f"the metadata's extra {extra!r} does not require {req!r}")
    for req in project.get("dependencies", []):
        if not any(r == req for r in requires):
            problems.append(f"the metadata does not require {req!r} (it has {requires})")
    return problems


def twine_problems(dists: Dists) -> list[str]:
    """``twine check --strict`` of both files, in this interpreter (empty: it passed)."""
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dists.sdist), str(dists.wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        return []
    return [f"twine check --strict failed (exit {done.returncode}): {done.stdout}{done.stderr}"]


def file_entry(path: Path) -> dict[str, Any]:
    return {
        "name": path.name,
        "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def check(dists: Dists, root: Path, *, twine: bool = True) -> dict[str, list[str]]:
    """Each check's problems (an empty list: it passed)."""
    found = {
        "wheel": wheel_problems(dists.wheel, root),
        "sdist": sdist_problems(dists.sdist, root),
        "metadata": metadata_problems(wheel_metadata(dists.wheel), root),
    }
    if twine:
        found["twine"] = twine_problems(dists)
    return found


def report(dists: Dists, root: Path, checks: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": written_version(root),
        "sdist": file_entry(dists.sdist),
        "wheel": file_entry(dists.wheel),
        "checks": checks,
        "ok": not any(checks.values()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.dist.build", description=__doc__)
    parser.add_argument("--root", type=Path, default=paths.ROOT)
    parser.add_argument("--out", type=Path, default=paths.ROOT / "dist")
    parser.add_argument("--reports", type=Path, default=paths.DEFAULT_REPORTS)
    parser.add_argument("--uv", default="uv")
    parser.add_argument("--no-twine", action="store_true")
    parser.add_argument("--tag", help="a release's tag: refused unless it is v<compat.__version__>")
    args = parser.parse_args(argv)
    try:
        if args.tag is not None and args.tag != f"v{written_version(args.root)}":
            raise Refused(
                f"the tag {args.tag!r} is not v{written_version(args.root)}: a release's tag names"
                " the version compat/__init__.py writes (compat.__version__)"
            )
        dists = build(args.root, args.out, args.uv)
        found = report(dists, args.root, check(dists, args.root, twine=not args.no_twine))
    except Refused as exc:
        print(f"[dist] refused: {exc}", file=sys.stderr)
        return 2
    args.reports.mkdir(parents=True, exist_ok=True)
    (args.reports / REPORT).write_text(json.dumps(found, indent=2) + "\n")
    for name, problems in found["checks"].items():
        print(f"[dist] {name}: {'ok' if not problems else ''}")
        for problem in problems:
            print(f"[dist]   {problem}")
    print(f"[dist] {dists.wheel}  {found['wheel']['sha256']}")
    print(f"[dist] {dists.sdist}  {found['sdist']['sha256']}")
    return 0 if found["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
