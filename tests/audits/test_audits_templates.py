"""Template audit (audit.templates=K): every headline method ships >= 3 paraphrased templates with one answer
contract; template 0 is today's prompt (same requests, same cache keys); through the real app with planted doubles on
the bundled PerRecBench sample the audit records every template, reports the headline per template, the variance
shares and the template-effect test, deduplicates and caches the extra requests, and refuses what it cannot run."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from recbench.api.errors import ConfigError
from recbench.api.types import Constraint, Response
from recbench.api.variant import Variant, variant_files, variant_name
from recbench.audits.templates import TemplateAudit, maybe_template_audit, template_aggregates
from recbench.run.construct import build_task, select_examples
from recbench.run.evaluate import run_from_config
from recbench.store.response_cache import KeyMaker
from recbench.testing.planted_audits import (
    LISTWISE_MARKERS,
    PlantedTemplateEffect,
    drive,
)
from tests.helpers import compose_cfg, read_samples

pytestmark = pytest.mark.fast

#: every headline method of every benchmark: (task, method)
HEADLINE = [("perrec", "pointwise"), ("perrec", "pairwise"), ("perrec", "listwise"), ("recbench_plus", "assistant"),
            ("llmrec_rating", "zero_shot"), ("llmrec_sequential", "zero_shot"), ("llmrec_direct", "zero_shot"),
            ("llmrec_explanation", "zero_shot"), ("llmrec_summary", "zero_shot")]


def _method(task_name: str, method: str, *more: str):
    cfg = compose_cfg([f"task={task_name}", f"method={method}", *more])
    task = build_task(cfg)
    return task, task.make_method(cfg.method, cfg.sampling)


def scripted_answer(req) -> Response:
    """One fixed answer per constraint kind: the first choice, the JSON ranking in reverse label order, or a text
    that every free-text parser of these methods reads ('Title A [SEP] Title B' for RecBench+)."""
    c: Constraint | None = req.constraint
    if c is not None and c.kind == "choice":
        return Response(text=c.choices[0])
    if c is not None and c.kind == "json":
        labels = json.loads(c.schema)["properties"]["ranking"]["items"]["enum"]
        return Response(text=json.dumps({"ranking": labels[::-1]}))
    return Response(text="Title A [SEP] Title B")


def _outcome(method, example, template: int):
    gen = method.run(example, Variant(template=template))
    prompts = []
    try:
        reqs = next(gen)
        while True:
            prompts += [r for r in reqs]
            reqs = gen.send([scripted_answer(r) for r in reqs])
    except StopIteration as stop:
        return stop.value, prompts


@pytest.mark.parametrize("task_name,method_name", HEADLINE)
def test_every_headline_method_ships_three_templates_with_one_answer_contract(task_name, method_name):
    """Three distinct prompts per example; the same answer read under each gives the same prediction and status (the
    parser and the answer format are the template's contract), and the requests differ only in the user message."""
    task, method = _method(task_name, method_name)
    files = method.template_files()
    assert len(files) >= 3 and files[1:3] == [variant_name(files[0], 1), variant_name(files[0], 2)]
    ex = task.load()[0]
    outs = [_outcome(method, ex, t) for t in range(3)]
    base, base_reqs = outs[0]
    users = []
    for out, reqs in outs:
        assert out.prediction == base.prediction and out.parse_status == base.parse_status
        assert len(reqs) == len(base_reqs)
        for r, r0 in zip(reqs, base_reqs):
            assert (r.sampling, r.constraint, r.adapter) == (r0.sampling, r0.constraint, r0.adapter)
            assert [m for m in r.messages if m[0] != "user"] == [m for m in r0.messages if m[0] != "user"]
        users.append(reqs[0].messages[-1][1])
    assert len(set(users)) == 3  # three different wordings


def test_answer_format_sentences_survive_every_paraphrase():
    """What each parser reads is asked for in the same words in every paraphrase."""
    contract = {"recbench.tasks.perrec": {"listwise.j2": '{"ranking": [', "pairwise.j2": '"[User A]" or "[User B]"',
                                          "pointwise.j2": "between 1 and 5"},
                "recbench.tasks.recbench_plus": {"assistant.j2": "[SEP]"},
                "recbench.tasks.llmrec": {"rating.j2": "(1 being lowest and 5 being highest)",
                                          "sequential.j2": "python list", "direct.j2": "python list"}}
    from recbench.api.prompts import template_path

    for pkg, names in contract.items():
        for name, phrase in names.items():
            files = variant_files(pkg, name)
            assert len(files) >= 3, name
            for f in files:
                assert phrase in template_path(pkg, f).read_text(), f


def test_template_0_is_todays_prompt_and_cache_key():
    task, method = _method("perrec", "listwise")
    keys = KeyMaker({"kind": "x", "name": "m"})
    for ex in task.load()[:5]:
        plain = next(method.run(ex))
        audited = next(TemplateAudit(method, 3).run(ex))
        assert [keys.key(r) for r in audited[:1]] == [keys.key(r) for r in plain]
        assert len({keys.key(r) for r in audited}) == 3


def test_listwise_markers_name_exactly_one_template_each():
    from recbench.api.prompts import template_path

    files = variant_files("recbench.tasks.perrec", "listwise.j2")
    for k, marker in LISTWISE_MARKERS.items():
        holders = [f for f in files if marker in template_path("recbench.tasks.perrec", f).read_text()]
        assert holders == [files[k]]


def _templates(r: dict) -> list[dict]:
    """A record's answers per template (SampleRecord.variants): template j's first answer, with the metrics of every
    display order under it (`orders`) and those answers (`order_answers`) when orders were audited too."""
    vs = [v for v in r["variants"] if not v["variant"].get("seed")]
    out = []
    for j in range(1 + max(v["variant"].get("template", 0) for v in vs)):
        mine = sorted((v for v in vs if v["variant"].get("template", 0) == j), key=lambda v: v["variant"].get("order", -1))
        ordered = [v for v in mine if "order" in v["variant"]]
        out.append({**mine[0], "orders": [v["metrics"] for v in ordered], "order_answers": ordered})
    return out


def _run(tmp_path, backend, *overrides, name="run"):
    cfg = compose_cfg(["method=listwise", "run.progress=false", f"cache.path={tmp_path / 'c.sqlite'}", *overrides])
    return run_from_config(cfg, tmp_path / name, backend=backend).to_dict(), read_samples(tmp_path / name)


@pytest.mark.full  # two runs of the app
def test_app_records_every_template_and_aggregates_them(tmp_path):
    b = PlantedTemplateEffect([1.0, 0.5, 0.0])
    metrics, recs = _run(tmp_path, b, "limit=12", "audit.templates=3")
    recs = sorted(recs, key=lambda r: r["id"])  # the aggregation's order (its permutation test is seeded)
    assert b.calls == 36  # three distinct prompts per group
    block = metrics["extra"]["template_audit"]
    assert block["templates"] == 3 and block["files"] == ["listwise.j2", "listwise_t1.j2", "listwise_t2.j2"]
    per = np.array([[t["metrics"]["ptc"] for t in _templates(r)] for r in recs])
    assert [p["mean"] for p in block["per_template"]] == pytest.approx(per.mean(axis=0).tolist())
    assert block["per_template"][0]["mean"] == pytest.approx(metrics["metrics"]["ptc"]["mean"])  # t0 = headline
    for p in block["per_template"]:
        assert p["ci_low"] <= p["mean"] <= p["ci_high"]
    preds = [[json.dumps(t["prediction"], sort_keys=True) for t in _templates(r)]
             for r in recs]
    assert block["answer_changed"] == pytest.approx([np.mean([p[j] != p[0] for p in preds]) for j in range(3)])
    from recbench.stats.variance import decompose, template_effect_test

    assert block["variance"]["shares"] == pytest.approx(decompose(per).shares)
    assert block["template_effect"]["p_value"] == pytest.approx(template_effect_test(per).p_value)
    # a rerun in a fresh dir: every request from the cache
    b2 = PlantedTemplateEffect([1.0, 0.5, 0.0])
    _, recs2 = _run(tmp_path, b2, "limit=12", "audit.templates=3", name="rerun")
    assert b2.calls == 0
    recs2 = sorted(recs2, key=lambda r: r["id"])
    assert [r["variants"] for r in recs2] == [r["variants"] for r in recs]


def test_template_0_equals_the_plain_run_record_by_record(tmp_path):
    m_plain, plain = _run(tmp_path, PlantedTemplateEffect([0.6, 0.5, 0.4]), "limit=9", name="plain")
    b = PlantedTemplateEffect([0.6, 0.5, 0.4])
    m_audit, audited = _run(tmp_path, b, "limit=9", "audit.templates=3", name="audited")
    assert b.calls == 18  # template 0's nine prompts came from the plain run's cache entries
    by_id = {r["id"]: r for r in plain}
    for r in audited:
        assert (r["prediction"], r["metrics"]) == (by_id[r["id"]]["prediction"], by_id[r["id"]]["metrics"])
        assert _templates(r)[0]["metrics"] == by_id[r["id"]]["metrics"]
    assert m_audit["metrics"]["ptc"]["mean"] == pytest.approx(m_plain["metrics"]["ptc"]["mean"])
    assert "template_audit" not in m_plain["extra"]


def test_with_orders_the_decomposition_has_an_order_source(tmp_path):
    b = PlantedTemplateEffect([0.9, 0.5, 0.1])
    metrics, recs = _run(tmp_path, b, "limit=9", "audit.templates=3", "audit.orders=2")
    var = metrics["extra"]["template_audit"]["variance"]
    assert var["sources"] == ["example", "template", "example:template", "order(example)", "residual"]
    assert var["n_orders"] == 2
    t = np.array([[[o["ptc"] for o in tt["orders"]] for tt in _templates(r)]
                  for r in recs])
    assert t.shape == (9, 3, 2)
    from recbench.stats.variance import decompose

    assert var["shares"] == pytest.approx(decompose(t).shares)
    assert "order_audit" in metrics["extra"]  # the order audit of template 0 is still there
    assert b.calls == len({(r["id"], tuple(o["shown"]), k) for r in recs for k in range(3)
                           for o in _templates(r)[0]["order_answers"]})


def test_config_errors_name_the_fix():
    task, listwise = _method("perrec", "listwise")
    with pytest.raises(ConfigError, match=r"audit.templates=4: method 'listwise' of task 'perrec' ships 3 template\(s\) "
                                          r"\(listwise.j2, listwise_t1.j2, listwise_t2.j2\): use audit.templates=3 or "
                                          r"add the paraphrase listwise_t3.j2"):
        maybe_template_audit(task, listwise, {"templates": 4})
    _, cot = _method("perrec", "listwise_cot")
    with pytest.raises(ConfigError, match=r"ships 1 template\(s\) \(listwise_cot.j2\): use audit.templates=0 or add "
                                          r"the paraphrase listwise_cot_t1.j2"):
        maybe_template_audit(task, cot, {"templates": 2})
    _, bm25 = _method("perrec", "bm25_history")
    with pytest.raises(ConfigError, match="has no prompt template to paraphrase"):
        maybe_template_audit(task, bm25, {"templates": 2})
    assert maybe_template_audit(task, listwise, {"templates": 0}) is listwise
    from recbench.api.config import validate

    with pytest.raises(ConfigError, match=r"audit.templates=1: must be 0 \(off\) or a whole number >= 2"):
        validate(compose_cfg(["method=listwise", "audit.templates=1"]))


def test_planted_double_is_detected_and_a_null_double_is_not():
    """One seed each at the documented n = 60 (power over seeds: tests/audits/test_audits_power.py)."""
    task, method = _method("perrec", "listwise")
    exs = select_examples(task.load(), 60, "stratified", 0, task.breakdown_by)
    audit = TemplateAudit(method, 3)
    planted = template_aggregates(drive(audit, PlantedTemplateEffect([0.9, 0.5, 0.1], seed=1), exs), "ptc",
                                  n_boot=200)["template_audit"]
    assert planted.template_effect.detected
    means = [p.mean for p in planted.per_template]
    assert means[0] > means[2]
    invariant = template_aggregates(drive(audit, PlantedTemplateEffect([1.0, 1.0, 1.0], seed=1), exs), "ptc",
                                    n_boot=200)["template_audit"]
    assert invariant.answer_changed_any == 0.0 and not invariant.template_effect.detected
    assert invariant.template_effect.p_value == 1.0 and invariant.spread == 0.0
    assert not math.isnan(invariant.variance["shares"]["example"])
