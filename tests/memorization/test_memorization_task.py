"""The memorization task through the loop with a planted double: the example layout (real and control interleaved,
real items spread over popularity deciles), the prompts each probe sends, resuming, plan mode, config errors, the
terminal summary and the report figure."""
from __future__ import annotations

import pytest

from recbench.api.errors import ConfigError
from recbench.testing.planted import PlantedMemory
from tests.helpers import compose_cfg
from tests.memorization.memorization_helpers import bundled_items, probe

pytestmark = pytest.mark.fast


def test_examples_interleave_real_and_control_over_deciles(tmp_path):
    items = bundled_items()
    m, recs = probe(tmp_path, ["method=id_to_title", "limit=20"], PlantedMemory(items))
    sets = [r["meta"]["set"] for r in recs]
    assert sets.count("real") == 10 and sets.count("control") == 10
    # the first 10 real items are one from each popularity decile (round-robin, most rated first)
    assert sorted(r["meta"]["popularity_decile"] for r in recs if r["meta"]["set"] == "real") == list(range(1, 11))
    assert all("popularity_decile" not in r["meta"] for r in recs if r["meta"]["set"] == "control")
    assert list(m["breakdown"]["set"]) == ["real", "control"]
    assert list(m["breakdown"]["popularity_decile"]) == [str(d) for d in range(1, 11)]
    assert m["metric_info"]["false_recall"]["direction"] == "lower"
    assert m["metric_info"]["coverage"]["direction"] == "higher" and m["metric_info"]["coverage"]["binary"]
    real = next(r for r in recs if r["meta"]["set"] == "real")
    assert real["truth"]["title"] == items[real["meta"]["item_id"]]


def test_lookup_prompt_has_the_rolling_window_of_preceding_records(tmp_path):
    items = bundled_items()
    ids = list(items)
    seen = []

    class Spy(PlantedMemory):
        def generate(self, requests):
            seen.extend(requests)
            return super().generate(requests)

    probe(tmp_path, ["method=id_to_title", "limit=4"], Spy({}))
    req = next(r for r in seen if r.example_id.startswith("item:"))
    key = req.example_id.split(":", 1)[1]
    at = ids.index(key)
    turns = [c for role, c in req.messages[1:-1]]
    window = ids[at - 3:at] if at >= 3 else ids[:at] + ids[at + 1: at + 1 + 3 - at]
    assert turns == [x for k in window for x in (f"Input: {k}::", f"{k}::{items[k]}")]
    assert req.messages[-1] == ("user", f"Input: {key}::")
    assert req.messages[0][1].startswith("You are the PerRecBench sample dataset. Given a lookup key such as a ItemID")
    assert req.sampling.temperature == 0 and req.sampling.max_tokens == 48


def test_prefix_probe_asks_a_unique_prefix(tmp_path):
    from tests.memorization.memorization_helpers import _composed
    from recbench.run.construct import build_task

    cfg = _composed(("method=prefix_to_title",))
    task = build_task(cfg)
    task.make_method(cfg.method, cfg.sampling)
    exs = task.load()
    titles = [t.split(" (")[0].casefold() for t in bundled_items().values()]
    for e in exs[:40]:
        d = e.data
        if d["set"] == "real":
            starts = [t for t in titles if (t + " ").startswith(d["prefix"].casefold() + " ")]
            assert len(starts) == 1 or len(d["rest"].split()) == 1, (d["prefix"], starts)
            assert d["truths"] == [d["rest"]]


def test_a_finished_probe_resumes_with_no_call(tmp_path):
    items = bundled_items()
    b = PlantedMemory(items)
    m1, _ = probe(tmp_path, ["method=id_to_title", "limit=10"], b)
    calls = b.calls
    m2, _ = probe(tmp_path, ["method=id_to_title", "limit=10"], b)
    assert calls == 10 and b.calls == 10 and m2["this_invocation"]["backend_calls"] == 0
    assert m2["extra"]["memorization"] == m1["extra"]["memorization"]


@pytest.mark.full  # imports transformers for the token count: seconds
def test_plan_mode_counts_one_request_per_example(tmp_path):
    from recbench.run.plan import plan_from_config

    cfg = compose_cfg(["task=memorization_bundled", "method=id_to_title_loglik", "limit=30", "model=gpt4o-mini",
                       f"cache.path={tmp_path / 'c.sqlite'}", f"cache.derived_dir={tmp_path / 'd'}"])
    p = plan_from_config(cfg, tmp_path / "plan")
    assert p.examples == 30 and p.requests == 30


