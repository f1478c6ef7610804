"""The run's progress: answered model requests of their total, finished examples beside them, the work inside the
batch being decoded (an in-process engine's steps and tokens/s), an ETA from the measured decoding rate, and the one
line that says which model was started, how long that took and with how many threads.

The total of requests is exact when every example's requests are known up front: a single-round method (plan mode's
rule, `Method.asks_one_round`) whose examples are all in progress at once. Otherwise (multi-round methods,
`run.chunk_size`) it is the requests known so far, shown with a '+', and it grows as later rounds are asked.

On a terminal the line is redrawn in place (at most 5 times a second while a batch decodes); in a log file each state
is a whole line, written when answers land and otherwise every LOG_EVERY_S seconds, without carriage returns.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Optional

from tqdm import tqdm

from recbench.backends.decoding import DecodeBatch, listening
from recbench.run.progress_eta import BatchHistory, batch_eta, request_eta

BAR_FORMAT = ("{desc}: requests {n_fmt}/{total_fmt}{more} | examples {examples} |{bar}| {work}"
              "[{elapsed}<{eta}, {speed}]")
#: seconds between lines in a log file while nothing else happens (a decoding batch, a slow server)
LOG_EVERY_S = 5.0
#: seconds between redraws on a terminal while a batch decodes
TTY_EVERY_S = 0.2


class _Lines:
    """A file for tqdm that writes each drawn state as one whole line (a log file gets no carriage returns)."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, s: str) -> None:
        """One state per line; tqdm's bare clears and line ends are dropped."""
        line = s.replace("\r", "").rstrip()
        if line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        """Flush the underlying stream."""
        self.stream.flush()


class _Bar(tqdm):
    """tqdm with the extra fields of BAR_FORMAT, read from the RequestProgress that owns it."""

    def __init__(self, *args: Any, owner: "RequestProgress", **kwargs: Any):
        self.owner = owner  # set before tqdm draws the first line
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self) -> dict[str, Any]:
        """tqdm's fields plus examples, more, work, eta and speed."""
        d = super().format_dict
        return {**d, **self.owner.fields(d["n"], d["total"], d["elapsed"])}


class RequestProgress:
    """Counts answered requests (the bar) and finished examples (beside it), and shows the batch an in-process engine
    is decoding; the bar appears when the first request goes to the model, so a run answered from the cache, or by
    a model-free method, shows none."""

    def __init__(self, desc: str, examples: int, exact: bool, enabled: bool = True):
        self.desc, self.examples_total, self.exact, self.enabled = desc, examples, exact, enabled
        self.examples_done = 0
        self.answered = 0
        self.total = 0
        self.bar: Optional[_Bar] = None
        self.batches = BatchHistory()  # batches the engine finished
        self.batch: Optional[DecodeBatch] = None  # the batch being decoded
        self._shown = 0  # answers the last drawn line counts
        self._drawn_at = 0.0  # when the line was last drawn (bar clock)
        self._flush: Optional[threading.Timer] = None
        self._lock = threading.Lock()
        self._listen: Any = None
        self._tty = False
        self._beat: Optional[threading.Event] = None

    def start(self, known: int, all_known: bool = True) -> None:
        """Show the bar with the requests known now: their exact total when the method is single-round and
        `all_known` (every example is in progress), else a total that grows ('+')."""
        self.exact = self.exact and all_known
        self.total = max(self.total, known)
        if self.bar is None:
            # on a terminal every answer redraws the line (a batch engine's answers arrive together, and the last of
            # them must not wait for the next batch to show); a log file gets whole lines (_Lines)
            tty = self._tty = sys.stderr.isatty()
            live = {"mininterval": 0.0, "miniters": 1} if tty else {}
            self.bar = _Bar(total=self.total, desc=self.desc, unit="req", disable=not self.enabled, smoothing=0,
                            bar_format=BAR_FORMAT, file=sys.stderr if tty else _Lines(sys.stderr), owner=self,
                            **live)
            self._listen = listening(self._on_batch)
            self._listen.__enter__()
            if not self.bar.disable:
                self._beat = threading.Event()
                every = TTY_EVERY_S * 5 if tty else LOG_EVERY_S
                threading.Thread(target=self._heartbeat, args=(self._beat, every), daemon=True,
                                 name="recbench-progress").start()

    def grow(self, known: int) -> None:
        """Requests known so far (answered + queued); the total never shrinks and grows past an estimate."""
        if known > self.total:
            self.total = known
            if self.bar is not None:  # more than the count said up front (e.g. profile rounds): say it grows
                self.exact = False
                self.bar.total = known
                self._draw()

    def request_answered(self) -> None:
        """One request came back from the model (an error counts: it was answered)."""
        self.answered += 1
        if self.bar is not None:
            if not self._tty and not self.bar.disable:  # a log file: one line once a burst of answers is over
                self.bar.n += 1
                self._redraw_soon()
            elif self.bar.update(1):
                self._shown = self.bar.n
                self._drawn_at = time.monotonic()
            else:  # tqdm held the line back (a batch's answers arrive together): draw it once the burst is over
                self._redraw_soon()

    def _on_batch(self, batch: DecodeBatch) -> None:
        """An engine reported a batch's state (prefill, a decoding step, done)."""
        if batch.done:
            self.batches.add(batch)
            self.batch = None
        else:
            self.batch = batch
        if self._tty and self.bar is not None and not self.bar.disable:
            if batch.done or batch.steps <= 1 or time.monotonic() - self._drawn_at >= TTY_EVERY_S:
                self._draw()

    def _heartbeat(self, stop: threading.Event, every: float) -> None:
        """Redraw when nothing else has for `every` seconds (and no burst of answers is landing): the clock and the
        batch's steps move in a log file too."""
        while not stop.wait(every / 5):
            bar = self.bar
            if bar is not None and self._flush is None and time.monotonic() - self._drawn_at >= every:
                self._draw()

    def _draw(self) -> None:
        with self._lock:
            if self.bar is not None and not self.bar.disable:
                self._shown = self.bar.n
                self._drawn_at = time.monotonic()
                self.bar.refresh()

    def _redraw_soon(self) -> None:
        """Redraw after tqdm's interval unless a later answer did: the line in a log file never stays at the first
        answer of a batch while the rest of the batch is done."""
        with self._lock:
            if self._flush is None and self.bar is not None and not self.bar.disable:
                self._flush = threading.Timer(max(float(self.bar.mininterval), 0.05), self._redraw)
                self._flush.daemon = True
                self._flush.start()

    def _redraw(self) -> None:
        with self._lock:
            self._flush = None
            stale = self.bar is not None and self.bar.n != self._shown
        if stale:
            self._draw()

    def example_done(self) -> None:
        """One example finished (or was abandoned after a backend error)."""
        self.examples_done += 1

    def fields(self, n: int, total: Optional[float], elapsed: float) -> dict[str, str]:
        """The bar's own fields: examples done, the '+' of a growing total, the batch being decoded, the ETA and
        the rate (tokens/s once an engine reported decoding, else answers/s)."""
        left = max(int(total or 0) - max(n, sum(self.batches.rows)), 0)  # decoded rows count before they land
        cur = self.batch
        eta, bound = batch_eta(left, self.batches, cur)
        tokens = self.batches.tokens + (cur.tokens if cur is not None else 0)
        if eta is None and not self.batches.steps:
            eta, bound = request_eta(left, n, elapsed), False
        if tokens and elapsed > 0:
            speed = f"{tokens / elapsed:.1f} tok/s"
        else:
            rate = n / elapsed if elapsed > 0 and n else 0.0
            speed = "?req/s" if not rate else f"{rate:.2f}req/s" if rate >= 1 else f"{1 / rate:.2f}s/req"
        eta_text = "?" if eta is None else ("≤" if bound else "") + tqdm.format_interval(eta)
        return {"examples": f"{self.examples_done}/{self.examples_total}", "more": "" if self.exact else "+",
                "work": _work_text(cur), "eta": eta_text, "speed": speed}

    def close(self) -> None:
        """Draw the bar's last state (every example finished: the total is final, no '+') and release its line."""
        with self._lock:
            if self._flush is not None:
                self._flush.cancel()
                self._flush = None
        if self._beat is not None:
            self._beat.set()
        if self._listen is not None:
            self._listen.__exit__(None, None, None)
            self._listen = None
        self.batch = None
        if self.bar is not None:
            self.exact = self.exact or self.examples_done >= self.examples_total
            self.bar.close()


