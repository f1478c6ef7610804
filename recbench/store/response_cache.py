"""SQLite response cache keyed by model identity + full request content; errors are never stored."""
from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any, Optional

from recbench.store.cache_keys import KeyMaker, _ascii_str, _canon_str, cache_key, messages_hash  # noqa: F401
from recbench.store.diskspace import DiskFull, disk_full, is_full, writing
from recbench.api.types import Request, Response

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


#: WAL pages between two automatic checkpoints (SQLite's default is 1000): a run writes one transaction per backend
#: pull, each touching a few random pages of the key index; checkpointing every 16,000 pages (64 MiB of WAL at most)
#: writes each such page to the database once instead of again and again, and fsyncs 16x less often
#: (benchmarks/bench_loop_records.py --sqlite). A killed process loses no committed row either way: the WAL is read
#: back on the next open; only an OS crash or power loss (synchronous=NORMAL) can lose the commits since the last
#: checkpoint, answers that are then asked again.
WAL_CHECKPOINT_PAGES = 16000


class CacheError(RuntimeError):
    """The response cache file cannot be used (corrupt, not a database)."""


#: the advice of a full-disk error under the cache
CACHE_FIX = ("point cache.path (or RECBENCH_CACHE_DIR) to a disk with room, or run with cache.enabled=false; finished "
             "examples are kept and the same command goes on")


def _number(v: Any) -> Optional[str]:
    """json.dumps of an int or a finite float (their reprs, as the encoder writes them); None for anything else."""
    t = type(v)
    if t is int or (t is float and math.isfinite(v)):
        return repr(v)
    return None


