"""POST a JSON body over keep-alive HTTP/1.1 for remote backends: httptools on asyncio's own connections when
installed and no proxy or netrc login applies (recbench/backends/transport_httptools.py: the cheapest per request),
else aiohttp when installed, else httpx.

Every transport raises the same three exceptions, so the backend's retry logic does not depend on the library:
`ConnectFailure` (refused, reset, DNS, connect timeout: the server is not reachable; `NotHttp` when what it answers
is not HTTP), `ReadTimeout` (connected, but no full answer in time) and `TransportError` (anything else, not retried;
`ResponseTooLarge` when an answer runs past `max_response_bytes`, read as it arrives and left unread from there).
"""
from __future__ import annotations

import asyncio
import re
from typing import Any, Optional, Sequence

from recbench.backends.transport_base import (  # noqa: F401 - imported from here by the backend and the tests
    ConnectFailure,
    HttpReply,
    NotHttp,
    OnConnect,
    ReadTimeout,
    ResponseTooLarge,
    Transport,
    TransportError,
)

TRANSPORTS = ("auto", "httptools", "aiohttp", "httpx")
EVENT_LOOPS = ("auto", "asyncio", "uvloop")


def available(kind: str = "auto", urls: Sequence[str] = ()) -> str:
    """The transport `kind` resolves to here for servers at `urls`: for "auto", "httptools" when importable and no
    server is reached through a proxy or with a netrc login (the environment's, which aiohttp honours), else
    "aiohttp" when importable, else "httpx"."""
    if kind not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, got {kind!r} (model.backend.transport)")
    if kind != "auto":
        return kind
    try:
        import httptools  # noqa: F401

        if not any(_from_environment(u) for u in urls):
            return "httptools"
    except ImportError:
        pass
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return "httpx"
    return "aiohttp"


def _from_environment(url: str) -> bool:
    """True when the environment names a proxy for this URL (HTTP(S)_PROXY, not bypassed by NO_PROXY) or a netrc
    login for its host: what only the aiohttp and httpx transports apply."""
    import netrc
    import os
    import urllib.request
    from urllib.parse import urlsplit

    u = urlsplit(url)
    host = u.hostname or ""
    if urllib.request.getproxies().get(u.scheme) and not urllib.request.proxy_bypass(host):
        return True
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    if u.username is None and os.path.isfile(path):
        try:
            return netrc.netrc(path).authenticators(host) is not None
        except (netrc.NetrcParseError, OSError):
            return False
    return False


def event_loop_available(kind: str = "auto") -> str:
    """The event loop `kind` resolves to here: "uvloop" when importable (for "auto"), else "asyncio"."""
    if kind not in EVENT_LOOPS:
        raise ValueError(f"event_loop must be one of {EVENT_LOOPS}, got {kind!r} (model.backend.event_loop)")
    if kind != "auto":
        return kind
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def new_event_loop(kind: str) -> asyncio.AbstractEventLoop:
    """A new event loop of `kind` ("asyncio" or "uvloop", as event_loop_available resolves it)."""
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def make_transport(kind: str, concurrency: int, timeout_s: float, on_connect: Optional[OnConnect] = None,
                   max_response_bytes: Optional[int] = None) -> Transport:
    """Build the transport (call inside the event loop that will use it); `max_response_bytes` None: no limit."""
    kind = available(kind)
    if kind == "httptools":
        from recbench.backends.transport_httptools import HttptoolsTransport

        return HttptoolsTransport(concurrency, timeout_s, on_connect, max_response_bytes)
    cls = AiohttpTransport if kind == "aiohttp" else HttpxTransport
    return cls(concurrency, timeout_s, on_connect, max_response_bytes)


async def read_bounded(chunks: Any, limit: Optional[int], status: int, declared: Optional[int],
                       close: Any) -> bytes:
    """An answer's body from its async chunk iterator, refused (ResponseTooLarge, `close()` called, nothing more
    read) as soon as its declared length or the bytes that arrived pass `limit` (None: no limit)."""
    if limit is not None and declared is not None and declared > limit:
        close()
        raise ResponseTooLarge(limit, status, declared, declared=True)
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if limit is not None and size > limit:
            close()
            raise ResponseTooLarge(limit, status, size, declared=False)
        parts.append(chunk)
    return b"".join(parts)


