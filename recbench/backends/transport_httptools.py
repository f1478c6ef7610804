"""POST over keep-alive HTTP/1.1 with asyncio's own connections and httptools' parser (llhttp, uvicorn's parser): the
openai backend's transport for plain servers (a vLLM server, a local stub), where aiohttp's request and response
objects cost more of the client's CPU than the HTTP itself.

One pool of at most `concurrency` connections per transport (the backend makes one per server). A request is one
`write` of the head and body on an idle connection (or a new one); the answer is parsed as it arrives and handed back
when the parser says the message is complete. The errors are those of recbench/backends/transport_base.py, as
aiohttp's are mapped in transport.py: a connection refused, reset or closed before the whole answer, or an answer that is
not HTTP, is a ConnectFailure (the backend retries it); no whole answer within `timeout_s` is a ReadTimeout (the
connection is closed: a late answer must not be read as the next request's); a header value with a line break is a
TransportError. An answer whose first line is not an HTTP status line is a NotHttp (a ConnectFailure that names the
start of what the server sent); an answer larger than `max_response_bytes` (headers and body, counted as they arrive)
is a ResponseTooLarge, the connection closed at once, so no more of it is read. Not handled here, so
`transport: auto` takes aiohttp for them: proxies and netrc logins.
"""
from __future__ import annotations

import asyncio
import ssl
from typing import Any, Optional
from urllib.parse import urlsplit

import httptools

from recbench.backends.transport_base import (
    ConnectFailure, HttpReply, NotHttp, OnConnect, ReadTimeout, ResponseTooLarge, Transport, TransportError, first_bytes)


