"""`mode=plan`: what a run would cost, without calling a model: requests, prompt tokens (model tokenizer when
available), prompts over the context length, cached share, and estimated cost from the model's price table."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig

from recbench.api.config import validate
from recbench.api.errors import lookup
from recbench.run.audit_calls import RunAudits
from recbench.run.construct import build_task, config_identity, select_examples, take_shard
from recbench.run.cost import run_cost
from recbench.run.evaluate import method_of
from recbench.run.plan_tokens import TokenCounter
from recbench.store.derived_cache import disk_cached
from recbench.store.response_cache import ResponseCache
from recbench.store.schema import PlanResult, read_run
from recbench.api.types import Response

log = logging.getLogger(__name__)
MAX_ROUNDS = 10_000  # per example: a method that never stops is a bug, not a plan


Plan = PlanResult  # the numbers `mode=plan` prints (and writes to plan.json), typed in recbench.store.schema


class _ConfigModel:
    """A model known by its config only: its identity where the config tells it, else None (nothing is loaded)."""

    def __init__(self, model_cfg: DictConfig):
        self.cfg = model_cfg

    def identity(self) -> Optional[dict[str, Any]]:
        """The backend's identity from the config alone (recbench.run.construct.config_identity)."""
        return config_identity(self.cfg)


def _count(method: Any, todo: list, answers: dict[str, Any], counter: TokenCounter, p: Plan) -> int:
    """Drive each example's method with cached answers (else empty placeholders), counting requests, tokens, cache
    hits and context overflows into `p`; returns the completion-token budget of the distinct requests."""
    seen: dict[str, int] = {}
    completion_budget = 0
    for ex in todo:
        gen = method.run(ex)
        try:
            reqs = next(gen)
            for _ in range(MAX_ROUNDS):
                resps = []
                for r in reqs:
                    content = json.dumps(r.content_dict())
                    p.requests += 1
                    hit = answers.get(content)
                    if content not in seen:
                        seen[content] = counter.count(r)
                        n = seen[content]
                        p.unique_requests += 1
                        p.prompt_tokens += n
                        p.max_prompt_tokens = max(p.max_prompt_tokens, n)
                        completion_budget += r.sampling.max_tokens
                        p.max_completion_tokens = max(p.max_completion_tokens, r.sampling.max_tokens)
                        if hit is not None:
                            p.cached += 1
                        else:
                            p.prompt_tokens_uncached += n
                        if p.context_length and n + r.sampling.max_tokens > p.context_length:
                            p.over_context += 1
                    if hit is None:
                        p.requests_exact = False
                        resps.append(Response(text="", prompt_tokens=seen[content]))
                    else:
                        resps.append(Response(**{k: hit[k] for k in ("text", "finish_reason", "prompt_tokens",
                                                                       "completion_tokens") if k in hit}, cached=True))
                reqs = gen.send(resps)
        except StopIteration:
            pass
    counter.save()  # the counts made, for the next plan (recbench.run.plan_tokens)
    return completion_budget


