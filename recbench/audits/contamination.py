"""Contamination split (`contamination.probe_run=DIR`): a run's headline metric on the examples whose item a
memorization probe run of the same model recalled, and on those whose item it did not recall (the clean subset).

The task names the items an example is about (`Task.contamination_items`: the item a group is asked about, the
held-out target item, the rated item), id -> title as it shows them. The probe run is read through its files only
(recbench.store.schema): every sample of a memorization probe holds meta `set` (real | control) and `item_id`, the
metric `recalled` (0/1) and truth `title`. An item is recalled when a real-set sample naming it was recalled; items of
the fabricated control set never count. Each example gets meta `recalled`: `yes` (one of its items recalled), `no`
(each of its items asked and none recalled) or `unprobed` (an item the probe did not ask about, none recalled), set
before the loop, so samples.jsonl carries it and the split is one more breakdown: metrics.json, the terminal summary,
`recbench.compare` (slices `recalled=yes|no|unprobed`) and the reports show it like difficulty. metrics.json
`extra.contamination` adds the gap test and the clean-subset score (`contamination_block`).

Refused with one line (a ConfigError): a probe run that is missing or not a memorization probe, of another model
(backend identity up to decoding-only fields; a model-free reference row is split by the probe model's recall, the
control for item easiness), or of another catalogue (no item of the run asked, or an item whose title differs).
The probe is not run automatically: it is a run of its own (its own cost, cache, report and plan-mode count); the
refusal names the command that runs it.

Long because reading the probe run, the refusals, the labels, the gap statistics and their one terminal line are one
contract: what a split means, stated once.
"""
from __future__ import annotations

import html
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.errors import ConfigError
from recbench.api.types import Example
from recbench.store.schema import SampleRecord, SchemaError, read_run

#: the example-meta key of the split and its values in display order
KEY = "recalled"
ORDER = ("yes", "no", "unprobed")
#: backend-identity fields that change how a model decodes, not what it knows: ignored by the same-model check
DECODING_ONLY = ("kind", "dtype", "chat_template", "quirks")
#: why the gap is tested this way (metrics.json and the report caption say it)
TEST_NAME = "two-sided permutation test of the difference in means (scipy.stats.permutation_test, labels permuted)"


@dataclass
class ProbeRecall:
    """What a memorization probe run says about the real catalogue items it asked."""

    dir: Path
    task: str
    method: str
    model: str
    identity: Optional[dict[str, Any]]
    data: Any  # the probe task's data identity (format, path, id field)
    recalled: dict[str, bool] = field(default_factory=dict)  # real item id -> recalled in a sample naming it
    titles: dict[str, str] = field(default_factory=dict)  # real item id -> its title in the probe's catalogue
    control: tuple[int, int] = (0, 0)  # (recalled, asked) of the fabricated control items
    verdict: dict[str, Any] = field(default_factory=dict)  # the probe's own coverage-vs-control summary


def enabled(cfg: Any) -> bool:
    """True when the config names a probe run (contamination.probe_run)."""
    return bool(((cfg.get("contamination") if cfg is not None else None) or {}).get("probe_run"))


def probe_command(model: str, task: Optional[str] = None, method: str = "id_to_title") -> str:
    """The command that runs a probe of `model` (task None: the memorization tasks found in conf/task, to choose)."""
    if task is None:
        from recbench.api.conf_files import conf_dir

        tasks = sorted(p.stem for p in (conf_dir() / "task").glob("memorization*.yaml"))
        task = f"<probe task of this data: {', '.join(tasks) or 'memorization_...'}>"
    return f"python -m recbench task={task} model={model} method={method}, then contamination.probe_run=<its run dir>"


