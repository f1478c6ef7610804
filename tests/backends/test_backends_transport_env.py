"""The aiohttp transport honours the environment's proxy and netrc login as aiohttp's trust_env does, reading them
once per server rather than in two worker-thread hops per request."""
from __future__ import annotations

import asyncio
import json

import pytest

from recbench.backends.transport import AiohttpTransport
from recbench.testing.openai_stub import StubServer

pytest.importorskip("aiohttp")
pytestmark = pytest.mark.fast
BODY = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _post(url: str, times: int = 1) -> list[int]:
    async def go() -> list[int]:
        t = AiohttpTransport(4, 10.0)
        try:
            return [(await t.post(url, BODY, {"Content-Type": "application/json"})).status for _ in range(times)]
        finally:
            await t.aclose()

    return asyncio.run(go())


def _env(url: str, same_server: str) -> list:
    async def go() -> list:
        t = AiohttpTransport(1, 1.0)
        try:
            first = t._from_env(url)
            return [first, t._from_env(same_server) is first]
        finally:
            await t.aclose()

    return asyncio.run(go())


def test_netrc_login_is_sent_to_its_server(tmp_path, monkeypatch):
    for v in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(v, raising=False)
    rc = tmp_path / "netrc"
    rc.write_text("machine 127.0.0.1 login alice password s3cret\n")
    monkeypatch.setenv("NETRC", str(rc))
    with StubServer() as stub:
        assert _post(f"{stub.base_url}/chat/completions", times=3) == [200, 200, 200]
        assert stub.auth_seen == {"Basic YWxpY2U6czNjcmV0"}  # base64("alice:s3cret")
    assert (_env("http://127.0.0.1:1/v1/chat/completions", "http://127.0.0.1:1/v1/models")) == \
        [{"login": "Basic YWxpY2U6czNjcmV0"}, True]  # looked up once per server


def test_requests_go_through_the_environment_proxy_unless_no_proxy_names_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    with StubServer() as proxy:
        monkeypatch.setenv("http_proxy", proxy.base_url.removesuffix("/v1"))
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        # the proxy receives the request with the target's absolute URL (a stub answers any chat path)
        assert _post("http://127.0.0.9:9/v1/chat/completions") == [200]
        assert proxy.received == 1
        monkeypatch.setenv("no_proxy", "127.0.0.9")
        assert (_env("http://127.0.0.9:9/v1/chat/completions", "http://127.0.0.9:9/v1/x"))[0] == {}