def plan_from_config(cfg: DictConfig, run_dir: str | Path) -> Plan:
    """Drive every unfinished example's method with cached answers (or empty placeholders) and count."""
    validate(cfg)
    task = build_task(cfg)
    audits = RunAudits.of(cfg)
    method = method_of(cfg, task, audits)  # the run's method, with the audits it asks for
    examples = select_examples(task.load(), cfg.limit, cfg.run.limit_strategy, int(cfg.seed), task.breakdown_by)
    examples = take_shard(examples, cfg.run.shard, cfg.run.shards)  # run.shard=I: that shard only
    # contamination.probe_run=DIR: the run's checks of the probe, the model's identity only as far as the config
    # tells it (plan mode loads nothing)
    examples = audits.label(task, examples, run_dir, _ConfigModel(cfg.model) if method.needs_backend else None)
    done = ({s.id for s in read_run(run_dir, require_result=False).samples()} if Path(run_dir).is_dir() else set())
    todo = [e for e in examples if e.id not in done]
    uses_model = method.needs_backend
    p = Plan(task=task.name, model=str(cfg.model.name) if uses_model else "none", method=method.name,
             examples=len(examples), already_finished=len(examples) - len(todo))
    from recbench.run.judge_plan import plan_judge

    p.judge = plan_judge(cfg, task, examples, run_dir, _count, TokenCounter)  # judge=<model>: apart from the model's
    if not uses_model:
        p.notes.append("this method needs no model: no requests, no cost")
        p.power = power_plan(cfg, task, run_dir, examples)
        return p
    backend_cfg = cfg.model.get("backend") or {}
    model_name = str(backend_cfg.get("name") or cfg.model.name)
    answers = ResponseCache.answers_by_request(cfg.cache.path, model_name) if cfg.cache.enabled else {}
    counter = TokenCounter(cfg.model)
    ctx = cfg.model.get("context_length")
    p.context_length = int(ctx) if ctx else None
    method.prepare(examples)
    completion_budget = _count(method, todo, answers, counter, p)
    p.tokenizer = counter.source  # after counting: the tokenizer loads on the first count not cached
    # single-round methods: the count is exact whatever the answers; adaptive ones may ask more or fewer
    p.requests_exact = p.requests_exact or method.asks_one_round()
    if not p.requests_exact:
        p.notes.append("adaptive method: later rounds were simulated with empty answers for uncached requests, "
                       "so the request count is an estimate")
    p.notes += audits.plan_notes(p.unique_requests)  # e.g. the noise floor's second decode
    p.power = power_plan(cfg, task, run_dir, examples)
    if p.power and p.power["power_at_effect"] < float(cfg.plan.power):
        p.notes.append(f"warning: with n={p.power['n']} the smallest difference detectable at "
                       f"{float(cfg.plan.power):.0%} power is {p.power['mdd']:.3f} > plan.effect={p.power['effect']}: "
                       "raise limit or plan a larger effect")
    price = cfg.model.get("price")
    if price:
        share = (p.unique_requests - p.cached) / p.unique_requests if p.unique_requests else 0.0
        p.cost = run_cost(price, p.prompt_tokens, completion_budget)
        p.cost_uncached = run_cost(price, p.prompt_tokens_uncached, int(round(completion_budget * share)))
        p.notes.append("cost is an upper bound: every answer is assumed to use its full max_tokens")
    else:
        p.notes.append(f"model '{cfg.model.name}' has no price table (model.price): cost not estimated")
    return p


def power_plan(cfg: DictConfig, task: Any, run_dir: str | Path, examples: list) -> dict[str, Any]:
    """Minimum detectable paired difference of the headline metric at plan.power / plan.alpha over the examples, with
    the sd of paired differences from earlier runs of the task (the runs root beside this run dir) or plan.sd; a task
    whose headline test is another one plans it itself (Task.plan_power)."""
    from recbench.stats.planning import paired_sd_from_runs

    own = task.plan_power(examples, float(cfg.plan.alpha), float(cfg.plan.power), float(cfg.plan.effect))
    if own is not None:
        return own
    n_units = len(examples)
    metric = task.headline_metric
    root = Path(run_dir).parents[2] if len(Path(run_dir).parents) > 2 else None
    got = None
    if root is not None and root.is_dir():
        try:
            got = paired_sd_from_runs([root], metric, task=task.name)
        except Exception as e:  # noqa: BLE001 - unreadable earlier runs fall back to the stated default
            log.debug("plan: no paired sd from %s (%s)", root, e)
    sd, source = (got.sd, got.source) if got else (float(cfg.plan.sd), "default plan.sd (no earlier run of this task)")
    alpha, target, effect = float(cfg.plan.alpha), float(cfg.plan.power), float(cfg.plan.effect)
    mdd, at_effect = _power_figures(max(2, n_units), sd, target, alpha, effect)
    return {"metric": metric, "n": n_units, "sd": sd, "sd_source": source, "alpha": alpha, "power": target,
            "mdd": mdd, "effect": effect, "power_at_effect": at_effect}


