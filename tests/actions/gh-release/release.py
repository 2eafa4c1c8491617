"""The act stand-in of softprops/action-gh-release: the tag's release is the folder
$COMPAT_ACT_STORE/releases/$TAG, and each file $FILES matches is attached (copied) to it."""

import glob
import json
import os
import shutil
import sys
from pathlib import Path

env = os.environ
store = Path(env["COMPAT_ACT_STORE"])
tag = env["TAG"]
if not tag:
    sys.exit("gh-release stand-in: no tag (not a tag push, and no tag_name)")
release = store / "releases" / tag
release.mkdir(parents=True, exist_ok=True)
attached = []
for pattern in filter(None, (line.strip() for line in env.get("FILES", "").splitlines())):
    matched = sorted(glob.glob(pattern))
    if not matched and env.get("STRICT") == "true":
        sys.exit(f"gh-release stand-in: {pattern!r} matches no file")
    for name in matched:
        shutil.copy2(name, release / Path(name).name)
        attached.append(Path(name).name)
with open(store / "log.jsonl", "a") as fh:
    fh.write(json.dumps({"action": "gh-release", "tag": tag, "files": attached}) + "\n")
