"""A Hugging Face Hub dataset folder of run dirs (`python -m recbench.export RUN_DIR... --hub OUT`): the results
(one row per run, slice, value and metric, with CIs) as `results/results.parquet`, each run's per-sample details as
`details/<run id>.parquet`, the dataset card `README.md` declaring both as configs (hub_card.py), and a model card
per model whose `model-index` block holds its eval results. Everything is read through the run-dir schema."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from recbench.store.schema import JOB_FAILED, RunDir, find_run_dirs, read_run

RESULTS = "results/results.parquet"
DETAILS = "details"


@dataclass
class ExportedRun:
    """One run dir as exported: its id (the name of its details config), the run read through the schema."""

    id: str
    run: RunDir
    details: str  # the details file's path inside OUT

    @property
    def model(self) -> str:
        """The run's model (for a model-free method: 'none')."""
        return self.run.result.model if self.run.result else "none"


def run_id(run_dir: Path, taken: set[str]) -> str:
    """A config-name-safe id of a run dir (task_model_method_variant), unique among `taken`."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", "_".join(run_dir.parts[-4:])).strip("_") or "run"
    rid, k = base, 2
    while rid in taken:
        rid, k = f"{base}_{k}", k + 1
    taken.add(rid)
    return rid


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def result_rows(e: ExportedRun) -> list[dict[str, Any]]:
    """The run's metrics.json as tidy rows: overall (slice = value = 'all') and every slice, each with its CI."""
    r = e.run.result
    assert r is not None
    cfg = e.run.config
    base = {"run_id": e.id, "run_dir": str(e.run.dir), "task": r.task_name, "model": r.model, "method": r.method,
            "variant": e.run.dir.name, "seed": cfg.get("seed"), "limit": cfg.get("limit"), "complete": r.complete,
            "failed": (e.run.dir / JOB_FAILED).is_file(), "schema_version": r.schema_version,
            "headline_metric": r.headline_metric}
    slices = [("all", "all", r.metrics)] + [(k, v, sl.metrics) for k, vals in r.breakdown.items()
                                            for v, sl in vals.items()]
    rows = []
    for key, value, metrics in slices:
        for name, s in metrics.items():
            rows.append({**base, "slice": key, "value": str(value), "metric": name, "mean": _num(s.mean),
                         "ci_low": _num(s.ci_low), "ci_high": _num(s.ci_high), "n": int(s.n),
                         "n_undefined": int(s.n_undefined),
                         "direction": str(_direction(r.metric_info.get(name)))})
    return rows


def _direction(info: Any) -> str:
    """A metric's recorded direction (metric_info), 'unknown' when the run recorded none."""
    return str(getattr(info, "direction", None) or "unknown")


def _text(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, default=str, allow_nan=False) if not isinstance(v, str) else v


def detail_table(e: ExportedRun) -> Any:
    """The run's samples (through the schema) as an Arrow table: id, parse_status, prediction, truth, meta, details
    (JSON text), calls, tokens, and one float column per metric ('metric.<name>')."""
    import pyarrow as pa

    samples = e.run.samples()
    names = sorted({m for s in samples for m in s.metrics})
    cols: dict[str, list[Any]] = {"id": [], "parse_status": [], "prediction": [], "truth": [], "meta": [],
                                  "details": [], "calls": [], "prompt_tokens": [], "completion_tokens": []}
    cols.update({f"metric.{m}": [] for m in names})
    for s in samples:
        cols["id"].append(s.id)
        cols["parse_status"].append(s.parse_status)
        for k in ("prediction", "truth", "meta", "details"):
            cols[k].append(_text(_clean(getattr(s, k))))
        cols["calls"].append(len(s.calls))
        cols["prompt_tokens"].append(sum(int(c.prompt_tokens or 0) for c in s.calls))
        cols["completion_tokens"].append(sum(int(c.completion_tokens or 0) for c in s.calls))
        for m in names:
            cols[f"metric.{m}"].append(_num(s.metrics.get(m)))
    types = {"calls": pa.int64(), "prompt_tokens": pa.int64(), "completion_tokens": pa.int64(),
             **{f"metric.{m}": pa.float64() for m in names}}
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})


def _clean(v: Any) -> Any:
    """NaN / inf as None inside nested values (JSON text has no NaN)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def collect(paths: list[str]) -> list[ExportedRun]:
    """Every run dir under the paths, read through the schema, with a unique id each."""
    taken: set[str] = set()
    out = []
    for d in find_run_dirs(paths):
        rid = run_id(d, taken)
        out.append(ExportedRun(rid, read_run(d), f"{DETAILS}/{rid}.parquet"))
    return out


def write_tables(runs: list[ExportedRun], out: Path) -> list[dict[str, Any]]:
    """results/results.parquet and details/<run id>.parquet under out; returns the result rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [row for e in runs for row in result_rows(e)]
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / DETAILS).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out / RESULTS)
    for e in runs:
        pq.write_table(detail_table(e), out / e.details)
    return rows
