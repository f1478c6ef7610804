"""The judge config (judge=<model>, docs/judges.md) read once, before the run dir is written, into `JudgeSettings`:
the protocol of each judge dir, the rubric, the judges (the judge, the panel, the repeats) with their model configs,
the reference run's records and the judged model. Every refusal (a task without a rubric, an unknown protocol or
panel model, a template that does not name an aspect, a reference run of another task or other examples) comes from
`read`; the judge pass (run/judging.py) and plan mode (run/judge_plan.py) take the settings, not the config."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.api.errors import ConfigError, suggest
from recbench.api.judge_metrics import check_rubric
from recbench.api.prompts import template_path
from recbench.api.types import SamplingParams
from recbench.judges.protocols import PKG, PROTOCOLS, Protocol, Setup
from recbench.run.construct import LazyBackend, config_identity
from recbench.store.schema import SchemaError, judge_tag, read_run

log = logging.getLogger("recbench")


def enabled(cfg: Any) -> bool:
    """True when the config names a judge (judge.name other than none)."""
    return str((cfg.get("judge") or {}).get("name") or "none") != "none"


@dataclass
class JudgeSpec:
    """One judge dir to fill: its tag, role (judge, panel, repeat), model config, its protocol (the seed moved by the
    repeat), repeat number, and whether its backend is the judged model's (then the run's backend judges)."""

    tag: str
    role: str
    model_cfg: Any
    protocol: Protocol
    repeat: int = 0
    shares_model: bool = False


@dataclass
class JudgeSettings:
    """The judge config read once, every refusal passed: who judges how, against what, and whose answers."""

    name: str  # judge.name
    protocol: str  # judge.protocol
    template: str  # the protocol's template file
    template_text: str  # its text, read once (every judge dir's fingerprint holds it)
    reference: Optional[str]  # judge.reference, the run dir judged against (None: none)
    rubric: dict[str, str]
    judges: list[JudgeSpec]  # the judge first, then the other panel members, then the repeats
    reference_records: Optional[dict[str, Any]]  # the reference run's records by id (None: the protocol has none)
    model: str  # the judged model's name
    model_cfg: Any  # the judged model's config (its identity where no backend object was given)

    @property
    def tag(self) -> str:
        """The judge's own dir under judge/ (the panel's and the repeats' are beside it)."""
        return self.judges[0].tag


def read(cfg: Any, task: Any, examples: list[Any], backend: Any) -> Optional[JudgeSettings]:
    """The judge settings of the config (None without a judge), with every refusal of the judge config before
    anything runs (`backend`: the run's backend object, or None: built from cfg.model); warns when the judge is the
    judged model."""
    if not enabled(cfg):
        return None
    specs = _specs(cfg, task)
    specs[0].protocol.check_template()
    references = reference_records(cfg, task, examples)
    if identity(specs[0].model_cfg) == judged_identity(cfg.model, backend):
        log.warning("judge=%s is the judged model itself (same backend identity): LLM judges prefer their own "
                    "answers, so its scores may be inflated (self-preference)", cfg.judge.name)
    setup = specs[0].protocol.setup
    text = template_path(PKG, setup.template).read_text(encoding="utf-8")
    return JudgeSettings(str(cfg.judge.name), str(cfg.judge.protocol), str(setup.template), text,
                         str(cfg.judge.reference) if cfg.judge.reference else None, dict(setup.rubric), specs,
                         references, str(cfg.model.name), cfg.model)


def preflight(judge: Optional[JudgeSettings], model_checked: bool) -> None:
    """Refuse, before the model runs, a judge whose backend cannot start here (a package it needs, an unset API-key
    variable, a config its backend class refuses, servers that do not serve it): each judge model once, except the
    run's own model where `model_checked` (the run checked it already). Plan mode does not call this."""
    checked: list[Any] = []
    for spec in judge.judges if judge is not None else []:
        if (spec.shares_model and model_checked) or any(spec.model_cfg is c for c in checked):
            continue
        checked.append(spec.model_cfg)
        try:
            LazyBackend(spec.model_cfg).preflight()
        except ConfigError as e:  # the judge's own keys are judge.backend.*; a panel member's, its model entry's
            said = str(e) if spec.role == "panel" else str(e).replace("(model.backend.", "(judge.backend.")
            raise ConfigError(f"judge ({spec.role} {spec.model_cfg.get('name')}): {said}") from None


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


def _specs(cfg: Any, task: Any) -> list[JudgeSpec]:
    """The judge dirs of the config, each with its protocol: the judge, each other panel member, each repeat of the
    judge (an unknown protocol or rubric is refused first, then an unknown panel model)."""
    protocol, name = str(cfg.judge.protocol), str(cfg.judge.name)
    judge = judge_model(cfg)
    specs = [JudgeSpec(judge_tag(name, protocol), "judge", judge, protocol_for(cfg, task))]
    specs += [JudgeSpec(judge_tag(str(n), protocol), "panel", panel_model(str(n)), specs[0].protocol)
              for n in cfg.judge.panel or [] if str(n) != name]
    specs += [JudgeSpec(judge_tag(name, protocol, k), "repeat", judge, protocol_for(cfg, task, k), k)
              for k in range(1, int(cfg.judge.repeats) + 1)]
    for spec in specs:
        spec.shares_model = _same_backend(spec.model_cfg, cfg.model)
    return specs


def _same_backend(judge: Any, model: Any) -> bool:
    """Whether a judge's backend node is the judged model's (then the run's backend judges, one model loaded once)."""
    mine, theirs = judge.get("backend"), (model or {}).get("backend")
    return mine is not None and theirs is not None and \
        OmegaConf.to_container(mine) == OmegaConf.to_container(theirs, resolve=True)


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


def judged_identity(model_cfg: Any, model: Any) -> Any:
    """The judged model's identity: the backend object's, else from its config (None: no model config)."""
    if model is not None and not isinstance(model, LazyBackend):
        return model.identity()
    return identity(model_cfg) if model_cfg is not None else None


def identity(model_cfg: Any) -> Any:
    """A model's identity from its config alone (the backend node where the class offers no static identity)."""
    node = model_cfg.get("backend")
    if node is None:
        return None
    return config_identity(model_cfg) or OmegaConf.to_container(node, resolve=True)
