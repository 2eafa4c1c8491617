"""A peer release's own test files, from its sdist on the configured package index.

:func:`locate` asks uv which sdist the configured index has for ``name==version`` (``uv pip
compile --no-deps --no-binary :all: --format pylock.toml``: its URL, size and sha256, in a
fraction of a second, nothing built); :func:`download` fetches it into the cache, keyed by that
hash and checked against it (a cached file is checked again before use); :func:`extract` copies
only the files a suite names into a fresh folder. A missing sdist, a hash or size that does not
match, a missing file: each is a :class:`PeerFetchError` naming it, never a skip. A peer
installed from a URL (:func:`installed_from_url`: a gate's candidate, such as an upstream pull
request's source or wheel) has no sdist of its own version on the index: its tests are those of
the newest release below it (``locate(..., below=True)``), and the suite's entry says so.

The cache is ``$COMPAT_MATRIX_PEER_CACHE``, else ``.nox/peer-sdists`` of this project (beside
the venvs nox keeps; ``nox -s clean-envs`` leaves it): ``<sha256>/<file name>``. uv is
``$COMPAT_MATRIX_UV`` (the harness sets it to the uv it installs the cell with), else what
:func:`harness.matrix.interpreters.uv_bin` finds ($UV, the uv package, PATH).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import posixpath
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: requirements/test.txt installs tomli there
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[3]
CACHE_ENV = "COMPAT_MATRIX_PEER_CACHE"
UV_ENV = "COMPAT_MATRIX_UV"
DEFAULT_CACHE = ROOT / ".nox" / "peer-sdists"
CHUNK = 1 << 20


class PeerFetchError(RuntimeError):
    """The peer's test files could not be had; the message names what and why."""


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    url: str
    sha256: str
    size: int | None

    @property
    def filename(self) -> str:
        name = posixpath.basename(urllib.parse.unquote(urllib.parse.urlparse(self.url).path))
        if not name or name in (".", ".."):
            raise PeerFetchError(
                f"the index's sdist URL of {self.name} {self.version} names no file"
            )
        return name


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def find_uv() -> str:
    named = os.environ.get(UV_ENV)
    if named:
        return named
    from harness.matrix.interpreters import uv_bin

    try:
        return uv_bin()
    except RuntimeError as exc:
        raise PeerFetchError(f"no uv to locate the peers' sdists with: {exc}") from None


def _normal(name: str) -> str:
    return "-".join(name.replace("_", "-").replace(".", "-").lower().split("-"))


def installed_from_url(name: str) -> str | None:
    """Where ``name`` was installed from when it is not a release of an index (PEP 610's
    ``direct_url.json``: a wheel or source path, a VCS checkout, an archive URL, as a gate's
    candidate is); None for a release installed from an index, or for no such distribution."""
    try:
        text = importlib.metadata.distribution(name).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return "a direct URL (an unreadable direct_url.json)"
    return str(found.get("url") or "a direct URL") if isinstance(found, dict) else "a direct URL"


