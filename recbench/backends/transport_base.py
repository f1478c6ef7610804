"""What every transport of recbench/backends/transport.py shares: the three errors the backend's retry logic tells
apart, the answer, and the interface."""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping

OnConnect = Callable[[], Awaitable[None]]


class ConnectFailure(Exception):
    """No usable connection to the server (refused, reset, DNS failure, connect timeout)."""


class ReadTimeout(Exception):
    """The server took longer than the timeout to answer."""


class NotHttp(ConnectFailure):
    """The server answered with something that is not an HTTP status line (another protocol on that port, TLS on a
    plain-HTTP URL): `first` is the start of what it sent, as Python writes bytes."""

    def __init__(self, first: str):
        super().__init__(f"the server answered something that is not HTTP: {first}")
        self.first = first


class TransportError(Exception):
    """Any other client-side HTTP failure (bad URL, protocol misuse); not worth retrying."""


class ResponseTooLarge(TransportError):
    """The answer's body is larger than the transport's `max_response_bytes` (read no further: the connection is
    closed); `size` is what the server declared (Content-Length) or what had arrived when reading stopped."""

    def __init__(self, limit: int, status: int, size: int, declared: bool):
        self.how = "declares" if declared else "was still coming after"
        super().__init__(f"the answer (HTTP {status}) {self.how} {size:,} bytes, over the limit of {limit:,} bytes")
        self.limit, self.status, self.size = limit, status, size


def first_bytes(data: bytes, n: int = 40) -> str:
    """The start of an answer as Python writes bytes: its first line, at most n bytes of it ('...' when cut)."""
    line = data[:n].split(b"\n", 1)[0].rstrip(b"\r")
    return repr(line) + ("..." if len(line) < len(data) else "")


@dataclass
class HttpReply:
    """Status, case-insensitive headers and raw body of one HTTP answer."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport(abc.ABC):
    """One keep-alive connection pool of at most `concurrency` connections, used from one event loop."""

    name = "base"

    @abc.abstractmethod
    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> HttpReply:
        """POST body to url; raise ConnectFailure / ReadTimeout / TransportError on failure."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close every connection."""
