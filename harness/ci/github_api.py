"""The few GitHub REST calls the workflows' scripts make, against ``$GITHUB_API_URL``.

No address is written here: GitHub Actions sets ``GITHUB_API_URL``, ``GITHUB_REPOSITORY`` and
``GITHUB_TOKEN`` (tests point them at a server on 127.0.0.1). Standard library.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from harness.matrix.errors import Refused

NEEDED = ("GITHUB_API_URL", "GITHUB_REPOSITORY", "GITHUB_TOKEN")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hand a redirect back to the caller: an artifact's archive redirects to a pre-signed
    address, which must be fetched without the repository token."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class GitHub:
    """One repository's REST API (``api``: GITHUB_API_URL, ``repository``: owner/name)."""

    def __init__(self, api: str, repository: str, token: str, timeout_s: float = 30) -> None:
        self.base = f"{api.rstrip('/')}/repos/{repository}"
        self.token = token
        self.timeout_s = timeout_s

    @classmethod
    def from_env_or_say(cls) -> GitHub | None:
        """:meth:`from_env`, or None after one ``error:`` line on stderr naming what is absent
        (a command line's exit status 2)."""
        try:
            return cls.from_env()
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GitHub:
        """From the variables GitHub Actions sets; ValueError naming the absent ones."""
        env = os.environ if environ is None else environ
        absent = [name for name in NEEDED if not env.get(name)]
        if absent:
            raise Refused(f"{', '.join(absent)} not set (GitHub Actions sets them)")
        return cls(env["GITHUB_API_URL"], env["GITHUB_REPOSITORY"], env["GITHUB_TOKEN"])

    def _request(self, method: str, url: str, data: bytes | None = None) -> urllib.request.Request:
        return urllib.request.Request(
            url,
            data=data,
            method=method,
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self.token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
            },
        )

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """A JSON call on ``path`` (below /repos/owner/name); its decoded answer."""
        data = None if body is None else json.dumps(body).encode()
        request = self._request(method, self.base + path, data)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def download(self, path: str, limit: int) -> bytes:
        """The bytes behind ``path`` (an artifact's zip), following GitHub's one redirect to a
        pre-signed address without the token; ValueError past ``limit`` bytes."""
        opener = urllib.request.build_opener(_NoRedirect)
        request = self._request("GET", self.base + path)
        try:
            with opener.open(request, timeout=self.timeout_s) as response:
                return _read(response, limit)
        except urllib.error.HTTPError as exc:
            location = exc.headers.get("Location") if exc.code in (301, 302, 303, 307) else None
            if not location:
                raise
        with urllib.request.urlopen(location, timeout=self.timeout_s) as response:
            return _read(response, limit)


def _read(response: Any, limit: int) -> bytes:
    data: bytes = response.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"the download exceeds {limit} bytes")
    return data
