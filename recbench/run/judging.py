"""The judge pass (judge=<model>, docs/judges.md): after the model's loop and the audits' extra requests, the run's
finished answers go through the SAME EvalLoop again, with the judge's backend, into `<run dir>/judge/<tag>/`, through
the run's own response cache (the keys carry the judge backend's identity, so they never meet the model's answers):
a rerun pays nothing, an interrupted pass resumes paying only what was not answered. Every refusal (a task without
a rubric, an unknown protocol, a template that does not name an aspect, a reference run of another task or other
examples) comes from `check`, before anything runs. The judge's per-example metrics are joined into the run's records
by store/schema.py `join_judged`."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.api.errors import ConfigError, suggest
from recbench.api.judge_metrics import check_rubric
from recbench.api.prompts import template_path
from recbench.api.types import SamplingParams
from recbench.judges.protocols import PKG, PROTOCOLS, Protocol, Setup
from recbench.judges.task import JudgeMethod, JudgeTask, judge_examples
from recbench.run.construct import LazyBackend, config_identity
from recbench.run.loop import EvalLoop, LoopStats
from recbench.store.judge_records import JUDGE_DIR, start_again_if_changed, write_manifest
from recbench.store.runstore import RunStore
from recbench.store.schema import SchemaError, judge_tag, read_run

log = logging.getLogger("recbench")

#: the loop counters a judge pass reports (and adds to the run's invocation where it says so)
COUNTERS = ("backend_calls", "cache_hits", "cache_misses", "backend_errors", "prompt_tokens", "completion_tokens")


def enabled(cfg: Any) -> bool:
    """True when the config names a judge (judge.name other than none)."""
    return str((cfg.get("judge") or {}).get("name") or "none") != "none"


@dataclass
class JudgeSpec:
    """One judge dir to fill: its tag, role (judge, panel, repeat), model config and repeat number."""

    tag: str
    role: str
    model_cfg: Any
    repeat: int = 0


@dataclass
class JudgePass:
    """What a judge pass gives the run: the judge's tag, metrics.json's `judge` block, the counters of its calls."""

    tag: str
    block: dict[str, Any]
    stats: dict[str, int] = field(default_factory=dict)


# ---- the setup and its refusals -----------------------------------------------------------------------------
def judgeable(task: Any) -> str:
    """Why a task cannot be judged (its class declares no rubric), naming the tasks that can."""
    from recbench.api.metrics import _load_task_plugins
    from recbench.api.task import Task

    _load_task_plugins()
    ok = sorted({c.name for c in _subclasses(Task) if c.__dict__.get("judge_rubric")})
    return (f"judge={{name}}: task '{task.name}' declares no judge rubric, so its answers cannot be judged. Tasks that "
            f"can: {', '.join(ok)} (and a YAML task with judge_rubric:); or unset judge (judge=none)")


def _subclasses(cls: type) -> list[type]:
    out = []
    for c in cls.__subclasses__():
        out += [c, *_subclasses(c)]
    return out


def rubric_of(cfg: Any, task: Any) -> dict[str, str]:
    """The rubric the judge is asked with: the task's, a subset of it (judge.rubric=[a, b]) or the user's own
    (judge.rubric={aspect: definition})."""
    own = task.rubric()
    if not own:
        raise ConfigError(judgeable(task).format(name=cfg.judge.name))
    given = cfg.judge.rubric
    if given is None:
        return own
    plain = OmegaConf.to_container(given, resolve=True) if OmegaConf.is_config(given) else given
    if isinstance(plain, dict):
        return check_rubric(plain, "judge.rubric")
    unknown = [a for a in plain if a not in own]
    if unknown:
        raise ConfigError(f"judge.rubric: {', '.join(map(str, unknown))} not among task '{task.name}''s aspects."
                          f"{suggest(str(unknown[0]), list(own))} Valid: {', '.join(own)} (or give a mapping "
                          "aspect: definition)")
    return {a: own[a] for a in plain}


def protocol_for(cfg: Any, task: Any, repeat: int = 0) -> Protocol:
    """The configured protocol with its rubric, template and sampling (the seed moved by `repeat`)."""
    key = str(cfg.judge.protocol)
    if key not in PROTOCOLS:
        raise ConfigError(f"judge.protocol={key}: unknown.{suggest(key, list(PROTOCOLS))} Valid choices: "
                          f"{', '.join(PROTOCOLS)}")
    sampling = SamplingParams(temperature=float(cfg.judge.temperature), top_p=1.0, max_tokens=int(cfg.judge.max_tokens),
                              seed=int(cfg.seed) + int(repeat))
    setup = Setup(tuple(rubric_of(cfg, task).items()), str(cfg.judge.template or f"{key}.j2"), sampling)
    return PROTOCOLS[key](setup)


def panel_model(name: str) -> DictConfig:
    """A catalogue model's config (conf/model/<name>.yaml, its backend on its typed schema) for a panel judge."""
    from recbench.api.conf_files import conf_dir, merged
    from recbench.backends.schemas import schema_of

    names = sorted(p.stem for p in (conf_dir() / "model").glob("*.yaml"))
    if name not in names or name == "none":
        raise ConfigError(f"judge.panel: unknown model '{name}'.{suggest(name, names)} Valid: any model of "
                          "python -m recbench list models")
    entry = merged("model", name)
    kind = next((d["/schema/backend@backend"] for d in (merged_defaults(name)) if "/schema/backend@backend" in d), None)
    schema = OmegaConf.structured(schema_of(kind), flags={"struct": False}) if kind else OmegaConf.create({})
    return OmegaConf.create({**entry, "backend": OmegaConf.merge(schema, entry.get("backend") or {})})