class ResponseCache:
    """A process- and thread-safe SQLite (WAL) store of successful responses, with hit/miss counters."""

    def __init__(self, path: str | Path, enabled: bool = True):
        self.path = Path(path)
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        # put_later rows not yet committed (flush): model, request, response, the messages' JSON when the caller has it
        self._pending: dict[str, tuple[str, Request, Response, Optional[str]]] = {}
        self._tails: dict[tuple, str] = {}  # request JSON after the messages, per distinct parameters (_request_json)
        if enabled:
            with writing(self.path.parent, "the cache folder", CACHE_FIX):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False, isolation_level=None)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute("PRAGMA busy_timeout=60000")
                self._conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
                self._conn.execute(SCHEMA)
                self._conn.execute("SELECT key FROM responses LIMIT 1").fetchall()
            except (sqlite3.Error, OSError) as e:
                self.close()
                raise self._failure(e, "is unreadable") from None

    def _failure(self, e: BaseException, what: str = "is damaged") -> Exception:
        """The one-line error for a failed cache operation: DiskFull when there is no room, else CacheError."""
        if is_full(e, self.path.parent):
            return disk_full(self.path, "the response cache", CACHE_FIX)
        return CacheError(f"response cache {self.path} {what} ({type(e).__name__}: {e}): move it aside "
                          f"(mv {self.path} {self.path}.bad) or run with cache.enabled=false; finished examples "
                          "are kept and the same command goes on")

    def get_many(self, keys: list[str]) -> dict[str, Response]:
        """Cached responses for the given keys (missing keys absent); counts hits and misses."""
        found: dict[str, Response] = {}
        if self._conn is not None and keys:
            uniq = []
            for k in dict.fromkeys(keys):
                row = self._pending.get(k)
                if row is None:
                    uniq.append(k)
                else:  # answered in this step, not committed yet: as a committed row reads back
                    found[k] = Response(**self._payload(row[2]), cached=True)
            with self._lock:
                for i in range(0, len(uniq), 500):
                    chunk = uniq[i : i + 500]
                    try:
                        rows = self._conn.execute(
                            f"SELECT key, response FROM responses WHERE key IN ({','.join('?' * len(chunk))})", chunk
                        ).fetchall()
                    except sqlite3.Error as e:
                        raise self._failure(e) from None
                    for k, payload in rows:
                        try:
                            d = json.loads(payload)
                            found[k] = Response(**d, cached=True)
                        except (ValueError, TypeError):  # a row this code did not write: a miss, asked again
                            continue
        self.hits += sum(1 for k in keys if k in found)
        self.misses += sum(1 for k in keys if k not in found)
        return found

    def put(self, key: str, model: str, request: Request, response: Response) -> int:
        """Store one successful response at once (an error is not stored); returns rows written."""
        return self.put_many([(key, model, request, response)])

    def put_later(self, key: str, model: str, request: Request, response: Response,
                  messages_json: Optional[str] = None) -> None:
        """Hold one successful response for the next `flush()` (get_many reads it already; an error is not held);
        `messages_json`, when given, is json.dumps(request.message_dicts()), made by the caller already."""
        if self._conn is not None and response.ok:
            self._pending[key] = (model, request, response, messages_json)

    def flush(self) -> int:
        """Commit the responses `put_later` holds, in one transaction; returns rows written."""
        if not self._pending:
            return 0
        n = self._write([(k, *row) for k, row in self._pending.items()])
        self._pending = {}
        return n

    def _request_json(self, req: Request, messages_json: Optional[str] = None) -> str:
        """json.dumps(req.content_dict()), the request column (plan mode looks rows up by this text): the text after
        the messages is built once per distinct sampling, constraint, adapter and logprobs; the messages' text is
        `messages_json` when given, else assembled as json.dumps writes a list of {"role", "content"} dicts."""
        pk = (req.sampling, req.constraint, req.adapter, req.logprobs)
        tail = self._tails.get(pk)
        if tail is None:
            d = req.content_dict()  # "messages" is its first key
            full = json.dumps(d)
            self._tails[pk] = full[len('{"messages": ') + len(json.dumps(d["messages"])):]
            return full
        if messages_json is not None:
            return '{"messages": ' + messages_json + tail
        pieces = ['{"messages": [']
        for r, c in req.messages:
            pieces += ('{"role": ', _ascii_str(r), ', "content": ', _ascii_str(c), "}, ")
        if req.messages:
            pieces[-1] = "}"
        pieces += ("]", tail)
        return "".join(pieces)

    @staticmethod
    def _payload(resp: Response) -> dict[str, Any]:
        """The stored fields of a response (the JSON of the response column)."""
        return {"text": resp.text, "finish_reason": resp.finish_reason, "prompt_tokens": resp.prompt_tokens,
                "completion_tokens": resp.completion_tokens, "latency_s": resp.latency_s, "logprobs": resp.logprobs}

    @classmethod
    def _payload_json(cls, resp: Response) -> str:
        """json.dumps(_payload(resp)), written out for the usual field types (str, int, finite float, no logprobs)."""
        pt, ct, lat = _number(resp.prompt_tokens), _number(resp.completion_tokens), _number(resp.latency_s)
        if (pt is None or ct is None or lat is None or resp.logprobs is not None or type(resp.text) is not str
                or type(resp.finish_reason) is not str):
            return json.dumps(cls._payload(resp))
        return ('{"text": ' + encode_basestring_ascii(resp.text) + ', "finish_reason": '
                + encode_basestring_ascii(resp.finish_reason) + ', "prompt_tokens": ' + pt + ', "completion_tokens": '
                + ct + ', "latency_s": ' + lat + ', "logprobs": null}')

    def put_many(self, items: list[tuple[str, str, Request, Response]]) -> int:
        """Store (key, model_name, request, response) rows, skipping errors; returns rows written."""
        return self._write([(*item, None) for item in items])

    def _write(self, items: list[tuple[str, str, Request, Response, Optional[str]]]) -> int:
        """put_many of (key, model_name, request, response, the messages' JSON or None) rows."""
        if self._conn is None:
            return 0
        rows = []
        for key, model, req, resp, messages in items:
            if not resp.ok:
                continue
            rows.append((key, model, self._request_json(req, messages), self._payload_json(resp), time.time()))
        if rows:
            with self._lock:
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                    self._conn.executemany("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?)", rows)
                    self._conn.execute("COMMIT")
                except sqlite3.Error as e:
                    if self._conn.in_transaction:
                        try:
                            self._conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    raise self._failure(e) from None
        return len(rows)

    def requests_by_prefix(self, prefixes: list[str]) -> dict[str, dict[str, Any]]:
        """{key prefix: the request content stored under the one key that starts with it} (prefixes as samples.jsonl
        records them); a prefix with no row, or more than one, is left out."""
        out: dict[str, dict[str, Any]] = {}
        if self._conn is None:
            return out
        with self._lock:
            for prefix in dict.fromkeys(prefixes):
                if not prefix:
                    continue
                try:
                    rows = self._conn.execute("SELECT request FROM responses WHERE key >= ? AND key < ? LIMIT 2",
                                              (prefix, prefix + "\uffff")).fetchall()
                except sqlite3.Error as e:
                    raise self._failure(e) from None
                if len(rows) == 1:
                    try:
                        out[prefix] = json.loads(rows[0][0])
                    except ValueError:
                        continue
        return out

    @staticmethod
    def answers_by_request(path: str | Path, model_name: str) -> dict[str, dict[str, Any]]:
        """Request-content JSON -> cached response payload for one model name, read-only ({} when absent)."""
        p = Path(str(path))
        if not p.exists():
            return {}
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=30)
        try:
            rows = con.execute("SELECT request, response FROM responses WHERE model = ?", (model_name,)).fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            con.close()
        return {req: json.loads(resp) for req, resp in rows}

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        with self._lock:
            try:
                return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            except sqlite3.Error as e:
                raise self._failure(e) from None

    def close(self) -> None:
        """Commit what put_later holds, then close the connection."""
        if self._conn is not None:
            try:
                self.flush()
            except (CacheError, DiskFull) as e:  # closing after an error: say what is lost, keep the first error
                log.warning("%d answer(s) not written to the response cache: %s", len(self._pending), e)
                self._pending = {}
            try:
                self._conn.close()
            except sqlite3.Error:  # closing a damaged or full database: nothing left to save
                pass
            self._conn = None