class _Headers(dict):
    """An answer's headers, looked up case-insensitively (names are stored lower-case)."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key: str) -> Any:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and dict.__contains__(self, key.lower())


class _Connection(asyncio.Protocol):
    """One keep-alive connection: writes a request, parses its answer into the waiting future."""

    def __init__(self, max_bytes: Optional[int] = None) -> None:
        self.max_bytes = max_bytes  # None: no limit
        self.transport: Optional[asyncio.Transport] = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: Optional[asyncio.Future] = None
        self.closed = False
        self.keep_alive = True
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._framed = False  # the answer states its length (Content-Length or chunked)
        self._unframed_body = False  # headers in, no stated length: the body runs until the connection closes
        self._first = b""  # the answer's first bytes (named when they are not HTTP)
        self._size = 0  # bytes of the answer's headers and body so far
        self._status_seen = False  # the parser read an HTTP status line
        self._refused = False  # the answer is too large: the rest of it is dropped

    # asyncio's side
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if len(self._first) < 64:
            self._first += data[:64 - len(self._first)]
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            if not self._status_seen:  # the first line is no HTTP status line: name what came instead
                self._fail(NotHttp(first_bytes(self._first)))
            else:
                self._fail(ConnectFailure(f"the server's answer is not HTTP/1.1 ({type(e).__name__}: {e})"))
            self.close()

    def sending(self) -> None:
        """A request is about to be written: its answer's first bytes and size are counted from here."""
        self._first, self._size, self._status_seen, self._refused = b"", 0, False, False

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        if self._unframed_body:  # an answer that states no length ends with its connection
            self._complete()
        self._fail(ConnectFailure("the server closed the connection before its whole answer"
                                  + (f" ({type(exc).__name__}: {exc})" if exc else "")))

    # the parser's side
    def on_message_begin(self) -> None:
        self._headers, self._body, self._framed, self._unframed_body = [], [], False, False

    def on_headers_complete(self) -> None:
        self._unframed_body = not self._framed

    def on_status(self, status: bytes) -> None:
        self._status_seen = True

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        lower = name.lower()
        if lower in (b"content-length", b"transfer-encoding"):
            self._framed = True
        if lower == b"content-length" and value.strip().isdigit() and self.max_bytes is not None \
                and int(value) > self.max_bytes:  # refused before any of the body is read
            self._too_large(int(value), declared=True)
        self._count(len(name) + len(value))

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            self._body.append(body)
            self._count(len(body))

    def _count(self, n: int) -> None:
        self._size += n
        if self.max_bytes is not None and self._size > self.max_bytes and not self._refused:
            self._too_large(self._size, declared=False)

    def _too_large(self, size: int, declared: bool) -> None:
        """Over max_bytes: fail the request, drop what was read and close the connection (nothing more is read)."""
        self._refused = True
        self._body = []
        self._fail(ResponseTooLarge(self.max_bytes or 0, self.parser.get_status_code(), size, declared))
        self.close()

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        self._unframed_body = False
        self._complete()

    def _complete(self) -> None:
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            headers = _Headers((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in self._headers)
            w.set_result(HttpReply(self.parser.get_status_code(), headers, b"".join(self._body)))

    def _fail(self, exc: Exception) -> None:
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class HttptoolsTransport(Transport):
    """At most `concurrency` keep-alive connections per transport; a total timeout per request."""

    name = "httptools"

    def __init__(self, concurrency: int, timeout_s: float, on_connect: Optional[OnConnect] = None,
                 max_response_bytes: Optional[int] = None):
        self._timeout_s, self._on_connect = timeout_s, on_connect
        self._max_bytes = max_response_bytes
        self._connect_s = min(timeout_s, 30.0)
        self._slots = asyncio.Semaphore(concurrency)
        self._idle: dict[tuple, list[_Connection]] = {}
        self._all: set[_Connection] = set()
        self._targets: dict[tuple, tuple[tuple, bytes]] = {}

    def _target(self, url: str, headers: dict[str, str]) -> tuple[tuple, bytes]:
        """(the server's (host, port, tls), the request head before Content-Length) of this URL and these headers."""
        key = (url, tuple(headers.items()))
        got = self._targets.get(key)
        if got is None:
            u = urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise TransportError(f"not an http(s) URL: {url!r}")
            tls = u.scheme == "https"
            port = u.port or (443 if tls else 80)
            lines = [f"POST {u.path or '/'}{'?' + u.query if u.query else ''} HTTP/1.1",
                     f"Host: {u.netloc.rpartition('@')[2]}", "User-Agent: recbench"]
            for k, v in headers.items():
                if any(c in f"{k}{v}" for c in "\r\n"):
                    raise TransportError(f"the header {k!r} holds a line break")
                lines.append(f"{k}: {v}")
            got = self._targets[key] = ((u.hostname, port, tls), ("\r\n".join(lines) + "\r\n").encode("latin-1"))
        return got

    async def _connect(self, server: tuple) -> _Connection:
        """A new connection to server (reported to on_connect once made)."""
        host, port, tls = server
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(
                lambda: _Connection(self._max_bytes), host, port, ssl=ssl.create_default_context() if tls else None), self._connect_s)
        except asyncio.TimeoutError:
            raise ConnectFailure(f"connect timeout after {self._connect_s:g}s") from None
        except OSError as e:  # refused, unreachable, DNS (socket.gaierror), TLS (ssl.SSLError)
            raise ConnectFailure(f"{type(e).__name__}: {e}") from None
        self._all.add(conn)
        if self._on_connect is not None:
            await self._on_connect()
        return conn

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> HttpReply:
        """POST body to url on a kept-alive connection; errors as the module says."""
        server, head = self._target(url, headers)
        async with self._slots:
            idle = self._idle.setdefault(server, [])
            while idle and idle[-1].closed:
                self._all.discard(idle.pop())
            conn = idle.pop() if idle else await self._connect(server)
            loop = asyncio.get_running_loop()
            conn.waiter = waiter = loop.create_future()
            conn.sending()
            conn.transport.write(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))  # type: ignore[union-attr]
            timer = loop.call_later(self._timeout_s, _expire, waiter, self._timeout_s)
            try:
                reply = await waiter
            except BaseException:  # a failure, a timeout or a cancelled request: the connection's state is unknown
                conn.waiter = None
                conn.close()
                self._all.discard(conn)
                raise
            finally:
                timer.cancel()
            if conn.keep_alive and not conn.closed:
                idle.append(conn)
            else:
                conn.close()
                self._all.discard(conn)
            return reply

    async def aclose(self) -> None:
        """Close every connection."""
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports finish closing


def _expire(waiter: asyncio.Future, timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout(f"no whole answer within {timeout_s:g}s"))
