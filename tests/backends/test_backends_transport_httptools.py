"""The httptools transport (recbench/backends/transport_httptools.py) on answers the stub server never gives: a body
that runs until the connection closes, a chunked body, an answer that is not HTTP, no answer in time, a header with a
line break; and which transport `auto` takes with a proxy or a netrc login in the environment."""
from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("httptools")

from recbench.backends.transport import ConnectFailure, ReadTimeout, TransportError, available  # noqa: E402
from recbench.backends.transport_httptools import HttptoolsTransport  # noqa: E402

pytestmark = pytest.mark.fast
BODY = b'{"model": "stub", "messages": []}'
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer k"}


def _serve(answers: list[bytes], post: "callable") -> tuple[list[bytes], list]:
    """Run post(transport, url) against a server that answers each request with the next of `answers` (then closes
    the connection when the answer says Connection: close); returns (the requests it read, post's result)."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            head = await reader.readuntil(b"\r\n\r\n")
            n = int([ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")][0].split(b":")[1])
            seen.append(head + await reader.readexactly(n))
            answer = answers.pop(0)
            if answer == b"SILENT":
                try:
                    await asyncio.sleep(5)
                except asyncio.CancelledError:  # the test is over
                    pass
                return
            writer.write(answer)
            await writer.drain()
            if b"connection: close" in answer.lower() or not answer.startswith(b"HTTP/1.1"):
                break
        writer.close()

    async def main() -> list:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
        t = HttptoolsTransport(4, 0.5)
        try:
            return await post(t, url)
        finally:
            await t.aclose()
            server.close()

    return seen, asyncio.run(main())


async def _results(t: HttptoolsTransport, url: str, n: int) -> list:
    out = []
    for _ in range(n):
        try:
            r = await t.post(url, BODY, HEADERS)
            out.append((r.status, r.headers.get("X-Tag"), r.body))
        except (ConnectFailure, ReadTimeout, TransportError) as e:
            out.append(type(e).__name__)
    return out


def test_keep_alive_length_chunked_and_close_delimited_bodies():
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Tag: a\r\n\r\n{}",
               b"HTTP/1.1 429 Too Many\r\nTransfer-Encoding: chunked\r\nx-tag: b\r\n\r\n3\r\n{\"a\r\n3\r\n\":1\r\n1\r\n}\r\n0\r\n\r\n",
               b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"until\": \"close\"}"]
    seen, got = _serve(answers, lambda t, url: _results(t, url, 3))
    assert got == [(200, "a", b"{}"), (429, "b", b'{"a":1}'), (200, None, b'{"until": "close"}')]
    assert len(seen) == 3 and all(s.endswith(BODY) for s in seen)
    assert seen[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nAuthorization: Bearer k\r\n" in seen[0] and b"\r\nContent-Length: %d\r\n" % len(BODY) in seen[0]


def test_not_http_a_cut_answer_and_no_answer_in_time_then_a_new_connection_works():
    answers = [b"SMTP ready\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n{\"a\"",
               b"SILENT",
               b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"]
    _, got = _serve(answers, lambda t, url: _results(t, url, 4))
    assert got == ["NotHttp", "ConnectFailure", "ReadTimeout", (200, None, b"{}")]  # NotHttp: a ConnectFailure


def test_a_header_with_a_line_break_and_a_url_that_is_not_http_are_refused():
    async def go() -> list:
        t = HttptoolsTransport(1, 1.0)
        out = []
        for url, headers in (("http://127.0.0.1:9/v1", {"Authorization": "Bearer k\r\nX: y"}), ("ftp://h/v1", {})):
            with pytest.raises(TransportError) as e:
                await t.post(url, BODY, headers)
            out.append(str(e.value))
        await t.aclose()
        return out

    got = asyncio.run(go())
    assert "line break" in got[0] and "not an http(s) URL" in got[1]


def test_auto_takes_httptools_unless_a_proxy_or_netrc_login_applies(monkeypatch, tmp_path):
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
                "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    plain = ["http://gpu1:8000/v1", "https://api.example.org/v1"]
    assert available("auto", plain) == "httptools" and available("httptools") == "httptools"
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    assert available("auto", plain) == "aiohttp"  # gpu1 goes through the proxy
    monkeypatch.setenv("no_proxy", "gpu1")
    assert available("auto", plain) == "httptools"
    monkeypatch.delenv("http_proxy")
    (tmp_path / "netrc").write_text("machine api.example.org login u password p\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert available("auto", plain) == "aiohttp" and available("auto", plain[:1]) == "httptools"
    with pytest.raises(ValueError, match="transport must be one of .*httptools"):
        available("h11")
