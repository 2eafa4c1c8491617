"""A test's HTTP server on 127.0.0.1, served from a thread and stopped when the test ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import TypeVar

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
