"""The OpenAI chat-completions wire format for the openai backend: the request body (sampling, logprobs, constraints in
the vLLM or OpenAI dialect), an answer parsed into a Response or a retryable failure, error texts, the API key."""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
from typing import Any, Callable, Optional

import orjson

from recbench.api.types import Request, Response
from recbench.backends.base import empty_answer
from recbench.backends.quirks import apply_quirks
from recbench.backends.transport import HttpReply
from recbench.store.redact import redact_url

log = logging.getLogger("recbench.backends.openai")

#: how constraints travel: "vllm" (the `structured_outputs` request field: choice, json, regex), "openai"
#: (standard `response_format` json_schema; choice/regex are not enforced, counted), "none" (never sent)
CONSTRAINT_MODES = ("vllm", "openai", "none")


class _Failure(Exception):
    """One failed attempt: retryable or not, with the HTTP status and Retry-After when there was one."""

    def __init__(self, message: str, *, retryable: bool, status: Optional[int] = None,
                 retry_after: Optional[float] = None, connection: bool = False):
        super().__init__(message)
        self.retryable, self.status, self.retry_after = retryable, status, retry_after
        self.connection = connection  # no HTTP answer at all (refused, reset, dropped): judged by the down rule


def build_payload(be: Any, req: Request) -> dict[str, Any]:
    """The JSON body of one chat completion; `be` is the OpenAIBackend (model, quirks, seed_param, extra_body,
    constraints; an unenforced constraint kind is counted in be.stats and warned about once)."""
    sp = req.sampling
    kw: dict[str, Any] = {
        "model": be.model if not req.adapter else req.adapter,  # vLLM serves LoRA adapters by name
        "messages": apply_quirks(req.message_dicts(), be.quirks),
        "temperature": sp.temperature,
        "top_p": sp.top_p,
        "max_tokens": sp.max_tokens,
        "n": 1,
    }
    if be.seed_param:
        kw["seed"] = sp.seed
    if sp.stop:
        kw["stop"] = list(sp.stop)
    if req.logprobs is not None:
        kw["logprobs"] = True
        kw["top_logprobs"] = req.logprobs
    body = dict(be.extra_body)
    c = req.constraint
    if c is not None and be.constraints != "none":
        if be.constraints == "vllm":
            so: dict[str, Any] = {}
            if c.kind == "choice":
                so["choice"] = list(c.choices)
            elif c.kind == "json":
                so["json"] = _schema(c.schema)
            elif c.kind == "regex":
                so["regex"] = c.pattern
            body["structured_outputs"] = so
        elif c.kind == "json":
            kw["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "answer", "schema": _schema(c.schema)}}
        else:
            be.stats[f"unenforced_{c.kind}"] += 1
            if c.kind not in be._warned:
                be._warned.add(c.kind)
                log.warning("openai backend (constraints=openai): %s constraints are not enforced by the server; "
                            "answers rely on the prompt and the parser", c.kind)
    return {**kw, **body}  # extra fields go at the top level of the JSON body (the SDK's extra_body)


def encode_payload(payload: dict[str, Any]) -> bytes:
    """The request body's bytes: UTF-8 JSON (orjson: a fraction of json.dumps' CPU on a long prompt; a NaN is sent
    as null, which no server reads as a number anyway)."""
    return orjson.dumps(payload)


@functools.lru_cache(maxsize=256)
def _schema(text: Optional[str]) -> dict[str, Any]:
    """A constraint's JSON schema as a dict, parsed once per distinct schema (the payload is encoded at once, never
    changed)."""
    return json.loads(text or "{}")


def _api_key(api_key_env: Optional[str], base_url: str) -> str:
    """The key from the environment variable api_key_env ("EMPTY" without one: local servers accept any key)."""
    if not api_key_env:
        return "EMPTY"  # never read from config files
    key = os.environ.get(api_key_env)
    if not key:
        raise RuntimeError(f"openai backend: environment variable {api_key_env} (model.backend.api_key_env) "
                           f"is not set; export the API key for {redact_url(base_url)} there")
    return key


#: answers that refuse the credentials (401/403: a wrong or missing key) or the model or path (404: a name the server
#: does not serve): a run of max_consecutive_failures of them stops the run like a dead server
REFUSED_STATUSES = frozenset({401, 403, 404})


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run fn in a helper thread and wait for it (for callers whose thread already runs an event loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e

    t = threading.Thread(target=target, name="recbench-openai")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _error_text(reply: HttpReply) -> str:
    """The server's error message from an error answer (JSON `error.message`, else the body's start)."""
    try:
        data = json.loads(reply.body)
        err = data.get("error", data) if isinstance(data, dict) else data
        msg = err.get("message", err) if isinstance(err, dict) else err
    except ValueError:
        msg = reply.body.decode("utf-8", "replace")
    return _short(str(msg))


def _parse(reply: HttpReply) -> Response:
    """A Response from a 200 answer's JSON body. A truncated or malformed body, a body without choices and an
    empty or null answer (base.empty_answer) are retryable failures: never a Response, so never cached."""
    try:
        data = orjson.loads(reply.body)
        choices = data["choices"]
        if not choices:
            raise IndexError("no choices in the response")
        ch = choices[0]
        text = ch["message"].get("content")
        finish = ch.get("finish_reason") or "stop"
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise _Failure(f"malformed response body: {type(e).__name__}: {_short(str(e))}", retryable=True,
                       status=200) from None
    problem = empty_answer(text, finish)
    if problem:
        raise _Failure(f"{problem} in a 200 answer", retryable=True, status=200)
    return Response(
        text=text or "",
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        logprobs=_logprobs(ch),
    )


def _short(s: str, n: int = 300) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n] + "..."


def _logprobs(choice: dict) -> Optional[list[dict[str, Any]]]:
    """[{token, logprob, top: {token: logprob}}] per generated token, the same shape the vllm backend returns."""
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return None
    return [{"token": t["token"], "logprob": t["logprob"],
             "top": {x["token"]: x["logprob"] for x in (t.get("top_logprobs") or [])}} for t in content]
