"""SQLite response cache keyed by model identity + full request content; errors are never stored."""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional

from recbench.types import Request, Response, sha256_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def cache_key(identity: dict[str, Any], request: Request) -> str:
    """Key = hash(backend kind, model name + file/revision hash, chat template, adapter, messages, sampling, constraint)."""
    payload = {"model": identity, "request": request.content_dict()}
    if identity.get("keyed_by_example"):  # replay backends (predictions): the answer depends on the example id
        payload["example_id"] = request.example_id
    return sha256_json(payload)


class ResponseCache:
    """A process- and thread-safe SQLite (WAL) store of successful responses, with hit/miss counters."""

    def __init__(self, path: str | Path, enabled: bool = True):
        self.path = Path(path)
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=60000")
            self._conn.execute(SCHEMA)

    def get_many(self, keys: list[str]) -> dict[str, Response]:
        """Cached responses for the given keys (missing keys absent); counts hits and misses."""
        found: dict[str, Response] = {}
        if self._conn is not None and keys:
            uniq = list(dict.fromkeys(keys))
            with self._lock:
                for i in range(0, len(uniq), 500):
                    chunk = uniq[i : i + 500]
                    rows = self._conn.execute(
                        f"SELECT key, response FROM responses WHERE key IN ({','.join('?' * len(chunk))})", chunk
                    ).fetchall()
                    for k, payload in rows:
                        d = json.loads(payload)
                        found[k] = Response(**d, cached=True)
        self.hits += sum(1 for k in keys if k in found)
        self.misses += sum(1 for k in keys if k not in found)
        return found

    def put_many(self, items: list[tuple[str, str, Request, Response]]) -> int:
        """Store (key, model_name, request, response) rows, skipping errors; returns rows written."""
        if self._conn is None:
            return 0
        rows = []
        for key, model, req, resp in items:
            if not resp.ok:
                continue
            payload = {
                "text": resp.text,
                "finish_reason": resp.finish_reason,
                "prompt_tokens": resp.prompt_tokens,
                "completion_tokens": resp.completion_tokens,
                "latency_s": resp.latency_s,
                "logprobs": resp.logprobs,
            }
            rows.append((key, model, json.dumps(req.content_dict()), json.dumps(payload), time.time()))
        if rows:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?)", rows)
                self._conn.execute("COMMIT")
        return len(rows)

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