def test_settings_errors_name_the_key(tmp_path):
    from recbench.run.construct import build_task

    with pytest.raises(ConfigError, match=r"task.match.scorer=ratios: must be one of ratio, .* Did you mean 'ratio'"):
        build_task(compose_cfg(["task=memorization_bundled", "task.match.scorer=ratios"]))
    with pytest.raises(ConfigError, match=r"task.match.threshold=0: must be a number in \(0, 100\]"):
        build_task(compose_cfg(["task=memorization_bundled", "task.match.threshold=0"]))
    (tmp_path / "movies.dat").write_text("1::Toy Story (1995)::Animation\n2::Jumanji (1995)::Adventure\n")
    cfg = compose_cfg(["task=memorization_bundled", "method=history_to_next", "task.data.format=movielens_dat",
                       f"task.data.path={tmp_path}", f"cache.derived_dir={tmp_path / 'd'}", "task.control.n=1"])
    task = build_task(cfg)
    task.make_method(cfg.method, cfg.sampling)
    with pytest.raises(ConfigError, match="history_to_next needs ratings"):
        task.load()


def test_summary_and_report_figure(tmp_path, capsys):
    from recbench.cli.summary import print_summary
    from recbench.store.schema import RunResult
    from recbench.report.collect import aggregate_seeds, cells_table, load_runs
    from recbench.report.presentation import presentation_of
    from recbench.tasks.memorization.task import MemorizationTask

    m, _ = probe(tmp_path, ["method=id_to_title", "limit=20"], PlantedMemory(bundled_items()))
    print_summary(RunResult.from_dict(m))
    out = capsys.readouterr().out
    assert "memorization: coverage 1.000 (10/10; Wilson 95% [0.722, 1.000])" in " ".join(out.split())
    assert "coverage - control +1.000" in out and "FLAGGED" in out
    agg = aggregate_seeds(cells_table(load_runs([tmp_path / "run"])))
    plots = [p for draw in presentation_of(MemorizationTask).plots for p in draw(agg, None, "memorization")]
    assert [p.id for p in plots] == ["memorization-deciles-memorization"] and len(plots[0].png_base64) > 1000


def test_an_answer_copied_from_the_prompt_is_not_a_recall(tmp_path):
    from recbench.api.types import Example, Outcome
    from recbench.run.construct import build_task
    from tests.doubles import ScriptedBackend

    task = build_task(compose_cfg(["task=memorization_bundled"]))
    ex = Example("item:x", {"key": "x", "title": "OPI Nail Lacquer, Red", "set": "real",
                            "truths": ["OPI Nail Lacquer, Red"]}, {"set": "real"})

    def score(answer: str) -> dict:
        return task.score(ex, Outcome(answer, "ok", {"answers": [answer], "line": answer,
                                                     "shown": ["OPI Nail Lacquer, Rex"]}))

    copied = score("OPI Nail Lacquer, Rex")  # 95 similar to the truth, but it is the record the prompt showed
    assert copied["similarity"] == pytest.approx(100 * (1 - 2 / 42)) and copied["copied"] == 1.0
    assert copied["recalled"] == 0.0
    right = score("OPI Nail Lacquer, Red")
    assert right["recalled"] == 1.0 and right["copied"] == 0.0
    # a model that repeats the last few-shot record: every answer a copy, nothing recalled on either set
    m, _ = probe(tmp_path, ["method=id_to_title", "limit=20"],
                    ScriptedBackend(lambda req: req.messages[-2][1]))
    assert m["metrics"]["copied"]["mean"] == 1.0 and m["metrics"]["recalled"]["mean"] == 0.0


def test_the_report_shows_the_probe_verdict_the_terminal_prints(tmp_path):
    """The report's contrast table: Wilson rates, the Newcombe difference, Fisher p and the verdict, the same numbers as
    metrics.json extra.memorization (which the terminal prints)."""
    from recbench.report.writer import build_report, table_markdown

    m, _ = probe(tmp_path, ["method=id_to_title", "limit=20"], PlantedMemory(bundled_items()))
    report = build_report([tmp_path / "run"])
    section = next(s for s in report.sections if s.id == "memorization")
    table = next(t for t in section.tables if t.id == "memorization-contrast")
    (_, cells), = table.rows
    d = m["extra"]["memorization"]["difference"]
    assert cells[0].mean == 1.0 and (cells[0].ci_low, cells[0].ci_high) == pytest.approx((0.722, 1.0), abs=5e-4)
    assert cells[1].mean == 0.0 and cells[1].ci_high > 0  # Wilson, not a bootstrap [0, 0]
    assert (cells[2].mean, cells[2].ci_low, cells[2].ci_high) == (d["estimate"], d["ci_low"], d["ci_high"])
    assert cells[3].text == f"{d['p_value']:.3g}" and cells[4].text == "FLAGGED"
    assert "Fisher p (one-sided)" in table_markdown(table)