def read_probe(path: str, model: str) -> ProbeRecall:
    """The probe run at `path` (ConfigError naming it and the command to run one when it is missing or not a probe)."""
    d = Path(path).expanduser()
    where = f"contamination.probe_run={path}"
    if not (d / "metrics.json").is_file():
        raise ConfigError(f"{where}: no finished probe run there ({d / 'metrics.json'} missing); the probe is not run "
                          f"for you, run it first: {probe_command(model)}")
    try:
        run = read_run(d)
        samples = run.samples()
    except SchemaError as e:
        raise ConfigError(f"{where}: {e}") from None
    res = run.result
    assert res is not None
    probe = ProbeRecall(dir=d.resolve(), task=res.task_name, method=res.method, model=res.model,
                        identity=_identity(d), data=res.task.get("data"),
                        verdict=dict(res.extra.get("memorization") or {}))
    asked = [s for s in samples if s.meta.get("set") in ("real", "control") and "item_id" in s.meta
             and not math.isnan(s.value("recalled"))]
    if not asked:
        raise ConfigError(f"{where}: {d} is a run of task {res.task_name}, not a memorization probe (no sample holds "
                          f"meta set/item_id and the metric 'recalled'); run one first: {probe_command(model)}")
    k0 = n0 = 0
    for s in asked:
        hit = s.value("recalled") >= 0.5
        if s.meta["set"] == "control":  # fabricated items never count as recalled
            k0, n0 = k0 + hit, n0 + 1
            continue
        item = str(s.meta["item_id"])
        probe.recalled[item] = probe.recalled.get(item, False) or hit
        if isinstance(s.truth, dict) and s.truth.get("title"):
            probe.titles.setdefault(item, str(s.truth["title"]))
    probe.control = (k0, n0)
    return probe


def _identity(d: Path) -> Optional[dict[str, Any]]:
    """versions.json's backend identity of a run dir (None when absent or unreadable)."""
    import json

    try:
        ident = json.loads((d / "versions.json").read_text(encoding="utf-8")).get("backend_identity")
    except (OSError, ValueError, AttributeError):
        return None
    return ident if isinstance(ident, dict) else None


def check_model(probe: ProbeRecall, model: str, identity: Optional[dict[str, Any]], where: str) -> None:
    """Refuse a probe of another model: backend identities that differ in a field both have (decoding-only fields
    aside), else, where either identity is unknown, different model names."""
    if identity is not None and probe.identity is not None:
        differ = sorted(k for k in set(identity) & set(probe.identity)
                        if k not in DECODING_ONLY and identity[k] != probe.identity[k])
        same = not differ
        what = ", ".join(f"{k} {probe.identity[k]!r} vs {identity[k]!r}" for k in differ)
    else:
        same, what = probe.model == model, f"model {probe.model!r} vs {model!r}"
    if not same:
        raise ConfigError(f"{where}: the probe run is of model {probe.model}, this run of model {model} ({what}); the "
                          f"split needs a probe of the same model: {probe_command(model, probe.task, probe.method)}")


def norm_title(title: str) -> str:
    """A title compared across catalogues: HTML entities and Unicode forms undone, case folded, whitespace collapsed,
    a clipping ellipsis dropped."""
    t = html.unescape(str(title)).strip().removesuffix("…")  # before NFKC, which writes it as '...'
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", t).casefold()).strip()


def same_title(a: str, b: str, similarity: float) -> bool:
    """True when two titles name one item: equal once normalised, one a prefix of the other (a clipped title, a title
    without its year) or rapidfuzz ratio >= similarity."""
    from rapidfuzz import fuzz

    x, y = norm_title(a), norm_title(b)
    return bool(x and y) and (x.startswith(y) or y.startswith(x) or fuzz.ratio(x, y) >= similarity)


def label(items: dict[str, Optional[str]], probe: ProbeRecall) -> str:
    """yes (an item recalled), no (every item asked, none recalled) or unprobed (an item not asked, none recalled)."""
    if any(probe.recalled.get(i) for i in items):
        return "yes"
    return "no" if all(i in probe.recalled for i in items) else "unprobed"


def check_catalogue(items: dict[str, dict[str, Optional[str]]], probe: ProbeRecall, where: str,
                    similarity: float) -> None:
    """Refuse a probe of another catalogue: no item of the run asked, or an asked item whose title differs."""
    ids = {i: t for per in items.values() for i, t in per.items()}
    shared = [i for i in ids if i in probe.recalled]
    d = probe.data if isinstance(probe.data, dict) else {}
    data = f"task {probe.task}: {d.get('format')} at {d.get('path')}, items keyed by {d.get('id_field')}"
    if not shared:
        example = next(iter(ids), "?")
        keyed = next(iter(probe.recalled), "?")
        raise ConfigError(f"{where}: the probe ({data}) asked about none of the {len(ids)} items this run's examples "
                          f"are about (e.g. item '{example}'; the probe's items are keyed like '{keyed}'): probe the "
                          "catalogue this task uses, keyed by the same item ids (the probe's task.data.id_field), with "
                          "a limit that reaches its items")
    bad = [i for i in shared if ids[i] and probe.titles.get(i) and not same_title(str(ids[i]), probe.titles[i],
                                                                                    similarity)]
    if bad:
        i = bad[0]
        raise ConfigError(f"{where}: item '{i}' is {ids[i]!r} in this task but {probe.titles[i]!r} in the probe's "
                          f"catalogue ({data}; {len(bad)} of {len(shared)} shared items differ): the probe asked about "
                          "another catalogue with the same item ids; probe the catalogue this task uses")


