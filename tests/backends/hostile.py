"""A hostile HTTP server for the faults the project's fake server cannot script: headers
it never sends (a malformed Retry-After, Content-Encoding), a Content-Length it does not
keep, a body that never ends. Real sockets, real HTTP/1.1; one scripted answer per
request, in order (the last one repeats)."""

from __future__ import annotations

import gzip
import json
import socket
import socketserver
import threading
from collections.abc import Callable
from typing import Any

Answer = bytes | Callable[[socket.socket], None]


def response(status: int, body: bytes, *headers: str) -> bytes:
    """A whole HTTP/1.1 response whose Content-Length is the body's."""
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *headers, "", ""]
    return "\r\n".join(head).encode("latin-1") + body


def completion(text: str = "fine") -> bytes:
    body = {
        "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
    return response(200, json.dumps(body).encode(), "Content-Type: application/json")


def gzip_bomb(megabytes: int) -> bytes:
    """A gzip body of `megabytes` MB of spaces (a few hundred KB on the wire)."""
    return gzip.compress(b" " * (megabytes * 1024 * 1024), compresslevel=9)


def announced(length: int) -> Answer:
    """A 200 announcing `length` bytes, then sending a trickle and holding the socket."""

    def send(connection: socket.socket) -> None:
        connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n".encode())
        _trickle(connection)

    return send


def endless_chunks(status: int = 200) -> Answer:
    """A chunked answer with `status` whose chunks never stop (until the client hangs up)."""

    def send(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n\r\n" % status)
        chunk = b" " * 65536
        try:
            while True:
                connection.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            return

    return send


def _trickle(connection: socket.socket) -> None:
    try:
        for _ in range(20_000):
            connection.sendall(b" " * 65536)
    except OSError:
        return


class HostileServer:
    """`with HostileServer([answer, ...]) as server:` ... `server.base_url`."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        hostile = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                reader = self.request.makefile("rb")
                while True:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = reader.readline()
                        if not line:
                            return
                        head += line
                    length = 0
                    for line in head.split(b"\r\n"):
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    reader.read(length)
                    with hostile._lock:
                        index = min(len(hostile.requests), len(hostile.answers) - 1)
                        hostile.requests.append(head)
                    answer = hostile.answers[index]
                    if callable(answer):
                        answer(self.request)
                        return
                    self.request.sendall(answer)

        self._lock = threading.Lock()
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> HostileServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
