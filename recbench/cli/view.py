"""The sample viewer: `python -m recbench.view RUN_DIR [--out FILE]` writes one self-contained samples.html.

The page lists every example of a run dir (samples.jsonl, plus the examples abandoned after backend errors in
errors.jsonl) with its prompts, raw answers, finish reasons, parse status and reason, the prediction beside the
truth it was scored against (the record's `truth`; run dirs written before it existed have none), per-example
metrics, cache / token / latency figures and meta, and for a judged run each judge's scores or verdict and reason
beside the answer (a judge with a reference run: both display orders, who was A and B, each order's winner and the
combined verdict; docs/judges.md). It filters by parse status, by slice (the task's breakdown
keys) and by free text, and renders one page of rows at a time, so runs with thousands of examples stay fast.
No server, no network: the data is embedded as JSON and every model text is inserted as text, never as HTML. The
prompt table (most of a large run's page) is embedded after the script, which draws the first rows before the
browser reads it; a 60,000-example run opens in seconds (benchmarks/bench_view.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from recbench.store.paths import PathRefused, existing_dir, writable_file
from recbench.store.schema import (
    CallRecord,
    ErrorRecord,
    SampleRecord,
    SchemaError,
    read_prompts,
    read_run,
)
from recbench.store.judge_records import judge_records
from recbench.store.records import notes_of

TEMPLATE_DIR = Path(__file__).resolve().parent / "view_templates"
#: meta values with at most this many distinct values are offered as slice filters when metrics.json is absent
MAX_SLICE_VALUES = 40


def parse_reason(details: Any) -> str:
    """Why an answer was repaired or failed, from the method's details (Outcome.notes, or an older run's note)."""
    return "; ".join(notes_of(details))


def _call(c: CallRecord) -> dict[str, Any]:
    """The fields of one model call the page shows (the prompt stays a hash into the shared prompt table)."""
    return {"purpose": c.purpose, "prompt": c.prompt, "response": c.response, "finish_reason": c.finish_reason,
            "cached": c.cached, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
            "latency_s": c.latency_s, "error": c.error}


def _row(rec: SampleRecord) -> dict[str, Any]:
    """One finished example as the page shows it."""
    return {"id": rec.id, "status": rec.parse_status, "reason": parse_reason(rec.details), "meta": rec.meta,
            "prediction": rec.prediction, "truth": rec.truth, "metrics": rec.metrics, "details": rec.details,
            "calls": [_call(c) for c in rec.calls]}


def _error_row(rec: ErrorRecord) -> dict[str, Any]:
    """One example abandoned after a backend error, as the page shows it."""
    return {"id": rec.id, "status": "error", "reason": rec.error, "meta": {}, "prediction": None, "truth": None,
            "metrics": {}, "details": {}, "calls": [_call(c) for c in rec.calls]}


def _slices(breakdown_keys: list[str], rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Slice filters: the run's breakdown keys (metrics.json), else meta keys with few distinct scalar values."""
    keys = list(breakdown_keys)
    if not keys:
        keys = list(dict.fromkeys(k for r in rows for k, v in r["meta"].items() if isinstance(v, (str, int, float, bool))))
    out = {}
    for k in keys:
        vals = sorted({str(r["meta"][k]) for r in rows if k in r["meta"] and r["meta"][k] is not None})
        if 0 < len(vals) <= MAX_SLICE_VALUES:
            out[k] = vals
    return out


def _judged(rec: SampleRecord, jr: Any) -> dict[str, Any]:
    """One judge's verdict on one answer as the page shows it: scores or the combined verdict, the reason, and for a
    judge with a reference run each display order (who was A, who was B, that order's winner and reason)."""
    d = rec.details
    return {"tag": jr.tag, "role": jr.role, "judge": jr.manifest.get("judge"), "protocol": jr.protocol,
            "status": rec.parse_status, "verdict": rec.prediction, "reason": d.get("reason"),
            "problems": d.get("problems") or [], "orders": d.get("orders") or [],
            "reference_answer": d.get("reference_answer"), "reference": jr.manifest.get("reference")}


