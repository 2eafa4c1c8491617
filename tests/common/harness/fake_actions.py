"""GitHub's Actions API for one repository, played by a test's server on 127.0.0.1: a workflow's
runs (filtered by ``?event=`` as GitHub filters them), a run's artifacts, an artifact's archive
(answered, as GitHub answers, with a redirect to signed storage, here ``/blob/<id>``), every
request recorded with its headers, and chosen paths broken (HTTP 500, as on a bad day).

    with serving(FakeActions({800: Run(8, "schedule", [Artifact(1, "matrix-report", zip)])})) as gh:
        GitHub(gh.api_url, REPO, "token")
"""

from __future__ import annotations

import io
import json
import stat
import zipfile
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Final
from urllib.parse import parse_qs, urlparse

from tests.common.harness.local_http import QuietHandler

REPO: Final = "owner/compat-matrix"
ACTIONS: Final = f"/api/repos/{REPO}/actions"


def archive(members: dict[str, bytes], link: str = "", deflate: bool = False) -> bytes:
    """A zip of ``members``; ``link``: also a symbolic-link member of that name, as
    ``zip --symlinks`` writes one."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


@dataclass
class Artifact:
    id: int
    name: str
    data: bytes
    expired: bool = False


@dataclass
class Run:
    number: int
    event: str = "schedule"
    artifacts: list[Artifact] = field(default_factory=list)


Runs = dict[int, Run]  # run id -> run


class FakeActions(ThreadingHTTPServer):
    """The Actions API of :data:`REPO`, serving ``runs`` as the runs of ``workflow`` (another
    workflow file is not found, HTTP 404).

    ``broken``: request paths (without the query) answered with HTTP 500.
    ``requests``: every request's path (with its query) and headers, in order."""

    def __init__(self, runs: Runs, workflow: str = "nightly.yml") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.runs = runs
        self.runs_path = f"{ACTIONS}/workflows/{workflow}/runs"
        self.broken: set[str] = set()
        self.requests: list[tuple[str, dict[str, str]]] = []

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api"

    def listing(self, event: str) -> list[dict[str, object]]:
        return [
            {
                "id": run_id,
                "run_number": run.number,
                "event": run.event,
                "conclusion": "success",
                "created_at": f"day {run.number}",
            }
            for run_id, run in sorted(self.runs.items(), reverse=True)
            if not event or run.event == event
        ]

    def artifact(self, artifact_id: int) -> bytes:
        return next(a.data for r in self.runs.values() for a in r.artifacts if a.id == artifact_id)


class _Handler(QuietHandler):
    server: FakeActions

    def do_GET(self) -> None:
        self.server.requests.append((self.path, dict(self.headers)))
        url = urlparse(self.path)
        path, gh = url.path, self.server
        if path in gh.broken:
            self.send(500, b'{"message": "Server Error"}')
        elif path == gh.runs_path:
            event = parse_qs(url.query).get("event", [""])[0]
            self.send(200, json.dumps({"workflow_runs": gh.listing(event)}).encode())
        elif path.startswith(f"{ACTIONS}/runs/") and path.endswith("/artifacts"):
            run = gh.runs[int(path.split("/")[-2])]
            found = [{"id": a.id, "name": a.name, "expired": a.expired} for a in run.artifacts]
            self.send(200, json.dumps({"artifacts": found}).encode())
        elif path.startswith(f"{ACTIONS}/artifacts/") and path.endswith("/zip"):
            blob = f"http://127.0.0.1:{gh.server_address[1]}/blob/{path.split('/')[-2]}"
            self.send(302, b"", {"Location": blob})
        elif path.startswith("/blob/"):
            self.send(200, gh.artifact(int(path.rsplit("/", 1)[1])))
        else:
            self.send(404, b"{}")
