"""harness.ci.example_seed: the nightly's example database from the last scheduled night's
artifacts, fetched from a local server on 127.0.0.1 that plays GitHub's Actions API (runs, filtered
by event as GitHub filters them; artifacts; the archive's redirect) and records every request."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from harness.ci import example_seed
from harness.ci.github_api import GitHub
from tests.common.local_http import QuietHandler, serving

REPO = "owner/compat-matrix"
FOUND = {"0a1b2c3d4e5f6071/8899aabbccddeeff": b"\x00\x01choices", "1111/2222": b"\x02"}


def archive(members: dict[str, bytes], link: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if link:  # a symbolic link member, as `zip --symlinks` writes one
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


# run id -> (event, artifacts: (artifact id, name, zip bytes))
Runs = dict[int, tuple[str, list[tuple[int, str, bytes]]]]


def default_runs() -> Runs:
    return {
        900: ("workflow_dispatch", [(9, "hypothesis-torch2.6-cpu", archive({"x/y": b"dispatched"}))]),
        800: (
            "schedule",
            [
                (1, "hypothesis-torch2.6-cpu", archive(dict(list(FOUND.items())[:1]))),
                (2, "hypothesis-torch2.5-cpu", archive(dict(list(FOUND.items())[1:]))),
                (3, "matrix-report", archive({"matrix.json": b"{}"})),
                (4, "hypothesis-evil-cpu", archive({"../escaped": b"x"})),
                (5, "hypothesis-link-cpu", archive({}, link="examples/link")),
                (6, "hypothesis-seed", archive({"stale/entry": b"replayed and dropped"})),
            ],
        ),
        700: ("schedule", [(7, "hypothesis-torch2.6-cpu", archive({"old/one": b"older"}))]),
    }


class FakeGitHub(ThreadingHTTPServer):
    def __init__(self, runs: Runs | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[str] = []
        self.runs: Runs = default_runs() if runs is None else runs
        self.broken = False


class Handler(QuietHandler):
    server: FakeGitHub

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        url = urlparse(self.path)
        base, runs = f"/api/repos/{REPO}/actions", self.server.runs
        if self.server.broken:
            self.send(500, b'{"message": "Server Error"}')
        elif url.path == f"{base}/workflows/nightly.yml/runs":
            event = parse_qs(url.query).get("event", [""])[0]
            listed = [
                {"id": i, "run_number": i // 100, "event": e}
                for i, (e, _) in sorted(runs.items(), reverse=True)
                if not event or e == event
            ]
            self.send(200, json.dumps({"workflow_runs": listed}).encode())
        elif url.path.startswith(f"{base}/runs/") and url.path.endswith("/artifacts"):
            run = int(url.path.split("/")[-2])
            arts = [{"id": a, "name": n, "expired": False} for a, n, _ in runs[run][1]]
            self.send(200, json.dumps({"artifacts": arts}).encode())
        elif url.path.startswith(f"{base}/artifacts/") and url.path.endswith("/zip"):
            art = int(url.path.split("/")[-2])
            port = self.server.server_address[1]
            self.send(302, b"", {"Location": f"http://127.0.0.1:{port}/blob/{art}"})
        elif url.path.startswith("/blob/"):
            art = int(url.path.rsplit("/", 1)[1])
            self.send(200, next(z for _, arts in runs.values() for a, _, z in arts if a == art))
        else:
            self.send(404, b"{}")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serving(FakeGitHub()) as server:
        yield server


def api(server: FakeGitHub) -> GitHub:
    return GitHub(f"http://127.0.0.1:{server.server_address[1]}/api", REPO, "token")


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_newest_scheduled_nights_databases_are_merged(github: FakeGitHub, tmp_path: Path) -> None:
    """A dispatched nightly (newer) is never read, nor an older night, nor another artifact, nor
    the night's own seed."""
    out = tmp_path / "seed"
    lines = example_seed.seed(api(github), "nightly.yml", out, skip="1000")
    assert files(out) == FOUND
    assert "hypothesis-torch2.6-cpu: 1 files of run 800" in lines
    assert "hypothesis-torch2.5-cpu: 1 files of run 800" in lines
    listed = [r for r in github.requests if "/workflows/" in r]
    assert listed and all("event=schedule" in r for r in listed)
    assert not any("/runs/900/" in r or "/runs/700/" in r for r in github.requests)


def test_an_archive_with_a_path_or_a_link_of_its_own_is_skipped(
    github: FakeGitHub, tmp_path: Path
) -> None:
    out = tmp_path / "seed"
    lines = example_seed.seed(api(github), "nightly.yml", out, skip=None)
    said = "\n".join(lines)
    assert "hypothesis-evil-cpu: unusable (member '../escaped' is not a plain relative path)" in said
    assert "hypothesis-link-cpu: unusable (member 'examples/link' is not a regular file)" in said
    assert not (tmp_path / "escaped").exists() and set(files(out)) == set(FOUND)


def test_oversize_members_are_refused() -> None:
    with pytest.raises(ValueError, match="is 1048577 bytes"):
        example_seed.members(archive({"a/b": b"x" * (example_seed.MAX_FILE + 1)}))
    with pytest.raises(ValueError, match="not a plain relative path"):
        example_seed.members(archive({"/etc/cron.d/x": b"x"}))


def test_no_scheduled_night_and_a_broken_api_leave_no_seed(tmp_path: Path) -> None:
    with serving(FakeGitHub({900: ("workflow_dispatch", [])})) as server:
        lines = example_seed.seed(api(server), "nightly.yml", tmp_path / "a", skip=None)
        assert lines == ["no completed scheduled run of nightly.yml: no seed"]
        server.broken = True
        lines = example_seed.seed(api(server), "nightly.yml", tmp_path / "b", skip=None)
        assert len(lines) == 1 and lines[0].startswith("warning: could not list")
    assert not files(tmp_path)