def judge_rows(run_dir: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's judge verdicts (row['judged'], the judge first, then its panel and repeats, judge/<tag>/), and the
    judges that judged the run (docs/judges.md)."""
    order = {"judge": 0, "panel": 1, "repeat": 2}
    dirs = sorted(judge_records(run_dir).values(), key=lambda j: (order.get(j.role, 3), j.tag))
    by_id: dict[str, list[dict[str, Any]]] = {}
    for jr in dirs:
        for rec in jr.records:
            by_id.setdefault(rec.id, []).append(_judged(rec, jr))
    for r in rows:
        r["judged"] = by_id.get(r["id"], [])
    return [{"tag": j.tag, "role": j.role, "judge": j.manifest.get("judge"), "protocol": j.protocol,
             "reference": j.manifest.get("reference"), "n": len(j.records)} for j in dirs]


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """Everything the page shows for a run dir (read through recbench.store.schema.read_run): run summary, slice values,
    rows (finished examples, then those abandoned after backend errors) and the prompt table."""
    d = Path(run_dir)
    if not (d / "samples.jsonl").exists() and not (d / "errors.jsonl").exists():
        raise SchemaError(f"{d}: no samples.jsonl or errors.jsonl. Fix: pass a run dir "
                          "(runs/<task>/<model>/<method>/<variant>) that has been run")
    run = read_run(d, require_result=False)  # an unfinished run (no metrics.json yet) can be viewed too
    res = run.result
    rows = [_row(r) for r in run.samples()]
    n_samples = len(rows)
    errors = {e.id: e for e in run.errors()}  # an example that failed on several runs is listed once (its last error)
    rows += [_error_row(e) for e in errors.values()]
    judges = judge_rows(d, rows)  # the judge's scores and reasons beside each judged answer
    used = {c["prompt"] for r in rows for c in r["calls"] if c.get("prompt")}
    prompts = {k: v for k, v in read_prompts(d / "prompts.jsonl").items() if k in used}
    missing = len(used - prompts.keys())  # referenced by a call, absent from prompts.jsonl (deleted or cut short)
    cfg = run.config
    return {
        "run_dir": str(d.resolve()), "task": run.task,
        "model": res.model if res else (cfg.get("model") or {}).get("name"),
        "method": res.method if res else (cfg.get("method") or {}).get("name"),
        "headline": res.headline_metric if res else None, "complete": res.complete if res else False,
        "slices": _slices(list(res.breakdown) if res else [], rows), "rows": rows, "prompts": prompts,
        "prompts_missing": missing,
        "n_samples": n_samples, "n_errors": len(errors), "has_truth": any(r["truth"] is not None for r in rows),
        "judges": judges,
    }


def script_json(obj: Any) -> Markup:
    """JSON that is safe inside a <script> element: <, >, & and line separators escaped as \\u sequences; NaN and
    infinities become null (orjson: several times faster than json on a large run's rows)."""
    s = orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, esc)
    return Markup(s)


def render(data: dict[str, Any]) -> str:
    """The samples.html text for load_run()'s data."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), autoescape=select_autoescape(["j2", "html"]))
    title = " · ".join(str(x) for x in (data.get("task"), data.get("model"), data.get("method")) if x) or data["run_dir"]
    rows = {k: v for k, v in data.items() if k != "prompts"}
    return env.get_template("samples.html.j2").render(title=title, data=script_json(rows),
                                                      prompts=script_json(data.get("prompts") or {}))


def write_view(run_dir: str | Path, out: Optional[str | Path] = None, data: Optional[dict[str, Any]] = None) -> Path:
    """Write the viewer page for a run dir (default RUN_DIR/samples.html); returns its path."""
    data = data if data is not None else load_run(run_dir)
    path = Path(out) if out else Path(run_dir) / "samples.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data), encoding="utf-8")
    return path


def main(argv: Optional[list[str]] = None) -> int:
    """CLI: write samples.html for a run dir and print its path."""
    ap = argparse.ArgumentParser(prog="python -m recbench.view", description="Write a self-contained samples.html "
                                 "listing every example of a run dir (prompts, answers, parse status, metrics).")
    ap.add_argument("run_dir", type=Path, help="a run dir: runs/<task>/<model>/<method>/<variant>")
    ap.add_argument("--out", type=Path, default=None, help="output file (default: RUN_DIR/samples.html)")
    args = ap.parse_args(argv)
    try:
        existing_dir(args.run_dir, f"RUN_DIR {args.run_dir}", "pass a run dir (runs/<task>/<model>/<method>/<variant>)")
        out = args.out or args.run_dir / "samples.html"
        writable_file(out, f"--out {out}", "the page")
        data = load_run(args.run_dir)
        path = write_view(args.run_dir, args.out, data)
    except (SchemaError, OSError, PathRefused) as e:
        print(f"recbench: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}: {data['n_samples']} examples, {data['n_errors']} abandoned after backend errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