def _power_source(*_: Any) -> list[Path]:
    import importlib

    return [Path(str(importlib.import_module("recbench.stats.power").__file__))]


@disk_cached("plan-power", _power_source)
def _power_figures(n: int, sd: float, target: float, alpha: float, effect: float) -> tuple[float, float]:
    """(minimum detectable difference, power at `effect`), kept in the derived-data cache keyed by the arguments and
    stats/power.py: computing them imports scipy.special (0.3 s of a plan's 1.2 CPU-s, issue 44)."""
    from recbench.stats.power import min_detectable_difference, power

    return min_detectable_difference(n, sd, target, alpha), power(effect, n, sd, alpha)


def print_plan(p: Plan) -> None:
    """The plan as a table on the terminal."""
    from rich.console import Console
    from rich.table import Table
    from rich.markup import escape

    t = Table(title=f"plan | {p.task} | model={p.model} | method={p.method}", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    share = p.cached_share
    rows = [
        ("examples (to run / already finished)", f"{p.examples - p.already_finished} / {p.already_finished}"),
        ("requests" + ("" if p.requests_exact else " (estimate)"), f"{p.requests}"),
        ("unique requests", f"{p.unique_requests}"),
        ("cached share", "—" if share is None else f"{share:.1%} ({p.cached})"),
        ("prompt tokens (all / not cached)", f"{p.prompt_tokens} / {p.prompt_tokens_uncached}"),
        ("longest prompt / max answer tokens", f"{p.max_prompt_tokens} / {p.max_completion_tokens}"),
        ("prompts over the context length", "—" if not p.context_length else f"{p.over_context} (context {p.context_length})"),
        ("tokenizer", p.tokenizer),
        ("estimated cost (all / not cached)", "—" if not p.cost else
         f"{p.cost['total']:.4f} / {p.cost_uncached['total']:.4f} {p.cost['currency']}"),
    ]
    if p.judge:
        j = p.judge
        rows += [("judge requests (all / unique / cached)", f"{j['requests']} / {j['unique_requests']} / {j['cached']}"),
                 ("judge prompt tokens (all / not cached)", f"{j['prompt_tokens']} / {j['prompt_tokens_uncached']}")]
    if p.power:
        w = p.power
        paired = w.get("n_control") is None
        size = f"n={w['n']}, sd={w['sd']:.3f}" if paired else f"n={w['n']} real + {w['n_control']} control"
        rows += [(f"min detectable {'paired ' if paired else ''}diff of {w['metric']} ({w['power']:.0%} power, "
                  f"alpha {w['alpha']})", f"{w['mdd']:.3f}  ({size})"),
                 (f"power for a difference of {w['effect']}", f"{w['power_at_effect']:.1%}"),
                 ("sd of paired differences from" if paired else "test", w["sd_source"] if paired else w["test"])]
        if not paired:
            rows.append(("assumption", w["sd_source"]))
    for k, v in rows:
        t.add_row(k, v)
    con = Console(width=max(100, Console().width))
    con.print(t)
    for n in p.notes:  # a note that is a warning says so itself ("warning: ..."), never "note: warning: ..."
        con.print(escape(n if n.startswith("warning:") else f"note: {n}"),
                  style="yellow" if n.startswith("warning:") else None)


MODES = {"run": None, "plan": None}


def run_mode(cfg: DictConfig, run_dir: str | Path) -> None:
    """Dispatch a non-default `mode` (plan); unknown modes fail with the valid choices."""
    lookup(MODES, str(cfg.mode), what="mode", hint="mode=")
    p = plan_from_config(cfg, run_dir)
    from recbench.store.runstore import write_json_atomic

    Path(run_dir).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(run_dir) / "plan.json", p.to_dict())
    print_plan(p)