def merged_defaults(name: str) -> list[dict]:
    """The dict entries of a model entry's defaults list."""
    from recbench.api.conf_files import read_entry

    return [d for d in read_entry("model", name)[0].get("defaults") or [] if isinstance(d, dict)]


def judge_model(cfg: Any) -> DictConfig:
    """The judge's model config (judge.name, judge.backend, and its price table and context length when its entry
    has them) as a model node."""
    node = OmegaConf.to_container(cfg.judge, resolve=True)
    keep = ("name", "backend", "price", "context_length", "requires", "hf_id")
    return OmegaConf.create({k: node[k] for k in keep if k in node})


def judges(cfg: Any) -> list[JudgeSpec]:
    """The judge dirs of the config: the judge, each other panel member, each repeat of the judge."""
    protocol = str(cfg.judge.protocol)
    main = JudgeSpec(judge_tag(str(cfg.judge.name), protocol), "judge", judge_model(cfg))
    out = [main]
    for name in cfg.judge.panel or []:
        if str(name) != str(cfg.judge.name):
            out.append(JudgeSpec(judge_tag(str(name), protocol), "panel", panel_model(str(name))))
    out += [JudgeSpec(judge_tag(str(cfg.judge.name), protocol, k), "repeat", main.model_cfg, k)
            for k in range(1, int(cfg.judge.repeats) + 1)]
    return out


def reference_records(cfg: Any, task: Any, examples: list[Any]) -> Optional[dict[str, Any]]:
    """The pairwise protocol's reference records by id (None for a protocol without one); refuses a missing
    reference, one of another task, or one lacking some of the examples."""
    if not any(v == "answer_b" for v in PROTOCOLS[str(cfg.judge.protocol)].variables):
        return None
    ref = cfg.judge.reference
    if not ref:
        raise ConfigError(f"judge.protocol={cfg.judge.protocol} needs judge.reference=RUN_DIR: a run of task "
                          f"'{task.name}' on the same examples, whose answers this run's are judged against")
    try:
        run = read_run(str(ref), require_result=False)
        records = {r.id: r for r in run.samples()}
    except SchemaError as e:
        raise ConfigError(f"judge.reference={ref}: {e}") from None
    other = str((run.config.get("task") or {}).get("name") or "")
    if other != str(task.name):
        raise ConfigError(f"judge.reference={ref} is a run of task '{other or '?'}', not '{task.name}': a pairwise "
                          "judge compares answers to the same examples of the same task")
    lacking = [e.id for e in examples if e.id not in records]
    if lacking:
        raise ConfigError(f"judge.reference={ref} lacks {len(lacking)} of this run's {len(examples)} examples (e.g. "
                          f"'{lacking[0]}'): it ran other examples (limit, seed, shard); judge against a run of the "
                          "same selection")
    return records


def check(cfg: Any, task: Any, examples: list[Any], backend: Any) -> None:
    """Every refusal of the judge config, before anything runs (`backend`: the run's backend object, or None: built
    from cfg.model); warns when the judge is the judged model."""
    if not enabled(cfg):
        return
    protocol_for(cfg, task).check_template()
    reference_records(cfg, task, examples)
    if _identity(judges(cfg)[0].model_cfg) == model_identity(cfg, backend):
        log.warning("judge=%s is the judged model itself (same backend identity): LLM judges prefer their own "
                    "answers, so its scores may be inflated (self-preference)", cfg.judge.name)


def model_identity(cfg: Any, model: Any) -> Any:
    """The judged model's identity: the backend object's, else from its config."""
    if model is not None and not isinstance(model, LazyBackend):
        return model.identity()
    return _identity(cfg.model) if cfg.model is not None else None


def _identity(model_cfg: Any) -> Any:
    """A model's identity from its config alone (the backend node where the class offers no static identity)."""
    node = model_cfg.get("backend")
    if node is None:
        return None
    return config_identity(model_cfg) or OmegaConf.to_container(node, resolve=True)


