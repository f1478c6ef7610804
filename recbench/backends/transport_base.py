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


class TransportError(Exception):
    """Any other client-side HTTP failure (bad URL, protocol misuse); not worth retrying."""


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
