"""A test's HTTP server on 127.0.0.1, served from a thread and stopped when the test ends, and
the quiet request handler the fake APIs build on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

Server = TypeVar("Server", bound=ThreadingHTTPServer)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """Serve ``server`` (bound to 127.0.0.1 by its constructor) until the block ends."""
    host = server.server_address[0]
    assert host == "127.0.0.1", f"a test server binds to 127.0.0.1 only, not {host!r}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with :meth:`send`."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
