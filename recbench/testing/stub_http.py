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
            reply = stub.route("GET", self.path)
            self._send(reply.status, reply.body(), reply.headers)

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(n) or b"{}"
            reply = stub.route("POST", self.path)
            if reply is not None:
                self._send(reply.status, reply.body(), reply.headers)
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
    queue on a busy GPU), then its reply after the reply's wait."""
    stub.arrived(h.path)
    try:
        if stub._slots is None:
            _reply(stub, h, json.loads(raw))
        else:
            with stub._slots:
                stub.serving_now(+1)
                try:
                    _reply(stub, h, json.loads(raw))
                finally:
                    stub.serving_now(-1)
    finally:
        stub.left()


def _reply(stub: Any, h: BaseHTTPRequestHandler, body: dict) -> None:
    """Wait the reply's time (cut short when the server stops), then send it or close the connection (reset)."""
    reply = stub.reply_to(h.headers.get("Authorization", ""), body)
    if reply.wait_s > 0:
        stub._stopping.wait(reply.wait_s)
    if reply.reset:
        h.close_connection = True
        h.connection.shutdown(socket.SHUT_RDWR)
        return
    stub.sent(reply)
    h._send(reply.status, reply.body(), reply.headers)


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on host:port (0: a free port), its backlog deep enough for hundreds of connects."""
    return socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=1024)


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