class AiohttpTransport(Transport):
    """aiohttp.ClientSession with a TCPConnector limited to `concurrency`; total timeout per request."""

    name = "aiohttp"

    def __init__(self, concurrency: int, timeout_s: float, on_connect: Optional[OnConnect] = None,
                 max_response_bytes: Optional[int] = None):
        import aiohttp

        self._aiohttp = aiohttp
        self._max_bytes = max_response_bytes
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(timeout_s, 30.0))
        # the environment's proxy and netrc credentials (what trust_env=True reads) are looked up once per server
        # (_from_env), not in two worker-thread hops per request; no trace_configs: a trace costs every request
        # about 3% of the client's CPU, so new connections are reported by the connector itself
        self._session = aiohttp.ClientSession(connector=_connector(concurrency, on_connect), timeout=timeout,
                                              trust_env=False)
        self._connect_timeout = getattr(aiohttp, "ConnectionTimeoutError", ())
        self._env: dict[str, dict[str, Any]] = {}

    def _from_env(self, url: str) -> dict[str, Any]:
        """The proxy (HTTP(S)_PROXY / NO_PROXY, with its login) and the netrc login (an Authorization header value)
        aiohttp's trust_env=True would use for this URL's server; read on the server's first request."""
        from yarl import URL

        u = URL(url)
        key = str(u.origin())
        if key not in self._env:
            from aiohttp import helpers

            extra: dict[str, Any] = {}
            try:
                extra["proxy"], extra["proxy_auth"] = helpers.get_env_proxy_for_url(u)
            except LookupError:
                pass
            if u.host is not None and u.user is None:  # credentials in the URL win, as aiohttp has it
                try:
                    extra["login"] = helpers.basicauth_from_netrc(helpers.netrc_from_env(), u.host).encode()
                except LookupError:
                    pass
            self._env[key] = extra
        return self._env[key]

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> HttpReply:
        """POST with aiohttp; errors mapped to the transport exceptions."""
        a = self._aiohttp
        try:
            env = self._from_env(url)
            if "login" in env and "Authorization" not in headers:  # an API key's header wins over a netrc login
                headers = {**headers, "Authorization": env["login"]}
            async with self._session.post(url, data=body, headers=headers, proxy=env.get("proxy"),
                                          proxy_auth=env.get("proxy_auth")) as r:
                data = await read_bounded(r.content.iter_any(), self._max_bytes, r.status, r.content_length, r.close)
                return HttpReply(r.status, r.headers, data)
        except self._connect_timeout as e:  # type: ignore[misc]
            raise ConnectFailure(f"connect timeout ({type(e).__name__})") from None
        except asyncio.TimeoutError as e:  # read timeouts (ServerTimeoutError is one too)
            raise ReadTimeout(type(e).__name__) from None
        except (a.ClientConnectionError, a.ClientPayloadError) as e:
            raise ConnectFailure(f"{type(e).__name__}: {e}") from None
        except a.ClientResponseError as e:
            raise _not_http(e) or TransportError(f"{type(e).__name__}: {e}") from None
        except a.ClientError as e:
            raise TransportError(f"{type(e).__name__}: {e}") from None

    async def aclose(self) -> None:
        """Close the session and its connector."""
        await self._session.close()


_QUOTED_BYTES = re.compile(r"b'(?:[^'\\]|\\.)*'" + r'|b"(?:[^"\\]|\\.)*"')  # b'...' as repr() writes bytes


def _not_http(e: BaseException) -> Optional[NotHttp]:
    """NotHttp when aiohttp's parser found no HTTP status line (its BadStatusLine among the causes), naming the bytes
    its message quotes; else None."""
    from aiohttp.http_exceptions import BadStatusLine

    cause: Optional[BaseException] = e
    while cause is not None and not isinstance(cause, BadStatusLine):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    quoted = _QUOTED_BYTES.search(str(cause))
    first = quoted.group(0) if quoted else repr(getattr(cause, "line", "") or str(cause).splitlines()[0])
    return NotHttp(first if len(first) <= 60 else first[:57] + "...")


def _connector(concurrency: int, on_connect: Optional[OnConnect]) -> Any:
    """aiohttp's TCPConnector (at most `concurrency` connections) that awaits on_connect after each new connection,
    where aiohttp's on_connection_create_end trace would (after the connection is made, before the request is sent)."""
    import aiohttp

    class _Connector(aiohttp.TCPConnector):
        async def _create_connection(self, req: Any, traces: Any, timeout: Any) -> Any:
            proto = await super()._create_connection(req, traces, timeout)
            if on_connect is not None:
                await on_connect()
            return proto

    return _Connector(limit=concurrency, ttl_dns_cache=300)


class HttpxTransport(Transport):
    """httpx.AsyncClient (HTTP/1.1 keep-alive, connection limits = concurrency); per-read and total timeouts."""

    name = "httpx"

    def __init__(self, concurrency: int, timeout_s: float, on_connect: Optional[OnConnect] = None,
                 max_response_bytes: Optional[int] = None):
        import httpx

        self._httpx = httpx
        self._max_bytes = max_response_bytes
        self._timeout_s = timeout_s
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0)),
                                         limits=httpx.Limits(max_connections=concurrency,
                                                             max_keepalive_connections=concurrency))
        self._ext: dict[str, Any] = {}
        if on_connect is not None:
            async def trace(event: str, info: dict) -> None:
                if event == "connection.connect_tcp.complete":
                    await on_connect()

            self._ext = {"trace": trace}

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> HttpReply:
        """POST with httpx; a total deadline guards slow-drip bodies that reset the per-read timeout."""
        h = self._httpx
        try:
            async with asyncio.timeout(self._timeout_s + 1.0):
                req = self._client.build_request("POST", url, content=body, headers=headers, extensions=self._ext)
                r = await self._client.send(req, stream=True)
                try:
                    length = r.headers.get("content-length")
                    data = await read_bounded(r.aiter_bytes(), self._max_bytes, r.status_code,
                                              int(length) if length and length.isdigit() else None, lambda: None)
                finally:
                    await r.aclose()
        except h.ConnectTimeout as e:
            raise ConnectFailure(f"connect timeout ({type(e).__name__})") from None
        except (h.TimeoutException, TimeoutError) as e:
            raise ReadTimeout(type(e).__name__) from None
        except h.TransportError as e:  # ConnectError, ReadError, WriteError, RemoteProtocolError, ...
            raise ConnectFailure(f"{type(e).__name__}: {e}") from None
        except h.HTTPError as e:
            raise TransportError(f"{type(e).__name__}: {e}") from None
        return HttpReply(r.status_code, r.headers, data)

    async def aclose(self) -> None:
        """Close the client and its pool."""
        await self._client.aclose()
