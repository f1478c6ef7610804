"""A tiny Chrome DevTools Protocol client over --remote-debugging-pipe (stdlib only): open a page in headless
Chromium, collect console errors and exceptions, evaluate JavaScript."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional


def find_chromium() -> Optional[str]:
    """Debian's chromium (or another Chrome) on PATH, else None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            # Debian's /usr/bin/chromium is a shell wrapper that does not pass fds 3/4 on: use the real binary
            real = Path("/usr/lib/chromium/chromium")
            return str(real) if Path(p).resolve() == Path("/usr/bin/chromium") and real.is_file() else p
    return None


class Chromium:
    """Headless Chromium driven through CDP on file descriptors 3 (commands in) and 4 (messages out)."""

    def __init__(self, binary: str, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="rb-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def child_fds() -> None:  # runs in the child before exec: CDP expects fds 3 and 4
            a, b = os.dup(cmd_r), os.dup(out_w)  # fresh numbers > 4 first, so the two dup2 cannot clobber each other
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-dev-shm-usage", f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(out_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    # ---- protocol ------------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no message from chromium")
            ready, _, _ = select.select([self._out_r], [], [], left)
            if ready:
                chunk = os.read(self._out_r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit code {self.proc.poll()})")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: Optional[dict] = None, session: Optional[str] = None) -> dict[str, Any]:
        """Send one command and wait for its result (events that arrive meanwhile are kept in self.events)."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + self.timeout_s
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"CDP {method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, deadline_s: float = 30.0) -> dict[str, Any]:
        """Block until an event of this name arrives (or was already received)."""
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.time() + deadline_s
        while True:
            m = self._read_message(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    # ---- a page --------------------------------------------------------------------------------------
    def open(self, path: Path) -> str:
        """Open a file in a new tab with Runtime/Log/Page events on; returns the CDP session id once loaded."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", {}, session)
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, session)
        self.wait_event("Page.loadEventFired")
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its JSON value."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error-level log entries (e.g. failed resource loads)."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def close(self) -> None:
        """Close the browser and remove its profile."""
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._cmd_w, self._out_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


PAGE_FACTS_JS = """(() => ({
  images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth,
                                                  height: i.naturalHeight})),
  cells: Array.from(document.querySelectorAll('td[data-value]')).map(td => ({
      table: td.closest('table').id, value: td.dataset.value, text: td.querySelector('.v').textContent,
      sources: td.dataset.sources || null, pooled: td.dataset.pooled === '1', derived: td.dataset.derived === '1',
      mark: td.classList.contains('best') ? 'best' : (td.classList.contains('second') ? 'second' : null)})),
  missing: Array.from(document.querySelectorAll('td[data-missing]')).map(td => ({table: td.closest('table').id,
      text: td.textContent.trim()})),
  tables: Array.from(document.querySelectorAll('table.report')).map(t => t.id),
  external: Array.from(document.querySelectorAll('[src],[href]')).map(e => e.getAttribute('src') || e.getAttribute('href'))
      .filter(u => !u.startsWith('data:') && !u.startsWith('#')),
  scripts: document.scripts.length,
  widest_cell: Math.max(0, ...Array.from(document.querySelectorAll('table.report td')).map(td => td.getBoundingClientRect().width)),
  notes: Array.from(document.querySelectorAll('table.report td small.note')).map(n => n.textContent),
  legends: Object.fromEntries(Array.from(document.querySelectorAll('p.legend')).map(p => [p.dataset.legend, p.innerText])),
  letters: Array.from(document.querySelectorAll('sup.cld')).map(sup => {
      const td = sup.closest('td'), tr = td.closest('tr');
      return {table: td.closest('table').id, row: Array.from(tr.querySelectorAll('th')).map(th => th.textContent.trim()),
              column: Array.from(tr.children).filter(c => c.tagName === 'TD').indexOf(td), letters: sup.dataset.letters};
  }),
  comparisons: Array.from(document.querySelectorAll('table[id^="comparisons-"] tbody tr')).map(tr => ({
      table: tr.closest('table').id, row: Array.from(tr.querySelectorAll('th')).map(th => th.textContent.trim()),
      cells: Array.from(tr.querySelectorAll('td .v')).map(v => v.textContent.trim())})),
}))()"""


def json_path(obj: Any, path: str) -> Any:
    """obj['a']['b']... for 'a.b...' (the paths the report stores in data-sources)."""
    for part in path.split("."):
        obj = obj[part]
    return obj


def check_report_page(html: Path) -> dict[str, Any]:
    """Open the report in headless Chromium; assert no console errors, every plot decoded, no external resources,
    and every table cell backed by metrics.json shows exactly that value. Returns the page facts."""
    import statistics

    from recbench.report.numbers import fmt

    binary = find_chromium()
    assert binary, "chromium not found"
    with Chromium(binary) as c:
        session = c.open(html)
        facts = c.evaluate(session, PAGE_FACTS_JS)
        errors = c.console_errors()
    assert errors == [], errors
    assert facts["images"], "the report has no plots"
    bad = [i for i in facts["images"] if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
    assert not bad, f"plots that did not load: {bad}"
    assert facts["external"] == [], f"the page is not self-contained: {facts['external']}"
    checked = 0
    for cell in facts["cells"]:
        if not cell["sources"]:
            continue
        sources = json.loads(cell["sources"])
        vals = [json_path(json.loads((Path(s["run_dir"]) / "metrics.json").read_text()), s["path"]) for s in sources]
        expected = vals[0] if len(vals) == 1 else statistics.mean(vals)
        if len(vals) == 1:
            assert float(cell["value"]) == expected, (cell, expected)
        else:
            assert abs(float(cell["value"]) - expected) < 1e-12, (cell, expected)
        assert cell["text"] == fmt(expected), (cell, expected)
        checked += 1
    facts["checked_cells"] = checked
    return facts
