"""actions/upload-artifact stand-in: copy the matched files to $COMPAT_ACT_STORE/artifacts/NAME.

As upload-artifact v4 does: `path` lines are globs, `!` lines exclude, the artifact's root is
the matched paths' common folder, hidden files are left out unless include-hidden-files, an
existing name fails unless overwrite, and if-no-files-found is warn / error / ignore."""

import glob
import json
import os
import shutil
import sys
from pathlib import Path

env = os.environ
name = env["NAME"]
workspace = Path(env["GITHUB_WORKSPACE"])
store = Path(env["COMPAT_ACT_STORE"])
dest = store / "artifacts" / name
include, exclude = [], []
for line in env["PATHS"].splitlines():
    line = line.strip()
    if line:
        (exclude if line.startswith("!") else include).append(line.lstrip("!"))


def expand(pattern: str) -> list[Path]:
    pattern = os.path.expanduser(pattern)
    base = pattern if os.path.isabs(pattern) else str(workspace / pattern)
    return [Path(p) for p in glob.glob(base, recursive=True)]


roots = [p for pat in include for p in expand(pat)]
excluded = {p.resolve() for pat in exclude for p in expand(pat)}
files: list[tuple[Path, Path]] = []  # (file, root it was matched under)
for p in roots:
    found = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    for f in found:
        files.append((f, p if p.is_dir() else p.parent))
hidden = env.get("INCLUDE_HIDDEN") == "true"
kept = []
for f, root in files:
    rel_parts = f.relative_to(root).parts
    if f.resolve() in excluded or (not hidden and any(x.startswith(".") for x in rel_parts)):
        continue
    kept.append(f)
if not kept:
    how = env.get("IF_NO_FILES_FOUND", "warn")
    message = f"no files were found with the provided path: {env['PATHS'].strip()!r}"
    with open(store / "log.jsonl", "a") as fh:
        fh.write(
            json.dumps({"action": "upload", "job": env.get("GITHUB_JOB"), "name": name, "files": 0})
            + "\n"
        )
    if how == "error":
        sys.exit(f"Error: {message}. No artifacts will be uploaded.")
    print(f"{'Warning' if how == 'warn' else 'Info'}: {message}. No artifacts will be uploaded.")
    sys.exit(0)
common = Path(os.path.commonpath([str(p if p.is_dir() else p.parent) for p in roots]))
if dest.exists():
    if env.get("OVERWRITE") != "true":
        sys.exit(f"Error: an artifact with the name {name!r} already exists (overwrite is false)")
    shutil.rmtree(dest)
for f in kept:
    target = dest / f.relative_to(common)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(f, target)
with open(store / "log.jsonl", "a") as fh:
    record = {
        "action": "upload",
        "job": env.get("GITHUB_JOB"),
        "name": name,
        "files": len(kept),
        "overwrite": env.get("OVERWRITE"),
        "retention-days": env.get("RETENTION_DAYS"),
    }
    fh.write(json.dumps(record) + "\n")
with open(env["GITHUB_OUTPUT"], "a") as fh:
    fh.write(f"artifact-id={abs(hash(name)) % 10**9}\n")
print(f"uploaded {len(kept)} files as {name!r}")
