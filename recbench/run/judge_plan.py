"""`mode=plan` for a judge (docs/judges.md): the judge's requests, prompt tokens, cached share and cost, counted
apart from the model's, for every judge dir the config asks for (the judge, the panel, the repeats). Nothing is
loaded or asked. Answers not in the run dir yet are counted as empty, so the judge's prompt tokens are a lower
bound (by at most the method's answer budget per judged answer)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from recbench.judges.task import JudgeMethod, JudgeTask, judge_examples
from recbench.run import judge_settings
from recbench.run.cost import run_cost
from recbench.store.response_cache import ResponseCache
from recbench.store.schema import PlanResult, SampleRecord, read_run


def plan_judge(cfg: Any, task: Any, examples: list[Any], run_dir: str | Path, count: Any,
               counter_for: Any) -> Optional[dict[str, Any]]:
    """plan.json's `judge` block (None without a judge): per judge dir and in total, requests, distinct requests,
    cached ones, prompt tokens and the cost where the judge's model has a price table. `count(method, todo,
    answers, counter, plan)` and `counter_for(model_cfg)` are plan mode's own (run/plan.py)."""
    judge = judge_settings.read(cfg, task, examples, None)  # every refusal of the judge config
    if judge is None:
        return None
    done = {r.id: r for r in read_run(run_dir, require_result=False).samples()} if Path(run_dir).is_dir() else {}
    records = [done.get(e.id) or SampleRecord(id=e.id, meta=e.meta, prediction="") for e in examples]
    shown = judge_examples(task, examples, records, judge.reference_records)
    dirs: dict[str, Any] = {}
    for spec in judge.judges:
        jtask = JudgeTask(spec.tag, spec.protocol, shown)
        p = PlanResult(task=jtask.name, model=str(spec.model_cfg.name), method=spec.tag, examples=len(shown),
                       already_finished=0)
        name = str((spec.model_cfg.get("backend") or {}).get("name") or spec.model_cfg.name)
        answers = ResponseCache.answers_by_request(cfg.cache.path, name) if cfg.cache.enabled else {}
        budget = count(JudgeMethod(jtask, spec.tag), shown, answers, counter_for(spec.model_cfg), p)
        price = spec.model_cfg.get("price")
        dirs[spec.tag] = {"role": spec.role, "requests": p.requests, "unique_requests": p.unique_requests,
                          "cached": p.cached, "prompt_tokens": p.prompt_tokens,
                          "prompt_tokens_uncached": p.prompt_tokens_uncached, "completion_budget": budget,
                          "cost": run_cost(price, p.prompt_tokens, budget) if price else None}
    total = {k: sum(d[k] for d in dirs.values()) for k in ("requests", "unique_requests", "cached", "prompt_tokens",
                                                            "prompt_tokens_uncached", "completion_budget")}
    return {"judges": dirs, **total,
            "answers_missing": sum(1 for e in examples if e.id not in done),
            "note": "judge requests and tokens, apart from the model's; answers not yet in the run dir count as empty"}
