"""The openai backend against servers the stub never imitates (issue 40), on both transports (httptools, aiohttp):
an answer larger than model.backend.max_response_bytes is that request's backend error naming the limit and the
setting, and the client stops reading it at once (the server cannot send more than the limit plus the socket buffers);
a server that answers something that is not HTTP stops the run with its own line (not "server down")."""
from __future__ import annotations

import importlib.util
import re
import socket
import threading
from typing import Callable

import pytest

from recbench.api.types import Request, SamplingParams
from recbench.backends.base import BackendUnavailable
from recbench.backends.openai import OpenAIBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast
TRANSPORTS = [pytest.param(t, marks=pytest.mark.skipif(importlib.util.find_spec(t) is None, reason=f"no {t}"))
              for t in ("httptools", "aiohttp")]
MB = 1 << 20
HEAD = b'{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"'
TAIL = b'"}}]}'


class RawServer:
    """A loopback server that reads one request per connection and answers with `answer(server, socket)`; it counts
    the bytes it managed to send (a client that stops reading closes the connection, and the sending stops)."""

    def __init__(self, answer: Callable[["RawServer", socket.socket], None]):
        self.answer, self.sent = answer, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed: the test is over
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)  # a client that neither reads nor closes would leave the sender blocked: fail, not hang
        try:
            conn.recv(65536)
            self.answer(self, conn)
        except OSError:
            pass
        finally:
            conn.close()

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self.sock.close()


def _big_answer(size: int, chunked: bool) -> Callable[[RawServer, socket.socket], None]:
    """A 200 whose body (a valid completion) is `size` bytes: Content-Length stated, or chunked, sent 1 MB at a time."""
    def answer(srv: RawServer, conn: socket.socket) -> None:
        framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % size
        srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%s\r\n\r\n" % framing)
        left, chunk = size - len(HEAD) - len(TAIL), b"a" * MB
        parts = [HEAD]
        while left > 0:
            parts.append(chunk[:min(left, MB)])
            left -= len(parts[-1])
        parts.append(TAIL)
        for p in parts:
            srv.send(conn, b"%x\r\n%s\r\n" % (len(p), p) if chunked else p)
        if chunked:
            srv.send(conn, b"0\r\n\r\n")
    return answer


def _backend(url: str, transport: str, **kw) -> OpenAIBackend:
    return OpenAIBackend(model="m", base_url=url, transport=transport, concurrency=2, timeout_s=20.0,
                         backoff_initial_s=0.01, backoff_max_s=0.02, **kw)


def _ask(b: OpenAIBackend, n: int = 1) -> list:
    try:
        return b.generate([Request.chat([{"role": "user", "content": f"q{i}"}], SamplingParams(max_tokens=4))
                           for i in range(n)])
    finally:
        b.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_answer_over_max_response_bytes_is_an_error_naming_the_setting_and_is_not_read(transport, chunked):
    srv = RawServer(_big_answer(50 * MB, chunked))
    try:
        out = _ask(_backend(srv.url, transport, max_response_bytes=MB, max_retries=2), 2)
    finally:
        srv.close()
    for r in out:
        assert not r.ok and "\n" not in r.error
        assert f"last error: HTTP 200: the answer from {srv.url} " in r.error
        assert "over model.backend.max_response_bytes=1048576; not read further. Raise that setting" in r.error
        assert re.search(r"declares 52,428,800 bytes, over" if not chunked else
                         r"was still coming after (1,0[4-9]\d|1,[1-9]\d\d|[2-9],\d\d\d),\d\d\d bytes, over", r.error)
        assert "1 attempt(s)" in r.error  # the same request would get the same answer: not retried
    # the client stopped reading at the limit: what the server got out is the limit plus the sockets' buffers, far
    # from the 2 x 50 MB it tried to send (the RSS the body would take is never allocated)
    assert srv.sent < 30 * MB, srv.sent


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_answer_under_the_limit_is_read_whole(transport):
    srv = RawServer(_big_answer(MB - 100, chunked=True))
    try:
        (r,) = _ask(_backend(srv.url, transport, max_response_bytes=MB))
    finally:
        srv.close()
    assert r.ok and len(r.text) == MB - 100 - len(HEAD) - len(TAIL) and set(r.text) == {"a"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_server_that_is_not_http_stops_the_run_with_its_own_line(transport):
    srv = RawServer(lambda s, conn: s.send(conn, b"SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n"))
    try:
        with pytest.raises(BackendUnavailable) as e:
            _ask(_backend(srv.url, transport, max_retries=4, down_after_s=30.0), 3)
    finally:
        srv.close()
    msg = str(e.value)
    assert "\n" not in msg and "server down" not in msg
    assert msg.startswith(f"openai backend: the server at {srv.url} answered something that is not HTTP: "
                          "b'SSH-2.0-OpenSSH_9.6'")
    assert msg.endswith("answers in a row); check model.backend.base_url: its host and port must be an "
                        "OpenAI-compatible HTTP server's (https:// for one that speaks TLS)")


def test_max_response_bytes_is_a_schema_default_and_checked():
    from recbench.api.config import validate

    cfg = compose_cfg(["model=openai-server"])
    assert cfg.model.backend.max_response_bytes == 16 * MB
    with pytest.raises(Exception, match=r"model\.backend\.max_response_bytes.*>= 1"):
        validate(compose_cfg(["model=openai-server", "model.backend.max_response_bytes=0"]))
    with pytest.raises(ValueError, match=r"max_response_bytes must be a whole number of bytes >= 1, got 0 "
                                         r"\(model.backend.max_response_bytes\)"):
        OpenAIBackend(model="m", base_url="http://127.0.0.1:9/v1", max_response_bytes=0)
