"""Secrets (URL user info and query values; values of keys named like api_key, token, password, secret) kept out of
everything recbench writes or prints.

A base URL such as ``http://alice:pw@host:8000/v1?key=K`` is used as given for requests, but any text that
reaches a file, a folder name or the terminal shows ``http://***@host:8000/v1?key=***``; likewise
``+model.backend.api_key=sk-1`` shows as ``+model.backend.api_key=***`` and ``api_key: sk-1`` as ``api_key: ***``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
#: a URL in free text (YAML, JSON, an override string, an error message): scheme:// up to a space, quote or bracket,
#: or up to a comma that starts the next URL (a list of servers: "http://a/v1,http://u:pw@b/v1")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:(?!,\s*[A-Za-z][A-Za-z0-9+.-]*://)[^\s'\"<>`])+")


#: a key whose value is a secret: its last part is (or ends in _ or -) api_key, apikey, access_key, token, password,
#: passwd, secret (api_key_env, max_tokens are not)
_SECRET_KEY = r"(?:[\w.+~-]*[_.+~-])?(?:api[_-]?key|access[_-]?key|token|password|passwd|secret)"
#: KEY=VALUE (an override), KEY: VALUE (YAML), "KEY": "VALUE" (JSON): the value up to a space, quote, comma or bracket
_KEYED = re.compile(r"(?i)(?<![\w.+~-])(" + _SECRET_KEY + r")(['\"]?[ \t]*[=:][ \t]*['\"]?)([^\s'\",\]}]+)")


def secret_key(key: str) -> bool:
    """True for a config key whose value is a secret (api_key, model.backend.token, +db.password, ...)."""
    return re.fullmatch(r"(?i)" + _SECRET_KEY, key.strip()) is not None


def has_secret(url: str) -> bool:
    """True when the URL carries user info, a query or a fragment."""
    try:
        u = urlsplit(url)
    except ValueError:
        return False
    return "@" in u.netloc or bool(u.query) or bool(u.fragment)


def redact_url(url: str) -> str:
    """The URL with its user info and every query / fragment value masked: keys stay, values become ***."""
    try:
        u = urlsplit(url)
    except ValueError:  # e.g. an unbalanced [ in the host: show nothing after the scheme
        return url.split("://", 1)[0] + "://" + MASK
    netloc = u.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = "&".join(p.split("=", 1)[0] + "=" + MASK if "=" in p else MASK for p in u.query.split("&") if p)
    fragment = MASK if u.fragment else ""
    return urlunsplit((u.scheme, netloc, u.path, query, fragment))


def redact_text(text: str) -> str:
    """Every URL with a secret in `text` redacted (redact_url), every secret-named key's value masked; other text
    unchanged."""
    text = _KEYED.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)) if has_secret(m.group(0)) else m.group(0), text)


def redact_files(paths: Iterable[str | Path]) -> list[Path]:
    """Rewrite each existing text file whose content holds a URL secret (atomically); returns the files changed."""
    changed = []
    for p in map(Path, paths):
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        clean = redact_text(text)
        if clean != text:
            tmp = p.with_name(p.name + ".redact.tmp")
            try:
                tmp.write_text(clean, encoding="utf-8")
                os.replace(tmp, p)
            finally:
                tmp.unlink(missing_ok=True)
            changed.append(p)
    return changed
