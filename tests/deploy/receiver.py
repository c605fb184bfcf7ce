"""A real HTTP receiver on 127.0.0.1 that records the JSON bodies posted to it (Alertmanager webhooks, API v2)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Records (path, body) of every POST; answers `status`, after `delay_s`."""

    def __init__(self, status: int = 200, delay_s: float = 0.0) -> None:
        self.posts: list[tuple[str, Any]] = []
        self.status = status
        self.delay_s = delay_s
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                with receiver._cond:
                    receiver.posts.append((self.path, body))
                    receiver._cond.notify_all()
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def wait_for(self, predicate: Callable[[list[tuple[str, Any]]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.posts):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