def split_breakdown(task: Any) -> None:
    """Add `recalled` to the task's breakdowns (last, so run.limit_strategy=stratified keeps its own first key)."""
    if KEY not in task.breakdown_by:  # on this instance only: the class's declarations stay as they are
        task.breakdown_by = (*task.breakdown_by, KEY)
        task.breakdown_order = {**task.breakdown_order, KEY: ORDER}


def split_examples(cfg: Any, task: Any, examples: list[Example], run_dir: str | Path, model: Any) -> list[Example]:
    """The examples with meta `recalled` from the probe run (unchanged when the split is off), after every check:
    the task declares items, the probe is of this model (`model`: the backend or its lazy factory; None for a
    model-free method) and of this catalogue, and finished examples in run_dir were split the same way."""
    if not enabled(cfg):
        return examples
    c = cfg.contamination
    where = f"contamination.probe_run={c.probe_run}"
    name = str(cfg.model.name)
    items = {e.id: {str(k): v for k, v in task.contamination_items(e).items()} for e in examples}
    if examples and not any(items.values()):
        raise ConfigError(f"{where}: task {task.name} declares no item an example is about "
                          f"({type(task).__name__}.contamination_items): it has no contamination split")
    probe = read_probe(str(c.probe_run), name)
    if model is not None:
        check_model(probe, name, model.identity(), where)
    check_catalogue(items, probe, where, float(c.title_similarity))
    labels = {i: label(per, probe) if per else "unprobed" for i, per in items.items()}
    _check_finished(Path(run_dir), labels, probe)
    split_breakdown(task)
    return [Example(e.id, e.data, {**e.meta, KEY: labels[e.id]}) for e in examples]


def _check_finished(run_dir: Path, labels: dict[str, str], probe: ProbeRecall) -> None:
    """Refuse a run dir whose finished examples were split by another state of the probe run (it changed since)."""
    if not (run_dir / "samples.jsonl").is_file():
        return
    try:
        done = read_run(run_dir, require_result=False).samples()
    except SchemaError:
        return  # the run store reports a damaged file itself
    stale = [r for r in done if r.id in labels and r.meta.get(KEY) != labels[r.id]]
    if stale:
        r = stale[0]
        raise ConfigError(f"{run_dir / 'samples.jsonl'}: {len(stale)} finished example(s) were split by another state "
                          f"of the probe run {probe.dir} (e.g. {r.id}: recalled={r.meta.get(KEY)} there, "
                          f"{labels[r.id]} now): delete {run_dir} and run again (the answers come from the cache)")


# ---- metrics.json extra.contamination -------------------------------------------------------------------------
def gap_test(recalled: Iterable[float], clean: Iterable[float], *, n_resamples: int, alpha: float, seed: int,
             level: float, n_boot: int) -> dict[str, Any]:
    """Recalled minus clean mean with a percentile bootstrap CI (each group resampled on its own; n_boot 0: none) and
    the two-sided permutation test of the difference in means (exact when the label arrangements number at most
    n_resamples).

    A permutation test because the per-unit values are bounded and lumpy (Kendall tau of 2-4 users, 0/1 hits), the
    groups small and unequal: Welch's t leans on normality there, while permuting the labels is valid whatever the
    distribution (exchangeable under no gap), so at most alpha of null runs are flagged."""
    from scipy import stats

    x, y = np.asarray(list(recalled), float), np.asarray(list(clean), float)
    out: dict[str, Any] = {"diff": float(x.mean() - y.mean()) if len(x) and len(y) else None, "ci_low": None,
                           "ci_high": None, "ci_level": level, "n_recalled": len(x), "n_clean": len(y),
                           "test": TEST_NAME, "p_value": None, "exact": None, "n_resamples": n_resamples,
                           "alpha": alpha, "significant": False}
    if len(x) < 2 or len(y) < 2:
        out["note"] = "fewer than 2 units in a group: no interval, no test"
        return out

    def diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(a, axis=axis) - np.mean(b, axis=axis)

    rng = np.random.default_rng(seed)
    res = stats.permutation_test((x, y), diff, permutation_type="independent", alternative="two-sided",
                                 n_resamples=n_resamples, vectorized=True, random_state=rng)
    out.update(p_value=float(res.pvalue), exact=bool(math.comb(len(x) + len(y), len(x)) <= n_resamples),
               significant=bool(res.pvalue < alpha))
    if n_boot:
        ci = stats.bootstrap((x, y), diff, n_resamples=n_boot, confidence_level=level, method="percentile",
                             vectorized=True, random_state=rng).confidence_interval
        out.update(ci_low=float(ci.low), ci_high=float(ci.high))
    return out