def locate(
    name: str, version: str, scratch: Path, *, uv: str | None = None, below: bool = False
) -> Sdist:
    """The sdist of ``name==version`` on the configured index: URL, sha256 and size; with
    ``below``, that of the newest release older than ``version`` (for a version the index does
    not have: a candidate built from an upstream's source)."""
    scratch.mkdir(parents=True, exist_ok=True)
    wanted, lock = scratch / "peer.in", scratch / "pylock.toml"  # uv needs this file name
    asked = f"{name}<{version}" if below else f"{name}=={version}"
    wanted.write_text(f"{asked}\n")
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    cmd = [uv or find_uv(), "pip", "compile", str(wanted), "--no-deps", "--no-binary", ":all:"]
    cmd += ["--format", "pylock.toml", "-o", str(lock), "--python-version", python, "--quiet"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerFetchError(f"locating the sdist of {name} {version}: {exc}") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[-600:]
        raise PeerFetchError(
            f"uv found no sdist of {asked} on the configured index "
            f"(uv pip compile exited {done.returncode}: {said})"
        )
    try:
        packages = tomllib.loads(lock.read_text()).get("packages", [])
    except (OSError, ValueError) as exc:
        raise PeerFetchError(f"uv's lock of {name}=={version} is unreadable: {exc}") from None
    for package in packages:
        if _normal(str(package.get("name", ""))) != _normal(name):
            continue
        sdist = package.get("sdist") or {}
        digest = (sdist.get("hashes") or {}).get("sha256")
        found = str(package.get("version"))
        if (found != version and not below) or not sdist.get("url") or not digest:
            break
        size = sdist.get("size")
        return Sdist(name, found, str(sdist["url"]), str(digest), int(size) if size else None)
    raise PeerFetchError(f"the configured index lists no sdist with a sha256 for {asked}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def download(sdist: Sdist, cache: Path | None = None) -> Path:
    """The sdist's file in the cache, downloaded if it is not there (or no longer matches)."""
    folder = (cache or cache_dir()) / sdist.sha256
    path = folder / sdist.filename
    if path.is_file() and _sha256(path) == sdist.sha256:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f".{sdist.filename}.{os.getpid()}.part"
    digest, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(sdist.url, timeout=120) as reply, part.open("wb") as out:
            for block in iter(lambda: reply.read(CHUNK), b""):
                digest.update(block)
                size += len(block)
                out.write(block)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise PeerFetchError(f"downloading {sdist.filename} from {sdist.url}: {exc}") from None
    got = digest.hexdigest()
    if got != sdist.sha256 or (sdist.size is not None and size != sdist.size):
        part.unlink(missing_ok=True)
        raise PeerFetchError(
            f"{sdist.filename} from {sdist.url}: sha256 {got} ({size} bytes) does not match the "
            f"index's sha256 {sdist.sha256} ({sdist.size} bytes)"
        )
    os.replace(part, path)
    return path


def _members(archive: Path) -> set[str]:
    """The names of the archive's regular files."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            return {i.filename for i in z.infolist() if not i.is_dir()}
    with tarfile.open(archive) as t:
        return {m.name for m in t.getmembers() if m.isfile()}


def _read(archive: Path, names: Iterable[str]) -> dict[str, bytes]:
    wanted = set(names)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            return {n: z.read(n) for n in wanted}
    out: dict[str, bytes] = {}
    with tarfile.open(archive) as t:
        for member in t.getmembers():
            if member.name in wanted and member.isfile():
                fh = t.extractfile(member)
                assert fh is not None
                out[member.name] = fh.read()
    return out


def extract(archive: Path, root: str, files: Iterable[str], dest: Path) -> Path:
    """Copy ``root/<file>`` of the sdist for each of ``files`` into ``dest`` (made fresh);
    returns ``dest``, the folder the tests run in. Only regular files named here are written."""
    try:
        members = _members(archive)
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise PeerFetchError(f"{archive.name} is not a readable sdist: {exc}") from None
    tops = {name.split("/", 1)[0] for name in members}
    if len(tops) != 1:
        raise PeerFetchError(f"{archive.name} has no single top folder: {sorted(tops)[:5]}")
    top = tops.pop()
    wanted: dict[str, str] = {}
    for file in files:
        rel = posixpath.normpath(posixpath.join(root, file)) if root else posixpath.normpath(file)
        if rel.startswith(("../", "/")) or rel == "..":
            raise PeerFetchError(f"{file!r} is outside the sdist")
        name = f"{top}/{rel}"
        if name not in members:
            raise PeerFetchError(f"{archive.name} has no {rel}")
        wanted[name] = file
    dest.mkdir(parents=True, exist_ok=False)
    for name, data in _read(archive, wanted).items():
        target = dest / wanted[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest
