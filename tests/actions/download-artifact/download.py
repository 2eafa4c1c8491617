"""actions/download-artifact stand-in (v4 semantics): `name` puts one artifact's files in
`path`; otherwise every artifact matching `pattern` (all, without one) goes to path/<name>, or
straight into `path` with merge-multiple. A missing `name` fails; a pattern matching nothing
downloads nothing."""

import fnmatch
import json
import os
import shutil
import sys
from pathlib import Path

env = os.environ
store = Path(env["COMPAT_ACT_STORE"])
workspace = Path(env["GITHUB_WORKSPACE"])
dest = Path(os.path.expanduser(env["DEST"])) if env["DEST"] else workspace
dest = dest if dest.is_absolute() else workspace / dest
available = sorted(p.name for p in (store / "artifacts").glob("*") if p.is_dir())
if env["NAME"]:
    if env["NAME"] not in available:
        sys.exit(f"Error: artifact {env['NAME']!r} not found (have: {available})")
    plan = [(env["NAME"], dest)]
else:
    chosen = [n for n in available if not env["PATTERN"] or fnmatch.fnmatchcase(n, env["PATTERN"])]
    merge = env["MERGE"] == "true"
    plan = [(n, dest if merge else dest / n) for n in chosen]
    if not chosen:
        print(f"no artifacts match {env['PATTERN']!r}; nothing downloaded")
for name, target in plan:
    shutil.copytree(store / "artifacts" / name, target, dirs_exist_ok=True)
with open(store / "log.jsonl", "a") as fh:
    fh.write(
        json.dumps(
            {"action": "download", "job": env.get("GITHUB_JOB"), "names": [n for n, _ in plan]}
        )
        + "\n"
    )
with open(env["GITHUB_OUTPUT"], "a") as fh:
    fh.write(f"download-path={dest}\n")
print(f"downloaded {[n for n, _ in plan]} into {dest}")
