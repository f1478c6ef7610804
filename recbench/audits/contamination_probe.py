"""The probe run of a contamination split (`contamination.probe_run=DIR`), read through its files only
(recbench.store.schema): which real catalogue items a memorization probe of the same model recalled, and the
one-line refusals of a probe that is missing, not a probe, of another model or of another catalogue."""
from __future__ import annotations

import html
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from recbench.api.errors import ConfigError
from recbench.store.schema import SchemaError, read_run

#: backend-identity fields that change how a model decodes, not what it knows: ignored by the same-model check
DECODING_ONLY = ("kind", "dtype", "chat_template", "quirks")


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
                        identity=_identity(d), data=res.task.settings.get("data"),
                        verdict=res.facts.probe_verdict or {})
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
