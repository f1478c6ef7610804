"""What a tracker logs of one run dir, tracker-agnostic: the params (the composed config, flattened, secrets masked
as in config.yaml), the metrics (every metric of every slice with its CI bounds), the artifacts (metrics.json,
samples.jsonl or a link to it when large, the run's report HTML) and the identity that makes re-logging idempotent."""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from recbench.store.redact import MASK, redact_text, secret_key
from recbench.store.schema import RunResult, read_config, read_result

#: the tags every tracker run carries (MLflow tags, W&B config keys under `recbench`)
TAG_RUN_DIR = "recbench.run_dir"
TAG_SWEEP_DIR = "recbench.sweep_dir"
TAG_KIND = "recbench.kind"  # run | sweep
TAG_CONTENT = "recbench.metrics_sha256"  # metrics.json's hash: the same content is never logged twice
TAG_SAMPLES_LINK = "recbench.samples"  # where a samples.jsonl too large to upload lies
#: a value longer than this is cut (MLflow's own limit on a param value is 6,000 characters)
MAX_PARAM = 6000
#: characters a metric or param key may hold in every tracker (MLflow's rule); others become '_'
_KEY_OK = re.compile(r"[^A-Za-z0-9_\-. :/]")


def safe_key(key: str) -> str:
    """A key every tracker accepts: '@' written as '_at_' (hr@10 -> hr_at_10), other odd characters as '_'."""
    return _KEY_OK.sub("_", key.replace("@", "_at_"))


def _flatten(node: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(node, dict) and node:
        for k, v in node.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
        return
    if isinstance(node, (dict, list)):
        text = json.dumps(node, ensure_ascii=False, default=str)
    else:
        text = "null" if node is None else str(node)
    last = prefix.rsplit(".", 1)[-1]
    out[safe_key(prefix)] = (MASK if secret_key(last) and node not in (None, "") else redact_text(text))[:MAX_PARAM]


def params_of(config: dict[str, Any]) -> dict[str, str]:
    """The composed config as flat 'a.b.c' -> text params, every secret masked (URL user info and query values,
    values of keys named like api_key / token / password), as config.yaml shows them."""
    out: dict[str, str] = {}
    _flatten(config, "", out)
    return out


def _finite(v: Optional[float]) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def _summary(prefix: str, name: str, s: Any, out: dict[str, float]) -> None:
    key = safe_key(f"{prefix}{name}")
    for suffix, v in (("", s.mean), (".ci_low", s.ci_low), (".ci_high", s.ci_high), (".n", s.n)):
        if _finite(v):
            out[key + suffix] = float(v)


def metrics_of(result: RunResult) -> dict[str, float]:
    """Every metric of every slice with its CI bounds and n: 'ptc', 'ptc.ci_low', ..., and per slice
    'difficulty:easy/ptc', 'difficulty:easy/ptc.ci_high'; the run's counts as 'counts/examples' etc. A NaN (an
    undefined metric) is left out, never written as a number."""
    out: dict[str, float] = {}
    for name, s in result.metrics.items():
        _summary("", name, s, out)
    for key, values in result.breakdown.items():
        for value, sl in values.items():
            for name, s in sl.metrics.items():
                _summary(f"{key}:{value}/", name, s, out)
    for name, v in vars(result.counts).items():
        if _finite(v) and not isinstance(v, bool):
            out[safe_key(f"counts/{name}")] = float(v)
    return out


def metrics_sha(run_dir: Path) -> str:
    """The hash of a run dir's metrics.json bytes: what makes a logged run the same as the one on disk."""
    return hashlib.sha256((Path(run_dir) / "metrics.json").read_bytes()).hexdigest()


def sweep_dir_of(run_dir: Path) -> Optional[Path]:
    """The sweep dir a run dir belongs to (the nearest folder above it holding Hydra's multirun.yaml), or None."""
    for p in Path(run_dir).resolve().parents:
        if (p / "multirun.yaml").is_file():
            return p
    return None


def start_tags(run_dir: Path) -> dict[str, str]:
    """The tags a tracker run carries from its start: its run dir, its sweep dir, its kind."""
    sweep = sweep_dir_of(run_dir)
    return {TAG_RUN_DIR: str(Path(run_dir).resolve()), TAG_KIND: "run",
            **({TAG_SWEEP_DIR: str(sweep)} if sweep is not None else {})}


@dataclass
class RunContent:
    """Everything a tracker logs of one finished run dir."""

    run_dir: Path
    result: RunResult
    params: dict[str, str]
    metrics: dict[str, float]
    sha: str
    artifacts: list[Path] = field(default_factory=list)
    samples_link: Optional[str] = None  # samples.jsonl's path when it is too large to upload

    @property
    def name(self) -> str:
        """The run's display name: task/model/method/variant (the run dir's last four parts)."""
        return "/".join(self.run_dir.parts[-4:])

    @property
    def tags(self) -> dict[str, str]:
        """The identity tags (run dir, sweep dir, content hash, complete, schema version)."""
        tags = {**start_tags(self.run_dir), TAG_CONTENT: self.sha,
                "recbench.task": self.result.task_name, "recbench.model": self.result.model,
                "recbench.method": self.result.method, "recbench.complete": str(self.result.complete).lower(),
                "recbench.schema_version": str(self.result.schema_version)}
        if self.samples_link:
            tags[TAG_SAMPLES_LINK] = self.samples_link
        return tags


def run_content(run_dir: str | Path, *, samples_max_mb: float = 50.0, report_html: Optional[Path] = None) -> RunContent:
    """A run dir's content for a tracker (metrics.json read through the schema; config.yaml as written, secrets
    already masked); samples.jsonl over samples_max_mb is linked, not uploaded."""
    d = Path(run_dir).resolve()
    result = read_result(d)
    artifacts = [d / "metrics.json"]
    link = None
    samples = d / "samples.jsonl"
    if samples.is_file():
        if samples.stat().st_size <= samples_max_mb * 1e6:
            artifacts.append(samples)
        else:
            link = samples.as_uri()
    if report_html is not None and report_html.is_file():
        artifacts.append(report_html)
    return RunContent(run_dir=d, result=result, params=params_of(read_config(d)), metrics=metrics_of(result),
                      sha=metrics_sha(d), artifacts=artifacts, samples_link=link)


def run_report_html(run_dir: Path, out: Path) -> Optional[Path]:
    """The report of one run dir (its HTML page only) written into `out`; None when it cannot be built."""
    import logging

    from recbench.report.writer import write_report

    quiet = logging.getLogger("recbench.report.writer")  # its INFO line names a temporary folder
    level = quiet.level
    quiet.setLevel(max(logging.WARNING, level))
    try:
        return write_report([run_dir], out, title=f"recbench run {run_dir.name}", formats=["html"]).get("html")
    except Exception:  # noqa: BLE001 - a report failure must not cost the metrics and samples
        return None
    finally:
        quiet.setLevel(level)
