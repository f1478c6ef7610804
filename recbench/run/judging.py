"""The judge pass (judge=<model>, docs/judges.md): after the model's loop and the audits' extra requests, the run's
finished answers go through the SAME EvalLoop again, with the judge's backend, into `<run dir>/judge/<tag>/`, through
the run's own response cache (the keys carry the judge backend's identity, so they never meet the model's answers):
a rerun pays nothing, an interrupted pass resumes paying only what was not answered. The pass takes the judge config
read once with its refusals (run/judge_settings.py `JudgeSettings`). The judge's per-example metrics are joined into
the run's records by store/schema.py `join_judged`."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from recbench.judges.protocols import Protocol
from recbench.judges.task import JudgeMethod, JudgeTask, judge_examples
from recbench.run.construct import LazyBackend
from recbench.run.judge_settings import JudgeSettings, JudgeSpec, enabled, identity, judged_identity
from recbench.run.loop import LoopSettings, LoopStats
from recbench.store.judge_records import JUDGE_DIR, start_again_if_changed, write_manifest
from recbench.store.records import PASS_COUNTERS
from recbench.store.runstore import RunStore
from recbench.store.schema import judge_tag

log = logging.getLogger("recbench")


@dataclass
class JudgePass:
    """What a judge pass gives the run: the judge's tag, metrics.json's `judge` block, the counters of its calls."""

    tag: str
    block: dict[str, Any]
    stats: dict[str, int] = field(default_factory=dict)


def fingerprint(identity: Any, protocol: Protocol, template: str, examples: list[Any]) -> str:
    """What a judge dir's records depend on: the judge's identity, the protocol, rubric, template text, sampling and
    every judged example (context, answer, reference answer); a judge dir of another fingerprint starts again."""
    payload = {"identity": identity, "protocol": protocol.key(), "rubric": protocol.setup.rubric, "template": template,
               "sampling": protocol.setup.sampling.to_dict(), "examples": [[e.id, e.data] for e in examples]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _judge_one(spec: JudgeSpec, template: str, examples: list[Any], run_dir: Path, cache: Any, factory: Any,
               manifest: dict[str, Any], loop: LoopSettings) -> tuple[list[Any], LoopStats]:
    """One judge dir filled through the run's loop and cache (resumable); its records of these examples and the
    loop's counters (`template`: the protocol template's text)."""
    where = Path(run_dir) / JUDGE_DIR / spec.tag
    ident = factory.identity()
    fp = fingerprint(ident, spec.protocol, template, examples)
    task = JudgeTask(spec.tag, spec.protocol, examples)
    method = JudgeMethod(task, spec.tag)
    if start_again_if_changed(where, fp):
        log.warning("judge/%s: judged before with another judge, rubric, template or other answers: judged again "
                    "(the response cache answers what it holds)", spec.tag)
    write_manifest(where, {**manifest, "tag": spec.tag, "role": spec.role, "judge": str(spec.model_cfg.name),
                           "repeat": spec.repeat, "identity": ident, "fingerprint": fp})
    return loop.run_into(where, task, method, examples, cache, factory=factory)


def judge_run(judge: Optional[JudgeSettings], task: Any, examples: list[Any], records: list[Any],
              run_dir: str | Path, cache: Any, model: Any, loop: LoopSettings) -> Optional[JudgePass]:
    """The judge pass over the run's finished records (None when no judge is configured): every judge dir filled,
    the judge's block for metrics.json. `model`: the run's backend object or LazyBackend, reused by a judge whose
    model config is the run's (one model loaded once)."""
    if judge is None:
        return None
    shown = judge_examples(task, examples, records, judge.reference_records)
    manifest = {"protocol": judge.protocol, "rubric": judge.rubric, "template": judge.template,
                "reference": judge.reference, "model": judge.model,
                "model_identity": judged_identity(judge.model_cfg, model)}
    totals = dict.fromkeys(PASS_COUNTERS, 0)
    tags: dict[str, list[str]] = {"panel": [], "repeat": []}
    main_records: list[Any] = []
    built: list[LazyBackend] = []
    try:
        for spec in judge.judges:
            factory = _factory(spec, model, built)
            manifest["self_judged"] = identity(spec.model_cfg) == manifest["model_identity"]
            recs, stats = _judge_one(spec, judge.template_text, shown, Path(run_dir), cache, factory, manifest, loop)
            totals = {k: totals[k] + getattr(stats, k) for k in PASS_COUNTERS}
            if spec.role == "judge":
                main_records = recs
            else:
                tags[spec.role].append(spec.tag)
    finally:
        for lazy in built:
            lazy.close()
    block = _block(judge.name, judge.protocol, judge.tag, main_records, tags, totals, manifest)
    return JudgePass(judge.tag, {"judge": block}, totals)


