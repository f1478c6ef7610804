"""The servers of an OpenAI-compatible backend: a base URL list split and checked, each server's address, headers
and health (the flaky-vs-down rule is kept per server), what it serves (/v1/models), and the server part of the
cache identity (hosted APIs by host; a self-run server is identified by the model it serves, not its URL)."""
from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from recbench.backends.transport import Transport
from recbench.store.redact import redact_url

#: hosts of hosted APIs (a host matches itself and its subdomains). Their model names are globally unique, so
#: the cache identity keeps only scheme+host+path; any other server's identity includes its full base URL.
HOSTED_API_HOSTS = (
    "api.openai.com", "openai.azure.com", "api.anthropic.com", "generativelanguage.googleapis.com",
    "aiplatform.googleapis.com", "api.deepseek.com", "api.together.xyz", "api.together.ai", "api.mistral.ai",
    "api.groq.com", "openrouter.ai", "api.lingyiwanwu.com", "api.01.ai", "api.fireworks.ai", "api.perplexity.ai",
    "api.x.ai", "api.cohere.com", "api.cohere.ai", "dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com",
    "api.moonshot.cn", "api.moonshot.ai", "open.bigmodel.cn", "api.deepinfra.com", "models.inference.ai.azure.com",
    "models.github.ai", "router.huggingface.co", "api-inference.huggingface.co", "api.cerebras.ai",
    "api.sambanova.ai", "api.hyperbolic.xyz", "api.novita.ai", "api.siliconflow.cn", "ark.cn-beijing.volces.com",
)


def is_hosted(base_url: str) -> bool:
    """True when base_url points at a well-known hosted API (HOSTED_API_HOSTS), not a self-run server."""
    host = (urlsplit(base_url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in HOSTED_API_HOSTS)


def server_identity(base_url: str) -> str:
    """The server part of the cache identity: scheme://host/path for hosted APIs, scheme://host:port/path otherwise.

    Never the user-info or query of the URL (they may hold credentials).
    """
    u = urlsplit(base_url.strip())
    scheme, host, path = u.scheme.lower(), (u.hostname or "").lower(), u.path.rstrip("/")
    if is_hosted(base_url):
        return f"{scheme}://{host}{path}"
    port = u.port or {"http": 80, "https": 443}.get(scheme, 0)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}{path}"


