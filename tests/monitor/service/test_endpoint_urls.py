"""The URLs `serve` prints and the demo shows are URLs an exporter or a browser takes as they are: an IPv6 listen
address is bracketed (`http://[::1]:4318/...`; `http://::1:4318/...` is no URL: its port would be read as part of
the address). No server is started: an IPv6 listener is not bound here (test servers bind 127.0.0.1)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from monitor.serve._server import Server
from monitor.serve._settings import Settings
from tests.monitor.service.conftest import RULES


@pytest.mark.parametrize(
    ("host", "netloc"),
    [("127.0.0.1", "127.0.0.1"), ("::1", "[::1]"), ("::", "[::]"), ("0.0.0.0", "0.0.0.0"), ("localhost", "localhost")],
)
def test_the_urls_of_a_listen_address_are_urls(host: str, netloc: str) -> None:
    server = Server(Settings(rules=(str(RULES),), host=host, metrics_host=host, port=4318, metrics_port=9464))
    server.grpc_port = 4317
    for url, port, path in ((server.endpoint, 4318, "/v1/traces"), (server.metrics_url, 9464, "/metrics"),
                            (server.grpc_endpoint, 4317, "")):  # fmt: skip
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc, parts.port, parts.path) == ("http", f"{netloc}:{port}", port, path), url
