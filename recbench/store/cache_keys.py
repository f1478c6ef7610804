"""Cache keys and prompt hashes: the canonical JSON of a request with its model identity (KeyMaker, cache_key), and
the hash of its messages that prompts.jsonl keeps (messages_hash); the response cache (store/response_cache.py) looks
answers up by these keys, and every existing cache file was written with them."""
from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, Optional

from recbench.api.types import Request


def messages_hash(messages: list[dict[str, Any]]) -> str:
    """The prompts.jsonl hash of message dicts: the same value as KeyMaker.prompt_hash of their request."""
    text = "[" + ", ".join('{"content": ' + _canon_str(m["content"]) + ', "role": ' + _canon_str(m["role"]) + "}"
                           for m in messages) + "]"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def cache_key(identity: dict[str, Any], request: Request) -> str:
    """Key = hash(backend kind, model name + file/revision hash, chat template, adapter, messages, sampling, constraint)."""
    return KeyMaker(identity, prompts=False).key(request)


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


def _canon_str(s: Any) -> str:
    """json.dumps(s, ensure_ascii=False): a str through the encoder's own function, anything else through dumps."""
    return encode_basestring(s) if type(s) is str else json.dumps(s, ensure_ascii=False)


def _ascii_str(s: Any) -> str:
    """json.dumps(s): a str through the encoder's own function, anything else through dumps."""
    return encode_basestring_ascii(s) if type(s) is str else json.dumps(s)


