"""The run's progress: answered model requests of their total, finished examples beside them, a rate and an ETA from
the first answers; and the one line that says which model was started and how long that took.

The total of requests is exact when every example's requests are known up front: a single-round method (plan mode's
rule, `Method.asks_one_round`) whose examples are all in progress at once. Otherwise (multi-round methods,
`run.chunk_size`) it is the requests known so far, shown with a '+', and it grows as later rounds are asked.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Optional

from tqdm import tqdm

BAR_FORMAT = ("{desc}: requests {n_fmt}/{total_fmt}{more} | examples {examples} |{bar}| "
              "[{elapsed}<{remaining}, {rate_fmt}]")


class _Bar(tqdm):
    """tqdm with two extra fields for BAR_FORMAT: finished examples and the '+' of a growing total."""

    def __init__(self, *args: Any, examples: str = "", more: str = "", **kwargs: Any):
        self.examples, self.more = examples, more  # set before tqdm draws the first line
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self) -> dict[str, Any]:
        """tqdm's fields plus `examples` and `more`."""
        return {**super().format_dict, "examples": self.examples, "more": self.more}


class RequestProgress:
    """Counts answered requests (the bar) and finished examples (beside it); the bar appears when the first
    request goes to the model, so a run answered from the cache, or by a model-free method, shows none."""

    def __init__(self, desc: str, examples: int, exact: bool, enabled: bool = True):
        self.desc, self.examples_total, self.exact, self.enabled = desc, examples, exact, enabled
        self.examples_done = 0
        self.answered = 0
        self.total = 0
        self.bar: Optional[_Bar] = None
        self._shown = 0  # answers the last drawn line counts
        self._flush: Optional[threading.Timer] = None
        self._lock = threading.Lock()

    def start(self, known: int, all_known: bool = True) -> None:
        """Show the bar with the requests known now: their exact total when the method is single-round and
        `all_known` (every example is in progress), else a total that grows ('+')."""
        self.exact = self.exact and all_known
        self.total = max(self.total, known)
        if self.bar is None:
            # on a terminal every answer redraws the line (a batch engine's answers arrive together, and the last of
            # them must not wait for the next batch to show); in a log file tqdm's default interval keeps it short
            live = {"mininterval": 0.0, "miniters": 1} if sys.stderr.isatty() else {}
            self.bar = _Bar(total=self.total, desc=self.desc, unit="req", disable=not self.enabled, smoothing=0,
                            bar_format=BAR_FORMAT, file=sys.stderr, examples=self._examples_text(),
                            more=self._more_text(), **live)

    def grow(self, known: int) -> None:
        """Requests known so far (answered + queued); the total never shrinks and grows past an estimate."""
        if known > self.total:
            self.total = known
            if self.bar is not None:  # more than the count said up front (e.g. profile rounds): say it grows
                self.exact = False
                self._refresh_fields()
                self.bar.total = known
                self.bar.refresh()

    def request_answered(self) -> None:
        """One request came back from the model (an error counts: it was answered)."""
        self.answered += 1
        if self.bar is not None:
            if self.bar.update(1):
                self._shown = self.bar.n
            else:  # tqdm held the line back (a batch's answers arrive together): draw it once the burst is over
                self._redraw_soon()

    def _redraw_soon(self) -> None:
        """Redraw after tqdm's interval unless a later answer did: the line in a log file never stays at the first
        answer of a batch (with its ETA from one answer) while the rest of the batch is done."""
        with self._lock:
            if self._flush is None and self.bar is not None and not self.bar.disable:
                self._flush = threading.Timer(max(float(self.bar.mininterval), 0.05), self._redraw)
                self._flush.daemon = True
                self._flush.start()

    def _redraw(self) -> None:
        with self._lock:
            self._flush = None
            if self.bar is not None and self.bar.n != self._shown:
                self._shown = self.bar.n
                self.bar.refresh()

    def example_done(self) -> None:
        """One example finished (or was abandoned after a backend error)."""
        self.examples_done += 1
        if self.bar is not None:
            self._refresh_fields()

    def _examples_text(self) -> str:
        return f"{self.examples_done}/{self.examples_total}"

    def _more_text(self) -> str:
        return "" if self.exact else "+"

    def _refresh_fields(self) -> None:
        assert self.bar is not None
        self.bar.examples, self.bar.more = self._examples_text(), self._more_text()

    def close(self) -> None:
        """Draw the bar's last state (every example finished: the total is final, no '+') and release its line."""
        with self._lock:
            if self._flush is not None:
                self._flush.cancel()
                self._flush = None
        if self.bar is not None:
            self.exact = self.exact or self.examples_done >= self.examples_total
            self._refresh_fields()
            self.bar.close()


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
    `load_info` is the backend's account of its load (hf: 'cached weights', the transformers import time)."""
    info = load_info or {}
    how = f"{info['how']}, " if info.get("how") else ""
    imp, torch_s = float(info.get("import_s") or 0.0), float(info.get("torch_import_s") or 0.0)
    imports = (f"of it {torch_s:.1f} s importing torch and {imp:.1f} s transformers" if torch_s >= 0.1
               else f"{imp:.1f} s of it importing transformers")
    of_which = f" ({how}{imports})" if imp >= 0.1 else f" ({how[:-2]})" if how else ""
    sys.stderr.write(f"recbench: model {model_label(model_cfg)} ready in {seconds:.1f} s{of_which}\n")
    sys.stderr.flush()
