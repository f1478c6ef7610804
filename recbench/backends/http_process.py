"""The openai backend's HTTP side in a second process (`model.backend.http_process=true`), so that building prompts,
scoring and writing (the loop's process) overlap with sending requests and reading answers (this child) on two
cores.

The child is a fresh interpreter (multiprocessing's spawn: it holds the backend and its HTTP client only, not the
examples) started when a stream starts: it builds the same backend from the same arguments and runs its usual
stream (the window of `concurrency` requests in flight, retries, servers and their down rule). The loop's process
sends it requests in batches through a pipe, keeping at most `window` requests sent and unanswered (in flight in the
child or queued there), and receives the answers in batches, one per step of the child's event loop. The child's
counters come back when the stream ends; an error in the child (every server down, a server that serves another
model) is raised in the loop's process. The openai backend's window is its `concurrency`: killed, the loop's process
loses at most the answers of the requests sent and not yet written, as in one process; the child stops at its next
write to the closed pipe. Ctrl-C stops both, as in one process.
"""
from __future__ import annotations

import multiprocessing
import pickle
from collections import deque
from typing import Any, Callable

from recbench.api.types import Request, Response

#: counters of OpenAIBackend.stats that hold a maximum, not a count (the child's are merged by max)
MAX_STATS = ("max_consecutive", "max_silence_s")


def stream_in_child(be: Any, next_requests: Callable[[int], list[Request]],
                    on_response: Callable[[Request, Response], None], window: int) -> None:
    """OpenAIBackend.stream with its HTTP side in a child process; at most `window` requests sent and unanswered."""
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    args = {**be._init_args, "http_process": False}
    proc = ctx.Process(target=_child, args=(type(be), args, there), daemon=True, name="recbench-http")
    proc.start()
    there.close()
    sent: dict[int, Request] = {}
    seq = 0
    try:
        pull = True
        while True:
            room = window - len(sent)
            if pull and room > 0:
                batch = next_requests(room)
                if batch:
                    items = []
                    for req in batch:
                        seq += 1
                        sent[seq] = req
                        items.append((seq, req))
                    here.send(("requests", items))
                elif not sent:
                    here.send(("end", None))
                    break
                pull = len(batch) >= room
                continue
            kind, payload = _receive(here, proc)
            if kind != "answers":
                raise RuntimeError(f"openai backend: the HTTP process sent {kind!r} before its answers were in")
            for s, resp in payload:
                on_response(sent.pop(s), resp)
            pull = True
        kind, payload = _receive(here, proc)
        if kind != "done":
            raise RuntimeError(f"openai backend: the HTTP process ended with {kind!r}")
        _absorb(be, payload)
        proc.join(timeout=30)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=10)
        here.close()


def _receive(conn: Any, proc: Any) -> tuple[str, Any]:
    """The child's next message; its error raised here; a child gone without a word is a RuntimeError."""
    try:
        kind, payload = conn.recv()
    except EOFError:
        proc.join(timeout=10)
        raise RuntimeError(f"openai backend: the HTTP process ended unexpectedly (exit code {proc.exitcode})") from None
    if kind == "error":
        raise payload
    return kind, payload


def _absorb(be: Any, state: dict[str, Any]) -> None:
    """The child's counters added to the backend's own (maxima by max)."""
    for k, v in state["stats"].items():
        be.stats[k] = max(be.stats.get(k, 0), v) if k in MAX_STATS else be.stats.get(k, 0) + v
    for ep, answered in zip(be._endpoints, state["answered"]):
        ep.answered += answered


def _child(cls: type, args: dict[str, Any], conn: Any) -> None:
    """The child: the backend (class `cls`, built from `args`) streaming what the pipe brings; answers, then the
    counters (or the error) back."""
    queue: deque[tuple[int, Request]] = deque()
    ids: dict[int, int] = {}  # id(request) -> its sequence number in the parent
    out: list[tuple[int, Response]] = []
    ended = False

    def next_requests(k: int) -> list[Request]:
        nonlocal ended
        if out:  # the answers of this step of the event loop, in one message
            conn.send(("answers", out[:]))
            out.clear()
        while not ended and (conn.poll() or (not queue and not ids)):  # wait only when nothing is in flight
            kind, payload = conn.recv()
            if kind == "end":
                ended = True
            else:
                queue.extend(payload)
        batch = [queue.popleft() for _ in range(min(k, len(queue)))]
        for s, req in batch:
            ids[id(req)] = s
        return [req for _, req in batch]

    def on_response(req: Request, resp: Response) -> None:
        out.append((ids.pop(id(req)), resp))

    be = None
    try:
        be = cls(**args)
        be._run(next_requests, on_response)
        conn.send(("done", {"stats": dict(be.stats), "answered": [ep.answered for ep in be._endpoints]}))
    except BaseException as e:  # noqa: BLE001 - every error goes to the parent, which raises it
        _send_error(conn, e)
    finally:
        if be is not None:
            be.close()
        conn.close()


def _send_error(conn: Any, e: BaseException) -> None:
    """The child's error to the parent (as its text where it does not pickle); nothing when the parent is gone."""
    try:
        pickle.dumps(e)
    except Exception:  # noqa: BLE001 - any pickling failure
        e = RuntimeError(f"{type(e).__name__}: {e}")
    try:
        conn.send(("error", e))
    except OSError:
        pass
