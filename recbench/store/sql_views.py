"""One SQL view over every run dir under a folder (`python -m recbench.results`, `recbench.results.connect()`):
DuckDB views over the files as they lie on disk, read at query time (no copy, no server, no database file).

- `runs`: one row per run dir: task, model, method, the headline with its CI, counts, complete, schema_version,
  seed, limit, failed (a job_failed.json), and the whole config (config.yaml) as JSON
- `metrics`: one row per run, slice, value and metric: mean, ci_low, ci_high, n, n_undefined, direction (the overall
  metrics are slice = value = 'all', as in the report's cells)
- `samples`: one row per finished example of every run: id, meta, prediction, truth, details (JSON), parse_status,
  metrics (a MAP: metrics['ptc']), calls

metrics.json is read through its typed columns (store/result.py's layout); a schema version this recbench cannot read
is refused naming the file, version 1 is read as it is (no metric_info: direction NULL). config.yaml is YAML, which
DuckDB does not read: it is parsed once at connect into a small in-memory table. The connection only answers queries
(`query` refuses anything but a SELECT).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Optional

from recbench.store.job_failed import JOB_FAILED
from recbench.store.records import SchemaError
from recbench.store.result import READABLE_VERSIONS
from recbench.store.schema import find_run_dirs

_SUMMARY = "STRUCT(mean DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n BIGINT, n_undefined BIGINT)"
#: metrics.json's columns as DuckDB types (a key a version lacks reads as NULL)
METRICS_COLUMNS = {
    "schema_version": "BIGINT", "task": "JSON", "model": "VARCHAR", "method": "VARCHAR", "headline_metric": "VARCHAR",
    "metrics": f"MAP(VARCHAR, {_SUMMARY})",
    "breakdown": f"MAP(VARCHAR, MAP(VARCHAR, STRUCT(n BIGINT, metrics MAP(VARCHAR, {_SUMMARY}))))",
    "counts": "STRUCT(examples BIGINT, parsed BIGINT, parse_ok BIGINT, parse_repaired BIGINT, parse_failed BIGINT, "
              "parse_failure_rate DOUBLE, model_calls BIGINT, prompt_tokens BIGINT, completion_tokens BIGINT, "
              "backend_errors BIGINT, finish_length BIGINT)",
    "complete": "BOOLEAN", "metric_info": "JSON", "cluster_by": "VARCHAR", "extra": "JSON", "cost": "JSON",
}
#: samples.jsonl's columns (store/records.py SampleRecord)
SAMPLES_COLUMNS = {"id": "VARCHAR", "meta": "JSON", "prediction": "JSON", "parse_status": "VARCHAR",
                   "details": "JSON", "metrics": "MAP(VARCHAR, DOUBLE)", "calls": "JSON", "truth": "JSON",
                   "variants": "JSON"}  # what each variant an audit asked answered (api/variant.py)
VIEWS = ("runs", "metrics", "samples")


def _list(paths: Iterable[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def _columns(cols: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in cols.items()) + "}"


def _configs(dirs: list[Path]) -> Any:
    """config.yaml of every run dir (seed, limit, the config as JSON) and whether a job failed, as an Arrow table."""
    import pyarrow as pa
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    rows: dict[str, list[Any]] = {"run_dir": [], "seed": [], "limit": [], "config": [], "failed": []}
    for d in dirs:
        p = d / "config.yaml"
        try:
            cfg = yaml.load(p.read_text(encoding="utf-8"), Loader=loader) if p.is_file() else {}
        except (yaml.YAMLError, UnicodeDecodeError):
            raise SchemaError(f"{p}: not valid YAML; rerun the same command to rewrite it") from None
        cfg = cfg if isinstance(cfg, dict) else {}
        rows["run_dir"].append(str(d))
        rows["seed"].append(cfg.get("seed") if isinstance(cfg.get("seed"), int) else None)
        rows["limit"].append(cfg.get("limit") if isinstance(cfg.get("limit"), int) else None)
        rows["config"].append(json.dumps(cfg, default=str))
        rows["failed"].append((d / JOB_FAILED).is_file())
    return pa.table({"run_dir": pa.array(rows["run_dir"], pa.string()), "seed": pa.array(rows["seed"], pa.int64()),
                     "limit": pa.array(rows["limit"], pa.int64()), "config": pa.array(rows["config"], pa.string()),
                     "failed": pa.array(rows["failed"], pa.bool_())})


def _check_versions(con: Any, files: str) -> None:
    """Refuse a metrics.json whose schema_version this recbench cannot read, naming the file (one line)."""
    readable = ", ".join(map(str, READABLE_VERSIONS))
    bad = con.execute(f"SELECT filename, json_extract(json, '$.schema_version')::VARCHAR FROM "
                      f"read_json_objects({files}, filename=true) WHERE coalesce(json_extract(json, "
                      f"'$.schema_version')::VARCHAR, 'null') NOT IN ({readable}) LIMIT 1").fetchall()
    if bad:
        raise SchemaError(f"{bad[0][0]}: schema_version {bad[0][1] or 'missing'} is not readable by this recbench "
                          f"(reads {readable}); upgrade recbench, or rerun the command that made it")


def _runs_sql() -> str:
    return """CREATE VIEW runs AS SELECT m.run_dir, m.task->>'name' AS task, m.model, m.method, m.headline_metric,
        m.metrics[m.headline_metric].mean AS headline, m.metrics[m.headline_metric].ci_low AS headline_ci_low,
        m.metrics[m.headline_metric].ci_high AS headline_ci_high, m.counts.examples AS examples,
        m.counts.parse_failed AS parse_failed, m.counts.parse_failure_rate AS parse_failure_rate,
        m.counts.model_calls AS model_calls, m.counts.prompt_tokens AS prompt_tokens,
        m.counts.completion_tokens AS completion_tokens, m.counts.backend_errors AS backend_errors, m.complete,
        m.schema_version, c.seed, c."limit", c.failed, m.cluster_by, c.config::JSON AS config, m.task AS task_config,
        m.cost, m.extra
        FROM metrics_json m LEFT JOIN run_configs c USING (run_dir)"""


def _metrics_sql() -> str:
    return """CREATE VIEW metrics AS
        SELECT run_dir, task->>'name' AS task, model, method, 'all' AS slice, 'all' AS value, e.key AS metric,
               e.value.mean AS mean, e.value.ci_low AS ci_low, e.value.ci_high AS ci_high, e.value.n AS n,
               e.value.n_undefined AS n_undefined, metric_info->e.key->>'direction' AS direction
        FROM metrics_json, unnest(map_entries(metrics)) AS t(e)
        UNION ALL BY NAME
        SELECT run_dir, task->>'name' AS task, model, method, b.key AS slice, v.key AS value, e.key AS metric,
               e.value.mean AS mean, e.value.ci_low AS ci_low, e.value.ci_high AS ci_high, e.value.n AS n,
               e.value.n_undefined AS n_undefined, metric_info->e.key->>'direction' AS direction
        FROM metrics_json, unnest(map_entries(breakdown)) AS t1(b), unnest(map_entries(b.value)) AS t2(v),
             unnest(map_entries(v.value.metrics)) AS t3(e)"""


def _samples_sql(dirs: list[Path]) -> str:
    files = [d / "samples.jsonl" for d in dirs if (d / "samples.jsonl").is_file()]
    cols = ", ".join(SAMPLES_COLUMNS)
    if not files:
        empty = ", ".join(f"NULL::{t} AS {k}" for k, t in SAMPLES_COLUMNS.items())
        return f"CREATE VIEW samples AS SELECT NULL::VARCHAR AS run_dir, {empty} WHERE false"
    return (f"CREATE VIEW samples AS SELECT regexp_replace(filename, '/samples\\.jsonl$', '') AS run_dir, {cols} "
            f"FROM read_json({_list(files)}, format='newline_delimited', columns={_columns(SAMPLES_COLUMNS)}, "
            f"filename=true)")


def connect(paths: Iterable[str | Path], *, dirs: Optional[list[Path]] = None) -> Any:
    """An in-memory DuckDB connection with the views runs, metrics and samples over every run dir under the paths
    (run or sweep dirs, or a runs root). SchemaError (one line naming the file) for a run dir it cannot read."""
    import duckdb

    dirs = find_run_dirs(paths) if dirs is None else dirs
    con = duckdb.connect(":memory:")
    con.register("run_configs", _configs(dirs))
    if not dirs:
        raise SchemaError(f"no run dirs (folders with a metrics.json) under {', '.join(map(str, paths))}")
    files = _list(d / "metrics.json" for d in dirs)
    _check_versions(con, files)
    con.execute(f"CREATE VIEW metrics_json AS SELECT regexp_replace(filename, '/metrics\\.json$', '') AS run_dir, * "
                f"EXCLUDE (filename) FROM read_json({files}, columns={_columns(METRICS_COLUMNS)}, filename=true, "
                f"format='auto')")
    con.execute(_runs_sql())
    con.execute(_metrics_sql())
    con.execute(_samples_sql(dirs))
    return con