def _factory(spec: JudgeSpec, model: Any, built: list[LazyBackend]) -> Any:
    """The judge's backend factory: the run's own when the judge's model config is the run's, else a new
    LazyBackend (closed after the pass; checked before the model ran, judge_settings.preflight)."""
    if isinstance(model, LazyBackend) and spec.shares_model:
        return model
    lazy = LazyBackend(spec.model_cfg)
    built.append(lazy)
    return lazy


def _block(name: str, protocol: str, tag: str, records: list[Any], tags: dict[str, list[str]],
           totals: dict[str, int], manifest: dict[str, Any]) -> dict[str, Any]:
    """metrics.json's `judge` block: who judged how, where the records are, parse failures, the judge's tokens
    (apart from the model's) and its calls of this invocation."""
    calls = [c for r in records for c in r.calls]
    return {"name": name, "protocol": protocol, "tag": tag,
            "records": f"{JUDGE_DIR}/{tag}/samples.jsonl", "rubric": manifest["rubric"],
            "reference": manifest["reference"], "self_judged": manifest["self_judged"],
            "judged": len(records), "parse_failed": sum(1 for r in records if r.parse_status == "failed"),
            "calls": len(calls), "prompt_tokens": sum(c.prompt_tokens for c in calls),
            "completion_tokens": sum(c.completion_tokens for c in calls),
            "panel": tags["panel"], "repeats": tags["repeat"], "this_invocation": totals}


def merge_judges(cfg: Any, out: Path, shard_dirs: list[Path]) -> dict[str, Any]:
    """A merge of shards: every shard's judge dirs joined into the merged run dir's, tag by tag (each shard judged its
    own examples); metrics.json's `judge` block of the merged records ({} without a judge)."""
    from recbench.store.judge_records import judge_records
    from recbench.store.schema import read_prompts

    if not enabled(cfg):
        return {}
    by_tag: dict[str, tuple[dict[str, Any], list[Any], dict[str, Any]]] = {}
    for d in shard_dirs:
        for tag, jr in judge_records(d).items():
            _, recs, prompts = by_tag.setdefault(tag, (jr.manifest, [], {}))
            recs.extend(jr.records)
            prompts.update(read_prompts(Path(d) / JUDGE_DIR / tag / "prompts.jsonl"))
    for tag, (manifest, recs, prompts) in by_tag.items():
        where = Path(out) / JUDGE_DIR / tag
        fp = "merged:" + hashlib.sha256(json.dumps(sorted(r.id for r in recs)).encode()).hexdigest()
        start_again_if_changed(where, fp)
        write_manifest(where, {**manifest, "fingerprint": fp, "merged_shards": len(shard_dirs)})
        store = RunStore(where)
        try:
            for key, messages in prompts.items():
                store.add_prompt(key, messages)
            store.append_many(recs)
        finally:
            store.close()
    name, protocol = str(cfg.judge.name), str(cfg.judge.protocol)
    tag = judge_tag(name, protocol)
    if tag not in by_tag:
        return {}
    tags = {role: [t for t, (m, _, _) in by_tag.items() if m.get("role") == role] for role in ("panel", "repeat")}
    return {"judge": _block(name, protocol, tag, by_tag[tag][1], tags, dict.fromkeys(PASS_COUNTERS, 0), by_tag[tag][0])}
