"""The act stand-in of pypa/gh-action-pypi-publish: copy the sdists and wheels of
$PACKAGES_DIR into the local index $COMPAT_ACT_STORE/index, refusing a file the index already
holds (an index never replaces a released file) and a folder with nothing to publish."""

import json
import os
import shutil
import sys
from pathlib import Path

env = os.environ
store = Path(env["COMPAT_ACT_STORE"])
index = store / "index"
index.mkdir(parents=True, exist_ok=True)
found = sorted(
    p
    for p in Path(env.get("PACKAGES_DIR") or "dist").iterdir()
    if p.name.endswith((".whl", ".tar.gz"))
)
if not found:
    sys.exit(f"pypi-publish stand-in: nothing to publish in {env.get('PACKAGES_DIR')!r}")
held = [p.name for p in found if (index / p.name).exists()]
if held:
    sys.exit(
        f"pypi-publish stand-in: the index already holds {held}: a release file is never replaced"
    )
for path in found:
    shutil.copy2(path, index / path.name)
    print(f"published {path.name} to {index}")
with open(store / "log.jsonl", "a") as fh:
    record = {
        "action": "pypi-publish",
        "job": env.get("GITHUB_JOB"),
        "files": [p.name for p in found],
        "repository-url": env.get("REPOSITORY_URL", ""),
    }
    fh.write(json.dumps(record) + "\n")
