"""Published reference numbers (data/published/*.yaml) as report rows, flagged where they fall outside measured CIs."""
from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import yaml

#: keys every published file needs (plus `metric`, one metric for every cell, or `metrics`, a list: then each
#: slice value maps metric names to numbers)
REQUIRED = ("benchmark", "slice", "applies_to", "source", "models")

#: keys of a model entry that are not methods
_NOT_METHODS = ("paper_name", "average", "note")


@dataclass(frozen=True)
class PublishedCell:
    """One published number: the paper's value for (task family, model, method, slice value, metric)."""

    benchmark: str
    applies_to: tuple[str, ...]
    model: str
    paper_name: str
    method: str
    slice: str
    value: str
    metric: str
    published: float
    rounding: float
    source: str


def published_dir() -> Path:
    """Folder of the bundled published-number files (recbench/data/published)."""
    return Path(str(resources.files("recbench.data").joinpath("published")))


def load_file(path: str | Path) -> list[PublishedCell]:
    """Every cell of one published-number YAML file; a malformed file is a one-line error naming file and field."""
    path = Path(path)
    d = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for k in REQUIRED[:1] + ("metric",) + REQUIRED[1:]:
        if k not in d and not (k == "metric" and "metrics" in d):
            raise ValueError(f"{path}: missing field '{k}'. Fix: add it (see the other files in data/published/)")
    metrics = [str(m) for m in d["metrics"]] if "metrics" in d else None
    cells = []

    def add(model: str, entry: Mapping, method: str, value: Any, metric: str, num: Any, where: str) -> None:
        if not isinstance(num, (int, float)) or isinstance(num, bool):
            raise ValueError(f"{path}: {where} is {num!r}, not a number. "
                             "Fix: give the published value, or leave the cell out")
        cells.append(PublishedCell(
            benchmark=str(d["benchmark"]), applies_to=tuple(d["applies_to"]), model=str(model),
            paper_name=str(entry.get("paper_name", model)), method=str(method), slice=str(d["slice"]),
            value=str(value), metric=metric, published=float(num), rounding=float(d.get("rounding", 0.0)),
            source=str(entry.get("source", d["source"]))))

    for model, entry in (d["models"] or {}).items():
        for method, by_value in entry.items():
            if method in _NOT_METHODS or method == "source":
                continue
            if not isinstance(by_value, Mapping):
                raise ValueError(f"{path}: models.{model}.{method} must map {d['slice']} values to numbers")
            for value, num in by_value.items():
                where = f"models.{model}.{method}.{value}"
                if metrics is None:
                    add(model, entry, method, value, str(d["metric"]), num, where)
                    continue
                if not isinstance(num, Mapping):
                    raise ValueError(f"{path}: {where} must map metric names ({', '.join(metrics)}) to numbers")
                for metric, x in num.items():
                    if str(metric) not in metrics:
                        raise ValueError(f"{path}: {where}.{metric} is not one of the file's metrics "
                                         f"({', '.join(metrics)}). Fix: add it to `metrics` or rename it")
                    add(model, entry, method, value, str(metric), x, f"{where}.{metric}")
    return cells


def load_published(folder: Optional[str | Path] = None) -> list[PublishedCell]:
    """All published cells of every *.yaml in the folder (default: the bundled data/published)."""
    folder = Path(folder) if folder else published_dir()
    return [c for p in sorted(folder.glob("*.yaml")) for c in load_file(p)]


def load_benchmark(benchmark: str, folder: Optional[str | Path] = None) -> list[PublishedCell]:
    """The published cells of one benchmark id (the `benchmark:` field of the files in the folder)."""
    return [c for c in load_published(folder) if c.benchmark == benchmark]


def _get(cell: Any, key: str, default: Any = None) -> Any:
    return cell.get(key, default) if isinstance(cell, Mapping) else getattr(cell, key, default)


def outside_ci(published: float, rounding: float, ci_low: float, ci_high: float) -> Optional[bool]:
    """True when the published value (+- its rounding) lies wholly outside [ci_low, ci_high]; None without a CI."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (ci_low, ci_high)):
        return None
    return published + rounding < ci_low or published - rounding > ci_high


def compare(measured: Iterable[Any], published: Optional[list[PublishedCell]] = None) -> list[dict[str, Any]]:
    """Published rows for the (task, model) pairs that were measured, each flagged against the matching measured cell.

    `measured`: dicts (or a DataFrame's `.to_dict("records")`) with task, model, method, slice, value, metric, mean,
    ci_low, ci_high (`value` may be omitted when `slice` holds the slice value, e.g. slice="easy"). Returns one row per
    published cell of a measured (task, model): its numbers, the measured mean/CI when that cell was run, and
    `outside_ci` (True/False, or None when the cell was not run or has no CI).
    """
    published = load_published() if published is None else published
    rows = list(measured)
    index: dict[tuple, Any] = {}
    pairs = set()
    for r in rows:
        task, model = str(_get(r, "task")), str(_get(r, "model"))
        pairs.add((task, model))
        value = _get(r, "value")
        sl = str(_get(r, "slice"))
        keys = [(task, model, str(_get(r, "method")), sl, str(value), str(_get(r, "metric")))] if value is not None \
            else []
        keys.append((task, model, str(_get(r, "method")), None, sl, str(_get(r, "metric"))))
        for k in keys:
            index.setdefault(k, r)
    out = []
    for c in published:
        for task, model in sorted(pairs):
            if task not in c.applies_to or model != c.model:
                continue
            m = index.get((task, model, c.method, c.slice, c.value, c.metric)) or \
                index.get((task, model, c.method, None, c.value, c.metric))
            row = {"task": task, "model": model, "method": c.method, "slice": c.slice, "value": c.value,
                   "metric": c.metric, "published": c.published, "paper_name": c.paper_name, "source": c.source,
                   "measured": None, "ci_low": None, "ci_high": None, "outside_ci": None}
            if m is not None:
                lo, hi = _get(m, "ci_low"), _get(m, "ci_high")
                row.update(measured=_get(m, "mean"), ci_low=lo, ci_high=hi,
                           outside_ci=outside_ci(c.published, c.rounding, lo, hi))
            out.append(row)
    return out