#: a comma that starts another URL (scheme://): where a comma-separated base_url is split (a comma inside one URL's
#: query stays)
_NEXT_URL = re.compile(r"\s*,\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def split_base_urls(base_url: Any = None) -> list[str]:
    """The endpoints model.backend.base_url names: a list, or one string of comma-separated URLs (the environment
    override); None = $OPENAI_BASE_URL, else the hosted OpenAI API. ValueError naming the key for an empty list or a
    URL given twice."""
    if base_url is None or (isinstance(base_url, str) and not base_url.strip()):
        base_url = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    items = [base_url] if isinstance(base_url, str) else list(base_url)
    urls = [u.rstrip("/") for item in items for u in _NEXT_URL.split(str(item).strip()) if u.strip()]
    if not urls:
        raise ValueError("model.backend.base_url is an empty list: give one URL or several, e.g. "
                         "[http://node1:8000/v1,http://node2:8000/v1]")
    twice = sorted({redact_url(u) for u in urls if urls.count(u) > 1})
    if twice:
        raise ValueError(f"model.backend.base_url names {', '.join(twice)} more than once: list each server once")
    return urls


class Endpoint:
    """One server of the backend: where requests go, with which headers, and its health (the flaky-vs-down rule is
    kept per endpoint)."""

    def __init__(self, base_url: str, key: str):
        self.base_url = base_url
        u = split_url(base_url)
        auth = f"Bearer {key}"
        if u.username is not None:  # http://user:password@host/v1: HTTP basic auth, as curl and browsers do
            auth = "Basic " + base64.b64encode(f"{unquote(u.username)}:{unquote(u.password or '')}".encode()).decode()
        # kept on the instance only: never logged, recorded, cached or put in identity(); scrubbed from error texts
        self.secrets = [s for s in [key, unquote(u.password or ""), *(v for _, v in parse_qsl(u.query))]
                        if s and s != "EMPTY" and len(s) >= 4]
        self.headers = {"Authorization": auth, "Content-Type": "application/json", "Accept": "application/json"}
        host = u.netloc.rsplit("@", 1)[-1]  # the request URL: path + /chat/completions, the query kept after it
        self.url = urlunsplit((u.scheme, host, u.path.rstrip("/") + "/chat/completions", u.query, ""))
        self.models_url = urlunsplit((u.scheme, host, u.path.rstrip("/") + "/models", u.query, ""))
        self.public = redact_url(base_url)  # what messages and records show (user info, query masked)
        self.client: Optional[Transport] = None
        self.alive = False  # a connection or an HTTP answer was seen since the last connection failure
        self.pending = True  # no connection made or failed yet: its first attempt is on its way
        self.probing = False  # one attempt is testing this server while it is not known to be up
        self.consecutive = 0  # connection failures since the last HTTP answer
        self.refused = 0  # 401/403/404 answers since the last other HTTP answer
        self.errors_5xx = 0  # 5xx answers since the last 200: at max_consecutive_failures it is drained
        self.down = False  # the down rule held at its last connection failure (cleared by any HTTP answer)
        self.last_answer = time.monotonic()  # of the last HTTP answer (any status), or of the stream's start
        self.last_error = ""
        self.next_probe = 0.0  # a drained endpoint takes one request as a probe from this time on
        self.failed_probes = 0  # probes in a row that found it still failing (doubles the wait to the next)
        self.in_flight = 0
        self.answered = 0


def served_models(ep: Endpoint, timeout_s: float) -> Optional[list[str]]:
    """The model ids GET <endpoint>/models lists, or None when it gives no such list (down, no route, refused)."""
    req = urllib.request.Request(ep.models_url, headers={k: v for k, v in ep.headers.items() if k != "Content-Type"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            data = json.loads(r.read())
        return [str(m["id"]) for m in data["data"]]
    except (OSError, ValueError, KeyError, TypeError):  # URLError/HTTPError are OSErrors; a body of another shape
        return None


def check_served(eps: list[Endpoint], model: str, timeout_s: float) -> dict[str, list[str]]:
    """Ask every endpoint's /models at once; ConfigError (one line) naming the first that answers without listing
    `model`, what it serves, and which endpoints do serve it. Returns {endpoint (masked): ids} of those that
    answered and serve it."""
    from recbench.api.errors import ConfigError

    with ThreadPoolExecutor(max_workers=len(eps)) as pool:
        listed = dict(zip((ep.public for ep in eps), pool.map(lambda e: served_models(e, timeout_s), eps)))
    good = [u for u, ids in listed.items() if ids is not None and model in ids]
    for url, ids in listed.items():
        if ids is not None and model not in ids:
            serves = ", ".join(f"'{i}'" for i in ids) or "no model"
            others = f"; {', '.join(good)} serve{'s' if len(good) == 1 else ''} it" if good else ""
            raise ConfigError(f"model.backend.base_url: {url} serves {serves}, not '{model}' (model.backend.model)"
                              f"{others}: every server in the list must serve the same model; fix the list or the "
                              "server's --served-model-name")
    return {u: ids for u, ids in listed.items() if ids is not None}


def split_url(url: str):
    """urlsplit(url), or a ValueError naming the key when it is not an http(s) URL with a host."""
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ValueError(f"model.backend.base_url {redact_url(url)!r} is not a valid URL ({e})") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"model.backend.base_url {redact_url(url)!r} is not an http(s) URL with a host, "
                         "e.g. http://127.0.0.1:8000/v1")
    return u
