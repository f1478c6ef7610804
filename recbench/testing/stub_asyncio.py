"""The stub server's asyncio engine: one event loop and httptools' parser instead of a thread per connection.

It serves exactly what the threads engine serves (the same StubServer decides every reply, counts and faults), with
about 30% less CPU (the 60,000-group stub run: 14-15 CPU-s against 20-23), so that a benchmark's stub takes less of
the cores it shares with the client.
`answer_fn` and `schedule` run on the loop: they must not block (a slow answer is the stub's `latency_s`).
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import traceback
from http import HTTPStatus
from typing import Any, Optional

import httptools


def _head(status: int, length: int, headers: dict[str, str], close: bool) -> bytes:
    """An HTTP/1.1 response head with a JSON content type and the body's length."""
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Content-Type: application/json",
             f"Content-Length: {length}", *(f"{k}: {v}" for k, v in headers.items())]
    lines += ["Connection: close"] if close else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Connection(asyncio.Protocol):
    """One client connection: parse requests, answer each in its own task, in the order they came."""

    def __init__(self, stub: Any, slots: Optional[asyncio.Semaphore], tasks: set, open_: set):
        self.stub, self.slots, self.tasks, self.open = stub, slots, tasks, open_
        self.parser = httptools.HttpRequestParser(self)
        self.transport: Optional[asyncio.Transport] = None
        self.previous: Optional[asyncio.Task] = None
        self.url, self.headers, self.body = b"", {}, []

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.open.add(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc) -> None:
        self.open.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_message_begin(self) -> None:
        self.url, self.headers, self.body = b"", {}, []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        request = (self.parser.get_method().decode(), self.url.decode("latin-1"), self.headers, b"".join(self.body),
                   not self.parser.should_keep_alive())
        task = asyncio.get_running_loop().create_task(self._respond(self.previous, *request))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        self.previous = task

    async def _respond(self, previous: Optional[asyncio.Task], method: str, path: str, headers: dict, raw: bytes,
                       close: bool) -> None:
        """Answer one request once the one before it on this connection is answered."""
        if previous is not None:
            await asyncio.wait([previous])
        control = self.stub.route(method, path)
        if control is not None:
            return self._send(control.status, control.body(), control.headers, close)
        self.stub.arrived(path)
        try:
            if self.slots is None:
                await self._chat(headers, raw, close)
            else:
                async with self.slots:
                    self.stub.serving_now(+1)
                    try:
                        await self._chat(headers, raw, close)
                    finally:
                        self.stub.serving_now(-1)
        except Exception:  # noqa: BLE001 - as the threads engine: the traceback on stderr, the connection closed
            traceback.print_exc()
            self.transport.close()
        finally:
            self.stub.left()

    async def _chat(self, headers: dict, raw: bytes, close: bool) -> None:
        """A chat request's reply, after its wait; a reset closes the connection unanswered."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send(400, b'{"error":{"message":"the body is not JSON","code":400}}', {}, True)
        reply = self.stub.reply_to(headers.get("authorization", ""), body)
        if reply.wait_s > 0:
            await asyncio.sleep(reply.wait_s)
        if reply.reset:
            self.transport.close()
            return
        self.stub.sent(reply)
        self._send(reply.status, reply.body(), reply.headers, close)

    def _send(self, status: int, payload: bytes, headers: dict[str, str], close: bool) -> None:
        if self.transport.is_closing():
            return
        self.transport.write(_head(status, len(payload), headers, close) + payload)
        if close:
            self.transport.close()


class AsyncioEngine:
    """Serves a StubServer on its already bound, listening socket from an event loop (a daemon thread or `run`)."""

    def __init__(self, stub: Any, sock: socket.socket):
        self.stub, self.sock = stub, sock
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.stopped: Optional[asyncio.Event] = None
        self.ready = threading.Event()
        self.thread: Optional[threading.Thread] = None

    async def serve(self) -> None:
        """Serve until `stop`; then close the socket, cancel the requests still waiting and close every connection."""
        self.loop, self.stopped, tasks, open_ = asyncio.get_running_loop(), asyncio.Event(), set(), set()
        slots = asyncio.Semaphore(self.stub.capacity) if self.stub.capacity else None
        server = await self.loop.create_server(lambda: _Connection(self.stub, slots, tasks, open_), sock=self.sock,
                                               backlog=1024)
        self.ready.set()
        try:
            await self.stopped.wait()
        finally:
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for transport in list(open_):
                transport.close()
            await asyncio.sleep(0)  # let the closes go out

    def run(self) -> None:
        """Serve in this thread until interrupted or stopped."""
        try:
            asyncio.run(self.serve())
        except KeyboardInterrupt:
            pass

    def start(self) -> None:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        self.ready.wait(timeout=10)

    def stop(self) -> None:
        """Stop serving (a stopped loop or one never started: just close the socket)."""
        if self.loop is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(self.stopped.set)
        if self.thread is not None:
            self.thread.join(timeout=10)
        self.sock.close()