def _work_text(batch: Optional[DecodeBatch]) -> str:
    """'batch of 16: prefill 12 s | ' or 'batch of 16: step 57/512, 9 decoding | ' ('' between batches)."""
    if batch is None:
        return ""
    if batch.prefill_s is None:
        return f"batch of {batch.rows}: prefill {batch.elapsed():.0f} s | "
    return f"batch of {batch.rows}: step {batch.steps}/{batch.max_tokens}, {batch.live} decoding | "


def model_label(model_cfg: Any) -> str:
    """'smollm2 (hf: SmolLM2-135M-Instruct-Q8_0.gguf)': the model config's name, backend class and file/model."""
    node = model_cfg.get("backend") or {}
    target = str(node.get("_target_") or "")
    kind = target.rsplit(".", 1)[-1].replace("Backend", "").lower() or "backend"
    what = node.get("gguf_file") or node.get("model") or node.get("path") or node.get("base_url")
    if what:
        from recbench.store.redact import redact_url

        what = redact_url(str(what))  # a base URL's user info and query never reach the screen
    return f"{model_cfg.get('name')} ({kind}{': ' + str(what) if what else ''})"


def announce_start(model_cfg: Any, seconds: float, load_info: Optional[dict[str, Any]] = None) -> None:
    """The one line that says which model was started, from where and how long it took (stderr, above any bar);
    `load_info` is the backend's account of its load (hf: 'cached weights', the transformers import time, the torch
    threads it picked)."""
    info = load_info or {}
    how = f"{info['how']}, " if info.get("how") else ""
    imp, torch_s = float(info.get("import_s") or 0.0), float(info.get("torch_import_s") or 0.0)
    imports = (f"of it {torch_s:.1f} s importing torch and {imp:.1f} s transformers" if torch_s >= 0.1
               else f"{imp:.1f} s of it importing transformers")
    of_which = f" ({how}{imports})" if imp >= 0.1 else f" ({how[:-2]})" if how else ""
    threads = f"; {info['threads']}" if info.get("threads") else ""  # hf: '1 thread (auto: 2 cores, load 5.2 ...)'
    sys.stderr.write(f"recbench: model {model_label(model_cfg)} ready in {seconds:.1f} s{of_which}{threads}\n")
    sys.stderr.flush()
