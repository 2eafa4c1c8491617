"""actions/checkout stand-in: clone $COMPAT_ACT_SOURCE at REF into DEST (see ../README.md)."""

import json
import os
import subprocess
import sys
from pathlib import Path

env = os.environ
repository, ref = env["REPOSITORY"], env["REF"] or env["GITHUB_SHA"]
if repository != env["COMPAT_ACT_REPOSITORY"]:
    sys.exit(
        f"checkout stand-in: no local copy of {repository!r} (only {env['COMPAT_ACT_REPOSITORY']!r})"
    )
dest = Path(env["GITHUB_WORKSPACE"], env["DEST"]).resolve()
dest.mkdir(parents=True, exist_ok=True)
if any(dest.iterdir()):
    subprocess.run(["git", "-C", str(dest), "clean", "-qffdx"], check=False)
    for child in dest.iterdir():
        if child.name != ".git":
            subprocess.run(["rm", "-rf", str(child)], check=True)
    subprocess.run(["rm", "-rf", str(dest / ".git")], check=True)
subprocess.run(
    ["git", "clone", "-q", "--no-checkout", env["COMPAT_ACT_SOURCE"], str(dest)], check=True
)
subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", ref], check=True)
with open(Path(env["COMPAT_ACT_STORE"], "log.jsonl"), "a") as fh:
    record = {
        "action": "checkout",
        "job": env.get("GITHUB_JOB"),
        "repository": repository,
        "ref": ref,
        "persist-credentials": env["PERSIST"],
    }
    fh.write(json.dumps(record) + "\n")
print(f"checked out {repository} at {ref} into {dest}")
