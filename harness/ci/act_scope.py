"""Whether the act scenarios (tests/workflows) have anything left to prove on this tree.

    python -m harness.ci.act_scope covered [--record reports/act.json] [--root .]

The scenarios run the workflow files under ``act``: they prove the wiring between the workflows,
the harness parts the workflows call, the baseline the gate judges against and the documented
caller. Everything else a scenario touches (compat, its suite, the cells' results) is proven by
the stages ``.ci/run`` runs before them on the same tree. So the scenarios need to run only when
a file they exercise (:data:`EXERCISED`) differs from the files of their last green run, which
``tests/workflows/conftest.py`` records in ``reports/act.json`` (:func:`record`) when every
scenario ran and passed. The record holds each exercised file's SHA-256, read from the work tree,
so it matches on any clone with the same contents whatever the commits are.

``covered`` exits 0 when the record covers the tree (the scenarios may be left out: one line says
when and at which commit they last passed) and 1 when they must run: a file exercised changed,
was added or went (each named, the first ten), the record is absent or unreadable, or
``COMPAT_MATRIX_ACT=always`` asks for them (the nightly and anyone who wants them regardless).
The scenarios' static checks (the documented caller, its lint) are not act runs and always run.
Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from harness.matrix.errors import Refused

SCHEMA: Final = 1
RECORD: Final = Path("reports") / "act.json"
ALWAYS: Final = "COMPAT_MATRIX_ACT"  # =always: run the scenarios whatever the record says
# git pathspecs of what the scenarios exercise beyond the stages .ci/run ran before them
EXERCISED: Final = (
    ".github/",  # the workflow files themselves
    "tests/actions/",  # the stand-ins act runs for the marketplace actions
    "tests/workflows/",  # the scenarios, act's driver and the upstream stand-in
    "tests/compat/conftest.py",  # the crashed-cell scenario appends its fault to it
    "tests/compat/sharing/test_sharing.py",  # the red gate scenario names a test of it
    "tests/downstream/test_accelerate.py",  # the upstream caller's regression names two
    "harness/",  # what the workflows call: cells, matrix, report, ci ...
    ":(exclude)harness/mutation/",  # ... but the mutation run, which no scenario starts
    "noxfile.py",
    "matrix.toml",
    "pyproject.toml",
    "requirements/",  # what the workflows' jobs install
    ".ci/browser",  # the report job's browser
    "reports/baseline.json",  # what every gate scenario judges against
    "docs/github-actions.md",  # the documented caller workflow, run as an upstream's CI
)


def fingerprint(root: Path) -> dict[str, str]:
    """Each exercised file git sees in the work tree (tracked, or untracked and not ignored)
    mapped to the SHA-256 of its contents as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *EXERCISED],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    out = {}
    for rel in sorted(set(filter(None, listed.split("\0")))):
        path = root / rel
        if path.is_file():  # a tracked file deleted in the work tree is gone, not listed
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def changed(recorded: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """The paths added, removed or changed between two fingerprints, sorted."""
    return sorted(p for p in set(recorded) | set(current) if recorded.get(p) != current.get(p))


def head(root: Path) -> str:
    """HEAD's commit, with ``+changes`` when the exercised files differ from it."""
    git = ["git", "-C", str(root)]
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--", *EXERCISED], capture_output=True)
    return sha.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def record(
    root: Path, out: Path, scenarios: Sequence[str], seconds: Mapping[str, float]
) -> dict[str, Any]:
    """Write the record of a green run of every scenario on the tree as it is now."""
    doc = {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": head(root),
        "scenarios": sorted(scenarios),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "files": fingerprint(root),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


def verdict(root: Path, path: Path, env: Mapping[str, str]) -> tuple[bool, str]:
    """(covered, the line that says why) for the record at ``path`` and this tree."""
    if env.get(ALWAYS, "") == "always":
        return False, f"act scenarios: run: {ALWAYS}=always"
    try:
        doc = json.loads(path.read_text())
        files = doc["files"]
        if doc.get("schema") != SCHEMA or not isinstance(files, dict):
            raise Refused(f"schema {doc.get('schema')!r}, expected {SCHEMA}")
    except FileNotFoundError:
        return False, f"act scenarios: run: no record of a green run ({path} is absent)"
    except (ValueError, KeyError, TypeError) as exc:
        return False, f"act scenarios: run: {path} is unreadable ({exc!r}); it is rewritten"
    differ = changed(files, fingerprint(root))
    if differ:
        named = ", ".join(differ[:10]) + (
            f" and {len(differ) - 10} more" if len(differ) > 10 else ""
        )
        return False, f"act scenarios: run: changed since their last green run: {named}"
    return True, (
        f"act scenarios: not run: {len(files)} files they exercise are as they were when all"
        f" {len(doc.get('scenarios', []))} passed ({doc.get('created')}, at"
        f" {str(doc.get('commit'))[:12]}; {path}); the static checks run"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.ci.act_scope", description=__doc__)
    parser.add_argument("command", choices=["covered"])
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--record", type=Path, default=None, help=f"default: ROOT/{RECORD}")
    args = parser.parse_args(argv)
    ok, line = verdict(args.root, args.record or args.root / RECORD, os.environ)
    print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
