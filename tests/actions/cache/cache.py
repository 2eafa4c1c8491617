"""actions/cache/restore and actions/cache/save stand-ins (see ../README.md).

A cache entry is $COMPAT_ACT_STORE/cache/<key>/<n>/ for the n-th path, copied by hard links."""

import json
import os
import sys
from pathlib import Path

env = os.environ
store = Path(env["COMPAT_ACT_STORE"])
root = store / "cache"
key = env["KEY"]
paths = [Path(os.path.expanduser(p.strip())) for p in env["PATHS"].splitlines() if p.strip()]


def log(**record: object) -> None:
    with open(store / "log.jsonl", "a") as fh:
        fh.write(json.dumps({"job": env.get("GITHUB_JOB"), **record}) + "\n")


def copy(src: Path, dst: Path) -> None:
    """Hard-link every file of src into dst; files already in dst are kept (like tar over an
    existing cache), files that vanish while we walk (a tool's temporary files) are skipped."""
    for folder, _dirs, files in os.walk(src):
        target = dst / Path(folder).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            try:
                os.link(Path(folder, name), target / name, follow_symlinks=False)
            except FileExistsError:
                pass
            except FileNotFoundError:
                continue
            except OSError as exc:
                # another filesystem: a copy of a many-GB uv cache is not what a test should do
                sys.exit(
                    f"cache stand-in: cannot hard-link {src} into {dst} ({exc.strerror}); put the"
                    " scenarios' temporary folder (pytest --basetemp) on the filesystem of the path"
                )


if sys.argv[1] == "save":
    entry = root / key
    if entry.exists():
        print(f"cache stand-in: {key!r} exists; not saved again (GitHub keeps the first too)")
        log(action="cache-save", key=key, saved=False)
        sys.exit(0)
    tmp = root / f".{key}.partial"
    for n, path in enumerate(paths):
        if path.exists():
            copy(path, tmp / str(n))
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.rename(entry)
    log(action="cache-save", key=key, saved=True, paths=[str(p) for p in paths])
    sys.exit(0)

prefixes = [k.strip() for k in env.get("RESTORE_KEYS", "").splitlines() if k.strip()]
matched = key if (root / key).is_dir() else ""
hit = bool(matched)
if not matched and root.is_dir():
    for prefix in prefixes:
        found = [e for e in root.iterdir() if e.is_dir() and e.name.startswith(prefix)]
        if found:
            matched = max(found, key=lambda e: e.stat().st_mtime).name
            break
if not matched and env.get("FAIL_ON_MISS") == "true":
    sys.exit(f"cache stand-in: no cache for {key!r} and fail-on-cache-miss is set")
if matched and env.get("LOOKUP_ONLY") != "true":
    for n, path in enumerate(paths):
        if (root / matched / str(n)).exists():
            copy(root / matched / str(n), path)
with open(env["GITHUB_OUTPUT"], "a") as fh:
    fh.write(
        f"cache-hit={'true' if hit else 'false'}\ncache-primary-key={key}\ncache-matched-key={matched}\n"
    )
log(action="cache-restore", key=key, matched=matched, hit=hit)
print(f"cache stand-in: {key!r} -> {'hit' if hit else matched or 'miss'}")
