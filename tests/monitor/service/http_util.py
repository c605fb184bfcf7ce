"""Small HTTP helpers for the service tests (plain urllib and raw sockets, no mocks)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request


def post(url: str, body: bytes, ctype: str, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype, **headers})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read(), dict(resp.headers.items())
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers.items())


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def raw_exchange(host: str, port: int, head: bytes, chunks: list[bytes] | None = None, timeout: float = 10) -> bytes:
    """Send a request head and then chunks until the server answers; returns what the server sent."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(head)
        sock.setblocking(False)
        received = b""
        for chunk in chunks or []:
            try:
                received += sock.recv(65536)
            except BlockingIOError:
                pass
            if received:
                break
            try:
                sock.sendall(chunk)
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                break
        sock.setblocking(True)
        sock.settimeout(timeout)
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
                if b"\r\n\r\n" in received and b"Content-Length" in received:
                    head_end = received.index(b"\r\n\r\n") + 4
                    length = int(received.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                    if len(received) >= head_end + length:
                        break
        except (ConnectionResetError, TimeoutError):
            pass
        return received