def units(records: list[SampleRecord], metric: str, cluster_by: Optional[str]) -> dict[str, list[float]]:
    """Per split value, the metric's per-unit values: each example's, or with cluster_by each cluster's mean over its
    examples of that value (NaN values left out)."""
    out: dict[str, list[float]] = {v: [] for v in ORDER}
    groups: dict[tuple[str, str], list[float]] = {}
    for r in records:
        v = r.value(metric)
        if str(r.meta.get(KEY)) not in out or math.isnan(v):
            continue
        unit = str(r.meta.get(cluster_by, r.id)) if cluster_by else r.id
        groups.setdefault((str(r.meta[KEY]), unit), []).append(v)
    for (value, _), vals in groups.items():
        out[value].append(float(np.mean(vals)))
    return out


def contamination_block(cfg: Any, task: Any, records: list[SampleRecord]) -> dict[str, Any]:
    """metrics.json extra.contamination ({} when the split is off): the probe, the examples per split value, the
    headline on recalled examples and on the clean subset (mean and bootstrap CI, as the breakdown has them), and the
    gap with its test, on per-example (or per-cluster) values."""
    if not enabled(cfg):
        return {}
    from recbench.api.metrics import run_info
    from recbench.stats.bootstrap import summarize

    c = cfg.contamination
    probe = read_probe(str(c.probe_run), str(cfg.model.name))
    records = sorted(records, key=lambda r: r.id)  # as the aggregation sorts them: the same numbers as the breakdown
    head = task.headline_metric
    n_boot, level, seed = int(cfg.run.bootstrap_resamples), float(cfg.run.ci_level), int(cfg.seed)
    by = {v: [r for r in records if r.meta.get(KEY) == v] for v in ORDER}
    score = {v: summarize([r.value(head) for r in by[v]], n_boot, level, seed) for v in ("yes", "no")}
    per_unit = units(records, head, task.cluster_by)
    k0, n0 = probe.control
    real = probe.verdict.get("real") or {}
    return {"contamination": {
        "probe_run": str(probe.dir), "probe_task": probe.task, "probe_method": probe.method, "probe_model": probe.model,
        "probe": {"items_asked": len(probe.recalled), "items_recalled": sum(probe.recalled.values()),
                  "coverage": real.get("rate"), "control_recalled": k0, "control_asked": n0,
                  "flagged": (probe.verdict.get("difference") or {}).get("flagged")},
        "metric": head, "direction": run_info(task, [head])[head]["direction"],
        "unit": task.cluster_by or "example", "examples": {v: len(by[v]) for v in ORDER},
        "recalled": score["yes"], "clean": score["no"],
        "gap": gap_test(per_unit["yes"], per_unit["no"], n_resamples=int(c.n_resamples), alpha=float(c.alpha),
                        seed=seed, level=level, n_boot=n_boot)}}


def summary_line(extra: dict[str, Any]) -> Optional[str]:
    """The split in one terminal line (None when the run has none)."""
    b = extra.get("contamination")
    if not isinstance(b, dict):
        return None
    from recbench.report.numbers import cell_text  # the summary's and the report's number format

    n, g, m = b["examples"], b["gap"], b["metric"]

    test = (f"gap {g['diff']:+.3f} [{g['ci_low']:+.3f}, {g['ci_high']:+.3f}], permutation p = {g['p_value']:.3g}"
            f"{': SIGNIFICANT' if g['significant'] else ': n.s.'} at alpha {g['alpha']:g}"
            if g.get("p_value") is not None else f"gap test: {g.get('note', 'not run')}")
    return (f"contamination split (probe {b['probe_method']}, {b['probe_task']}): recalled {n['yes']} | not recalled "
            f"{n['no']} | unprobed {n['unprobed']} examples; {m} recalled {cell_text(b['recalled'])} vs clean subset "
            f"{cell_text(b['clean'])}; {test}")