# ---- the pass -----------------------------------------------------------------------------------------------
def fingerprint(identity: Any, protocol: Protocol, examples: list[Any]) -> str:
    """What a judge dir's records depend on: the judge's identity, the protocol, rubric, template text, sampling and
    every judged example (context, answer, reference answer); a judge dir of another fingerprint starts again."""
    template = template_path(PKG, protocol.setup.template).read_text(encoding="utf-8")
    payload = {"identity": identity, "protocol": protocol.key(), "rubric": protocol.setup.rubric, "template": template,
               "sampling": protocol.setup.sampling.to_dict(), "examples": [[e.id, e.data] for e in examples]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _judge_one(cfg: Any, spec: JudgeSpec, protocol: Protocol, examples: list[Any], run_dir: Path, cache: Any,
               factory: Any, manifest: dict[str, Any]) -> tuple[list[Any], LoopStats]:
    """One judge dir filled through the run's loop and cache (resumable); its records of these examples and the
    loop's counters."""
    where = Path(run_dir) / JUDGE_DIR / spec.tag
    identity = factory.identity()
    fp = fingerprint(identity, protocol, examples)
    if start_again_if_changed(where, fp):
        log.warning("judge/%s: judged before with another judge, rubric, template or other answers: judged again "
                    "(the response cache answers what it holds)", spec.tag)
    write_manifest(where, {**manifest, "tag": spec.tag, "role": spec.role, "judge": str(spec.model_cfg.name),
                           "repeat": spec.repeat, "identity": identity, "fingerprint": fp})
    task = JudgeTask(spec.tag, protocol, examples)
    store = RunStore(where)
    try:
        loop = EvalLoop(task, JudgeMethod(task, spec.tag), None, cache, store, chunk_size=cfg.run.chunk_size,
                        store_prompts=True, progress=cfg.run.progress, backend_factory=factory)
        loop.run(examples)
        wanted = {e.id for e in examples}
        return [r for r in store.records() if r.id in wanted], loop.stats
    finally:
        store.close()


def judge_run(cfg: Any, task: Any, examples: list[Any], records: list[Any], run_dir: str | Path, cache: Any,
              model: Any) -> Optional[JudgePass]:
    """The judge pass over the run's finished records (None when no judge is configured): every judge dir filled,
    the judge's block for metrics.json. `model`: the run's backend object or LazyBackend, reused by a judge whose
    model config is the run's (one model loaded once)."""
    if not enabled(cfg):
        return None
    shown = judge_examples(task, examples, records, reference_records(cfg, task, examples))
    rubric = rubric_of(cfg, task)
    manifest = {"protocol": str(cfg.judge.protocol), "rubric": rubric, "template": str(protocol_for(cfg, task).setup.template),
                "reference": str(cfg.judge.reference) if cfg.judge.reference else None,
                "model": str(cfg.model.name), "model_identity": model_identity(cfg, model)}
    totals = dict.fromkeys(COUNTERS, 0)
    tags: dict[str, list[str]] = {"panel": [], "repeat": []}
    main_records: list[Any] = []
    built: list[LazyBackend] = []
    try:
        for spec in judges(cfg):
            factory = _factory(cfg, spec, model, built)
            manifest["self_judged"] = _identity(spec.model_cfg) == manifest["model_identity"]
            recs, stats = _judge_one(cfg, spec, protocol_for(cfg, task, spec.repeat), shown, Path(run_dir), cache,
                                     factory, manifest)
            totals = {k: totals[k] + getattr(stats, k) for k in COUNTERS}
            if spec.role == "judge":
                main_records = recs
            else:
                tags[spec.role].append(spec.tag)
    finally:
        for lazy in built:
            lazy.close()
    tag = judges(cfg)[0].tag
    return JudgePass(tag, {"judge": _block(cfg, tag, main_records, tags, totals, manifest)}, totals)


def _factory(cfg: Any, spec: JudgeSpec, model: Any, built: list[LazyBackend]) -> Any:
    """The judge's backend factory: the run's own when the judge's model config is the run's, else a new
    LazyBackend (closed after the pass)."""
    if isinstance(model, LazyBackend) and _identity(spec.model_cfg) == _identity(cfg.model) and \
            OmegaConf.to_container(spec.model_cfg.backend) == OmegaConf.to_container(cfg.model.backend, resolve=True):
        return model
    lazy = LazyBackend(spec.model_cfg)
    lazy.preflight()
    built.append(lazy)
    return lazy


def _block(cfg: Any, tag: str, records: list[Any], tags: dict[str, list[str]], totals: dict[str, int],
           manifest: dict[str, Any]) -> dict[str, Any]:
    """metrics.json's `judge` block: who judged how, where the records are, parse failures, the judge's tokens
    (apart from the model's) and its calls of this invocation."""
    calls = [c for r in records for c in r.calls]
    return {"name": str(cfg.judge.name), "protocol": str(cfg.judge.protocol), "tag": tag,
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
    tag = judges(cfg)[0].tag
    if tag not in by_tag:
        return {}
    tags = {role: [t for t, (m, _, _) in by_tag.items() if m.get("role") == role] for role in ("panel", "repeat")}
    return {"judge": _block(cfg, tag, by_tag[tag][1], tags, dict.fromkeys(COUNTERS, 0), by_tag[tag][0])}