class KeyMaker:
    """Cache keys and prompt hashes for one model identity, each computed once per request from canonical JSON.

    The key is sha256 of the canonical JSON of {"model": identity, "request": content} (plus "example_id" for
    replay backends whose identity sets keyed_by_example). The canonical text is assembled from parts, each
    serialized once: the identity per KeyMaker, sampling/constraint/adapter/logprobs per distinct value (with the
    hash of the text before the messages, copied per request), the messages per request; the messages' UTF-8 text is
    hashed for the prompt hash of prompts.jsonl at the same time (`prompts=True`), and their parts are reused for its
    line. The result equals sha256_json of the payload dict (tests/core/test_core_keymaker.py checks it)."""

    def __init__(self, identity: dict[str, Any], prompts: bool = True):
        self.identity = identity
        self.model_name = str(identity.get("name", identity.get("kind")))
        self._by_example = bool(identity.get("keyed_by_example"))
        self._prompts = prompts  # hash each request's messages for prompts.jsonl when its key is made
        self._model_part = '"model": ' + _canon(identity) + ', "request": '
        self._hashes: dict[tuple, str] = {}  # messages -> prompt hash
        # (sampling, constraint, adapter, logprobs) -> text around the messages, the hash of "{" + model + the text
        # before them, the UTF-8 text after them + "}"
        self._params: dict[tuple, tuple[str, str, Any, bytes]] = {}
        # messages -> (each message's (content, role) JSON, their prompt hash or None), from key() until prompt_key()
        # takes them for prompt_line()
        self._msg_json: dict[tuple, tuple[list[tuple[str, str]], Optional[str]]] = {}
        self._last: tuple[tuple, list[tuple[str, str]]] = ((), [])  # the messages prompt_key() took last, encoded
        self._body: tuple[Optional[tuple], str] = (None, "")  # the messages request_messages_json() saw last, their text

    def _around_messages(self, request: Request) -> tuple[str, str, Any, bytes]:
        """Canonical JSON of the request content before and after the messages (keys sorted: adapter,
        constraint, logprobs, messages, sampling), the hash of the key text before the messages and the UTF-8 text
        after them, cached per distinct parameter set."""
        pk = (request.sampling, request.constraint, request.adapter, request.logprobs)
        got = self._params.get(pk)
        if got is None:
            c = request.constraint.to_dict() if request.constraint else None
            head = ('{"adapter": ' + _canon(request.adapter) + ', "constraint": ' + _canon(c) + ', "logprobs": '
                    + _canon(request.logprobs) + ', "messages": ')
            tail = ', "sampling": ' + _canon(request.sampling.to_dict()) + "}"
            got = self._params[pk] = (head, tail, hashlib.sha256(("{" + self._model_part + head).encode()),
                                      (tail + "}").encode())
        return got

    def _encoded(self, request: Request) -> list[tuple[str, str]]:
        """Each message's content and role as JSON strings (non-ASCII kept), from key() or encoded now."""
        kept = self._msg_json.get(request.messages)
        if kept is None:
            return [(_canon_str(c), _canon_str(r)) for r, c in request.messages]
        return kept[0]

    @staticmethod
    def _joined(parts: list[tuple[str, str]]) -> str:
        pieces = ["["]
        for c, r in parts:
            pieces += ('{"content": ', c, ', "role": ', r, "}, ")
        if len(pieces) > 1:
            pieces[-1] = "}"
        pieces.append("]")
        return "".join(pieces)

    def messages_json(self, request: Request) -> str:
        """Canonical JSON of the request's message dicts (== json of message_dicts() with sorted keys)."""
        return self._joined(self._encoded(request))

    def key(self, request: Request) -> str:
        """The cache key of a request (equal to sha256_json of the payload dict)."""
        head, tail, before, after = self._around_messages(request)
        parts = self._encoded(request)
        messages = self._joined(parts).encode()
        if request.messages not in self._hashes:  # kept for prompt_key (prompts.jsonl), which takes it once
            ph = hashlib.sha256(messages).hexdigest()[:20] if self._prompts else None
            self._msg_json[request.messages] = (parts, ph)
        if self._by_example:  # replay backends (predictions): the answer depends on the example id
            text = '{"example_id": ' + _canon(request.example_id) + ", " + self._model_part + head
            return hashlib.sha256(text.encode() + messages + after).hexdigest()
        h = before.copy()
        h.update(messages)
        h.update(after)
        return h.hexdigest()

    def prompt_key(self, request: Request) -> str:
        """The hash of the request's messages as stored in prompts.jsonl, memoized per distinct prompt."""
        got = self._hashes.get(request.messages)
        if got is None:
            parts, got = self._msg_json.pop(request.messages, None) or (self._encoded(request), None)
            self._last = (request.messages, parts)
            if got is None:
                got = hashlib.sha256(self._joined(parts).encode()).hexdigest()[:20]
            self._hashes[request.messages] = got
        return got

    def prompt_hash(self, request: Request) -> tuple[str, list[dict[str, str]]]:
        """(hash of the messages as stored in prompts.jsonl, the message dicts)."""
        return self.prompt_key(request), request.message_dicts()

    def request_messages_json(self, request: Request) -> Optional[str]:
        """json.dumps(request.message_dicts()) (the response cache's request column) from the messages' JSON that
        key() made, while prompt_key() has not taken it yet and when it is ASCII without DEL (then the same text as
        with ensure_ascii); None otherwise. prompt_line() reuses the text."""
        kept = self._msg_json.get(request.messages)
        if kept is None:
            return None
        body = self._role_first(kept[0])
        self._body = (request.messages, body)
        return "[" + body + "]" if body.isascii() and "\x7f" not in body else None  # DEL: escaped by ensure_ascii

    @staticmethod
    def _role_first(parts: list[tuple[str, str]]) -> str:
        pieces = []
        for c, r in parts:
            pieces += ('{"role": ', r, ', "content": ', c, "}, ")
        if pieces:
            pieces[-1] = "}"
        return "".join(pieces)

    def prompt_line(self, request: Request, prompt_hash: str) -> str:
        """The prompts.jsonl line of a request's prompt, json.dumps({"key": prompt_hash, "messages": message dicts},
        ensure_ascii=False) as text, from the messages' JSON that key() made (when prompt_key() took them last)."""
        messages, body = self._body
        if messages is not request.messages and messages != request.messages:
            messages, parts = self._last
            body = self._role_first(parts if messages == request.messages else self._encoded(request))
        return '{"key": ' + _canon_str(prompt_hash) + ', "messages": [' + body + "]}"
