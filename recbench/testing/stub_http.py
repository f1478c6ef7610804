"""The stub server's HTTP side: a threading server that accepts hundreds of connects, the request handler bound to a
StubServer (its counters and capacity), and the small client helpers (a free port, a refused URL, /stats)."""
from __future__ import annotations

import json
import socket
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional


class _Server(ThreadingHTTPServer):
    """Thread per connection, a listen backlog deep enough for hundreds of simultaneous connects."""

    daemon_threads = True
    request_queue_size = 1024

    def get_request(self):
        """Accept with TCP_NODELAY: headers and body go out at once (no Nagle / delayed-ACK stall)."""
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr

    def handle_error(self, request, client_address):
        """A client that closed its connection (a run that stopped) is no server error: nothing printed."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def handler_for(stub: Any) -> type:
    """The request handler class bound to one StubServer."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # keep test output quiet
            pass

        def do_GET(self):
            if self.path.rstrip("/").endswith("/stats"):
                self._send(200, json.dumps(stub.stats()).encode())
            elif self.path.split("?")[0].rstrip("/").endswith("/models"):
                status, body = stub.models()
                self._send(status, json.dumps(body).encode())
            else:
                self._send(200, b'{"status":"ok"}')

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(n) or b"{}"
            if self.path.rstrip("/").endswith("/stats/reset"):
                stub.reset()
                self._send(200, b'{"status":"reset"}')
                return
            _serve(stub, self, raw)

        def _send(self, status: int, payload: bytes, headers: Optional[dict] = None):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(payload)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


def _serve(stub: Any, h: BaseHTTPRequestHandler, raw: bytes) -> None:
    """One chat request through the stub's counters and its capacity (a full server: wait for a slot, as requests
    queue on a busy GPU)."""
    with stub._lock:
        stub.received += 1
        stub.paths[h.path] += 1
        stub.in_flight += 1
        stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
    try:
        if stub._slots is None:
            stub._handle(h, json.loads(raw))
        else:
            with stub._slots:
                with stub._lock:
                    stub.serving += 1
                    stub.max_serving = max(stub.max_serving, stub.serving)
                try:
                    stub._handle(h, json.loads(raw))
                finally:
                    with stub._lock:
                        stub.serving -= 1
    finally:
        with stub._lock:
            stub.in_flight -= 1


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (bind to 0, close)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def refused_url() -> str:
    """A loopback base URL where nothing listens: every connection is refused."""
    return f"http://127.0.0.1:{free_port()}/v1"


def get_stats(base_url: str, timeout: float = 10.0) -> dict[str, Any]:
    """The counters of a stub at base_url (works across processes)."""
    with urllib.request.urlopen(base_url.rstrip("/") + "/stats", timeout=timeout) as r:
        return json.loads(r.read())


def reset_stats(base_url: str, timeout: float = 10.0) -> None:
    """Zero the counters of a stub at base_url."""
    req = urllib.request.Request(base_url.rstrip("/") + "/stats/reset", data=b"{}", method="POST")
    urllib.request.urlopen(req, timeout=timeout).close()
