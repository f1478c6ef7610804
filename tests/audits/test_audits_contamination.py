"""Contamination split (contamination.probe_run=DIR) on real run dirs: a memorization probe run by a planted double
that remembers a seeded 30% of the bundled catalogue, then a PerRecBench listwise (and an LLMRec sequential) run by
the same double whose answers are right exactly on the examples whose item it remembers. The split shows the planted
gap (metrics.json breakdown `recalled`, extra.contamination, the terminal line, compare slices, the report table) and
the permutation test detects it; with no relation the test flags about 5% of seeds (checked against scipy and by
exact enumeration). Refusals: no probe run, not a probe, another model, another catalogue, a changed probe."""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from scipy import stats

from recbench.api.errors import ConfigError
from recbench.api.types import Response
from recbench.audits.contamination import (
    gap_test,
    label,
    norm_title,
    read_probe,
    same_title,
)
from recbench.run.construct import build_task, bundled_data
from recbench.run.evaluate import run_from_config
from recbench.tasks.memorization.catalogue import read_catalogue
from recbench.testing.planted import PlantedMemory, planted
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast
SHARE = 0.3


def _unit(*parts: object) -> float:
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2 ** 64


class Recaller(PlantedMemory):
    """The probe's planted double (its identity: the memory), which also answers benchmark prompts from `answers`
    (example id, or the prompt's last user message -> answer text): one model that remembers some items and does
    well exactly where it is told to."""

    def __init__(self, memory, answers=None, **kw):
        super().__init__(memory, **kw)
        self.answers = dict(answers or {})

    def _answer(self, req):
        text = self.answers.get(req.example_id) or self.answers.get(req.messages[-1][1])
        if text is not None:
            return Response(text=text, prompt_tokens=10, completion_tokens=5)
        return super()._answer(req)


def _cfg(root: Path, *overrides: str):
    return compose_cfg([*overrides, "run.progress=false", f"cache.path={root / 'cache.sqlite'}",
                        f"cache.derived_dir={root / 'derived'}"])


def probe(root: Path, memory: dict, *overrides: str, name: str = "probe", task: str = "memorization_bundled") -> Path:
    """A probe run dir (method id_to_title) by a double remembering `memory`."""
    run_from_config(_cfg(root, f"task={task}", "method=id_to_title", *overrides), root / name, backend=Recaller(memory))
    return root / name


def perrec_examples():
    cfg = compose_cfg(["method=listwise"])
    return build_task(cfg).load()


def perrec_answers(good: Callable) -> dict[str, str]:
    """Listwise answers keyed by the prompt the method sends (listwise requests carry no example id): the true order
    where good(example), else a blind order (a hash of the group)."""
    from recbench.tasks.perrec.data import true_order
    from recbench.tasks.perrec.methods import presentation_order

    cfg = compose_cfg(["method=listwise"])
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    out = {}
    for e in task.load():
        users = presentation_order(e, 0)
        prompt, labels = method.prompt(e, users, {})
        shown = {u["user_id"]: lab for u, lab in zip(users, labels)}
        gold = [shown[u] for u in true_order(e.data["users"])]
        ranking = gold if good(e) else sorted(gold, key=lambda lab: _unit("blind", e.id, lab))
        assert prompt not in out, "two groups with one prompt"
        out[prompt] = json.dumps({"ranking": ranking})
    return out


def perrec_run(root: Path, memory: dict, good: Callable, *overrides: str, probe_dir: Path, name: str = "perrec"):
    """A PerRecBench listwise run split by the probe, by the double remembering `memory` (its own cache file)."""
    cfg = _cfg(root / name, "method=listwise", f"contamination.probe_run={probe_dir}", *overrides)
    m = run_from_config(cfg, root / name, backend=Recaller(memory, perrec_answers(good))).to_dict()
    recs = [json.loads(x) for x in (root / name / "samples.jsonl").read_text().splitlines()]
    return m, recs


def items() -> dict[str, str]:
    return read_catalogue("perrec_sample", bundled_data("perrec_sample"), "item_id").items


@pytest.fixture(scope="module")
def planted_probe(tmp_path_factory):
    """(root, memory, probe dir): the whole bundled catalogue probed (240 real + 240 control items)."""
    root = tmp_path_factory.mktemp("contamination")
    memory = planted(items(), SHARE, seed=0)
    return root, memory, probe(root, memory)


# ---- the rule and the statistics, on their own --------------------------------------------------------------------
def test_label_rule_and_control_items(tmp_path):
    from recbench.audits.contamination import ProbeRecall

    p = ProbeRecall(dir=tmp_path, task="t", method="m", model="x", identity=None, data=None,
                    recalled={"a": True, "b": False})
    assert label({"a": None}, p) == "yes" and label({"b": None}, p) == "no" and label({"c": None}, p) == "unprobed"
    assert label({"b": None, "c": None}, p) == "unprobed" and label({"a": None, "c": None}, p) == "yes"
    assert label({"b": None, "a": None}, p) == "yes"


def test_titles_agree_across_formatting_but_not_across_catalogues():
    assert norm_title("  Caf&eacute;   Society\u2026") == "café society"
    assert same_title("Toy Story (1995)", "Toy Story", 90)  # a title without its year
    assert same_title("Belle Rose Lacquer, Nail Polish No. 1 with a very long na…", "Belle Rose Lacquer, Nail Polish "
                      "No. 1 with a very long name indeed", 90)  # clipped
    assert not same_title("Toy Story (1995)", "GoldenEye (1995)", 90)  # ML-1M id 1 vs another catalogue's id 1


def test_gap_test_equals_scipy_and_exact_enumeration():
    rng = np.random.default_rng(5)
    x, y = rng.normal(0.4, 1, 30), rng.normal(0.0, 1, 70)
    g = gap_test(x, y, n_resamples=999, alpha=0.05, seed=3, level=0.95, n_boot=500)
    r = np.random.default_rng(3)
    ref = stats.permutation_test((x, y), lambda a, b, axis: a.mean(axis) - b.mean(axis), vectorized=True,
                                 n_resamples=999, random_state=r)
    ci = stats.bootstrap((x, y), lambda a, b, axis: a.mean(axis) - b.mean(axis), vectorized=True, n_resamples=500,
                         method="percentile", random_state=r).confidence_interval
    assert g["p_value"] == pytest.approx(ref.pvalue) and g["diff"] == pytest.approx(x.mean() - y.mean())
    assert (g["ci_low"], g["ci_high"]) == pytest.approx((ci.low, ci.high)) and g["exact"] is False
    # small groups: every relabelling enumerated (C(7, 3) = 35 <= n_resamples): p by hand
    x, y = np.array([1.0, 1.0, 0.5]), np.array([0.0, -1.0, 0.0, 1.0])
    obs = x.mean() - y.mean()
    pooled = np.concatenate([x, y])
    diffs = [pooled[list(c)].mean() - np.delete(pooled, list(c)).mean() for c in itertools.combinations(range(7), 3)]
    hand = min(1.0, 2 * min(np.mean([d >= obs - 1e-12 for d in diffs]), np.mean([d <= obs + 1e-12 for d in diffs])))
    g = gap_test(x, y, n_resamples=999, alpha=0.05, seed=0, level=0.95, n_boot=200)
    assert g["exact"] is True and g["p_value"] == pytest.approx(hand)
    assert gap_test([1.0], [0.0, 1.0], n_resamples=999, alpha=0.05, seed=0, level=0.95, n_boot=10)["p_value"] is None


def _tau_pool() -> dict[int, np.ndarray]:
    """Kendall tau of every ranking of k users against the truth (a blind answer's PTC distribution), k = 2..4."""
    return {k: np.array([stats.kendalltau(range(k), p).statistic for p in itertools.permutations(range(k))])
            for k in (2, 3, 4)}


def test_false_positive_rate_over_seeds_is_at_most_five_percent():
    """No relation: each group's PTC is a blind answer's (drawn from the exact tau distribution of its size), the
    recalled labels come from a seeded 30% of the catalogue over the bundled groups' query items (101 distinct
    items for 120 groups): over 200 seeds the gap test flags about 5% (measured: 10 of 200). The documented double (recalled groups
    answered right with probability 0.5, the others blind) is detected in at least 80% of seeds (measured: 171 of
    200). 199 label permutations per test: p resolves 1/200, enough at alpha 0.05."""
    groups = [json.loads(x) for x in (Path(bundled_data("perrec_sample")) / "groups.jsonl").read_text().splitlines()]
    sizes = np.array([len(g["users"]) for g in groups])
    catalogue = items()
    pool = _tau_pool()
    flagged = detected = 0
    seeds = range(200)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        memory = planted(catalogue, SHARE, seed)
        yes = np.array([g["query_item"] in memory for g in groups])
        blind = np.array([rng.choice(pool[k]) for k in sizes])
        g = gap_test(blind[yes], blind[~yes], n_resamples=199, alpha=0.05, seed=seed, level=0.95, n_boot=0)
        flagged += g["significant"]
        right = yes & (rng.random(len(groups)) < 0.5)
        g = gap_test(np.where(right, 1.0, blind)[yes], blind[~yes], n_resamples=199, alpha=0.05, seed=seed,
                     level=0.95, n_boot=0)
        detected += g["significant"]
    assert flagged / len(seeds) <= 0.075, flagged  # 5% expected; binomial sd 1.5 points at 200 seeds
    assert detected / len(seeds) >= 0.8, detected


# ---- end to end: PerRecBench listwise ------------------------------------------------------------------------------
@pytest.mark.full  # a probe of 480 items and a 120-group run through the loop (seconds)
def test_planted_gap_shows_in_every_output(planted_probe, capsys):
    root, memory, probe_dir = planted_probe
    m, recs = perrec_run(root, memory, lambda e: e.data["query_item"] in memory, probe_dir=probe_dir)
    want = {e.id: "yes" if e.data["query_item"] in memory else "no" for e in perrec_examples()}
    assert {r["id"]: r["meta"]["recalled"] for r in recs} == want  # every example probed: no 'unprobed'
    n_yes = sum(v == "yes" for v in want.values())
    ptc = {r["id"]: r["metrics"]["ptc"] for r in recs}
    assert all(ptc[i] == 1.0 for i, v in want.items() if v == "yes")
    br = m["breakdown"]["recalled"]
    assert list(br) == ["yes", "no"] and br["yes"]["n"] == n_yes and br["no"]["n"] == 120 - n_yes
    b = m["extra"]["contamination"]
    clean = [ptc[i] for i, v in want.items() if v == "no"]
    assert b["examples"] == {"yes": n_yes, "no": 120 - n_yes, "unprobed": 0}
    assert b["clean"] == br["no"]["metrics"]["ptc"] and b["clean"]["mean"] == pytest.approx(np.mean(clean))
    assert b["recalled"]["mean"] == 1.0 and b["gap"]["diff"] == pytest.approx(1.0 - np.mean(clean))
    assert b["gap"]["significant"] and b["gap"]["p_value"] < 1e-3 and b["gap"]["ci_low"] > 0.5
    assert b["probe"]["items_recalled"] == 72 and b["probe"]["items_asked"] == 240 and b["probe"]["coverage"] == 0.3
    assert b["probe"]["control_recalled"] == 0 and b["probe_model"] == m["model"] and b["direction"] == "higher"
    from recbench.cli.summary import print_summary
    from recbench.store.schema import RunResult

    print_summary(RunResult.from_dict(m))
    out = " ".join(capsys.readouterr().out.split())
    assert "recalled=yes" in out and "recalled=no" in out
    assert (f"contamination split (probe id_to_title, memorization_bundled): recalled {n_yes} | not recalled "
            f"{120 - n_yes} | unprobed 0 examples; ptc recalled 1.000") in out and "SIGNIFICANT at alpha 0.05" in out


@pytest.mark.full
def test_no_relation_is_not_flagged_end_to_end(planted_probe):
    """The double is right on a hashed 30% of groups, whatever it remembers: 20 seeds (each its own cache)."""
    root, memory, probe_dir = planted_probe
    flags = []
    for seed in range(20):
        m, _ = perrec_run(root, memory, lambda e, s=seed: _unit("null", s, e.id) < SHARE, probe_dir=probe_dir,
                          name=f"null{seed}")
        flags.append(m["extra"]["contamination"]["gap"]["significant"])
    assert sum(flags) <= 2, flags  # 1 expected at alpha 0.05


@pytest.mark.full
def test_compare_and_report_show_the_split(planted_probe, tmp_path):
    from recbench.report.writer import build_report
    from recbench.stats.verdicts import compare_runs

    root, memory, probe_dir = planted_probe
    perrec_run(root, memory, lambda e: e.data["query_item"] in memory, probe_dir=probe_dir, name="cmp/a")
    # a model-free reference row split by the same probe (no model check: the control for item easiness)
    cfg = _cfg(root / "cmp", "method=random", f"contamination.probe_run={probe_dir}")
    ref = run_from_config(cfg, root / "cmp" / "b").to_dict()
    assert ref["model"] == "none" and "recalled" in ref["breakdown"]
    recs = compare_runs([root / "cmp" / "a", root / "cmp" / "b"], metrics=["ptc"])
    slices = {c.slice: c for c in recs}
    assert {"recalled=yes", "recalled=no"} <= set(slices)
    assert slices["recalled=yes"].mean_a == 1.0 and slices["recalled=yes"].significant
    rep = build_report([root / "cmp"])
    t = next(t for t in rep.audit_tables if t.id == "contamination")
    assert len(t.rows) == 2
    a = json.loads((root / "cmp" / "a" / "metrics.json").read_text())["extra"]["contamination"]
    row = next(cells for labels, cells in t.rows if labels[2].startswith("listwise"))
    assert row[2].mean == a["examples"]["yes"] and row[6].mean == pytest.approx(a["clean"]["mean"])
    assert row[7].mean == pytest.approx(a["gap"]["diff"]) and row[9].shown == "yes"
    section = next(s for s in rep.sections if t in s.tables)  # its own heading, not the template/noise audits'
    assert (section.id, section.title) == ("contamination", "Contamination split")


def test_unprobed_examples_are_said_so(tmp_path):
    """A probe of 60 real (and 60 control) items: groups about other items are `unprobed`, not `no` (a model-free
    reference row: split by the probe model's recall, with no model to check)."""
    memory = planted(items(), SHARE, seed=1)
    probe_dir = probe(tmp_path, memory, "limit=120")
    asked = {r["meta"]["item_id"] for r in map(json.loads, (probe_dir / "samples.jsonl").read_text().splitlines())
             if r["meta"]["set"] == "real"}
    m = run_from_config(_cfg(tmp_path, "method=random", "limit=30", f"contamination.probe_run={probe_dir}"),
                        tmp_path / "random").to_dict()
    recs = [json.loads(x) for x in (tmp_path / "random" / "samples.jsonl").read_text().splitlines()]
    query = {e.id: e.data["query_item"] for e in perrec_examples()}
    for r in recs:
        q = query[r["id"]]
        want = "unprobed" if q not in asked else "yes" if q in memory else "no"
        assert r["meta"]["recalled"] == want
    n = m["extra"]["contamination"]["examples"]
    assert n["unprobed"] == sum(r["meta"]["recalled"] == "unprobed" for r in recs) > 0
    assert sum(n.values()) == 30 and list(m["breakdown"]["recalled"]) == [v for v in ("yes", "no", "unprobed") if n[v]]
    assert m["extra"]["contamination"]["clean"]["n"] == n["no"]


# ---- end to end: LLMRec sequential ---------------------------------------------------------------------------------
@pytest.mark.full
def test_llmrec_sequential_split_on_the_target_item(tmp_path):
    p5 = bundled_data("llmrec_sample/p5")
    catalogue = read_catalogue("p5", p5, "p5_item_id").items
    memory = planted(catalogue, SHARE, seed=2)
    # the P5 split keys items by p5_item_id; a probe keyed by ASIN shares no id with it and is refused
    asin = probe(tmp_path, memory, name="asin", task="memorization_bundled_llmrec")  # the same model
    probe_dir = probe(tmp_path, memory, "task.data.id_field=p5_item_id", task="memorization_bundled_llmrec")
    task = build_task(compose_cfg(["task=llmrec_sequential", "method=zero_shot"]))
    answers = {}
    for e in task.load():
        t, cands = e.data["target"], [c for c in e.data["candidates"] if c != e.data["target"]]
        answers[e.id] = "[" + ", ".join([t, *cands[:9]] if t in memory else cands[:10]) + "]"

    def run(probe_run, name):
        cfg = _cfg(tmp_path / name, "task=llmrec_sequential", "method=zero_shot", "method.constrained=false",
                   "limit=100", f"contamination.probe_run={probe_run}")
        return run_from_config(cfg, tmp_path / name, backend=Recaller(memory, answers)).to_dict()

    with pytest.raises(ConfigError, match=r"asked about none of the .* items .*keyed like 'SYN"):
        run(asin, "refused")
    m = run(probe_dir, "seq")
    b, br = m["extra"]["contamination"], m["breakdown"]["recalled"]
    assert br["yes"]["metrics"]["ndcg@10"]["mean"] == 1.0 and br["no"]["metrics"]["ndcg@10"]["mean"] == 0.0
    assert b["metric"] == "ndcg@10" and b["examples"]["yes"] == br["yes"]["n"] > 10 and b["gap"]["significant"]
    assert b["clean"]["mean"] == 0.0 and b["gap"]["diff"] == 1.0


# ---- refusals: one line naming both sides -------------------------------------------------------------------------
@pytest.mark.full  # three probe and benchmark runs
def test_refusals_name_the_probe_and_the_fix(tmp_path):
    memory = planted(items(), SHARE, seed=3)
    with pytest.raises(ConfigError, match=r"contamination.probe_run=.*nowhere: no finished probe run there .*the probe "
                                          r"is not run for you, run it first: python -m recbench task=<probe task of "
                                          r"this data: .*memorization_bundled.*> model=smollm2 method=id_to_title"):
        perrec_run(tmp_path, memory, lambda e: True, "limit=3", probe_dir=tmp_path / "nowhere", name="a")
    run_from_config(_cfg(tmp_path, "method=random", "limit=3"), tmp_path / "b")  # a run, but not a probe
    with pytest.raises(ConfigError, match=r"is a run of task perrec, not a memorization probe"):
        perrec_run(tmp_path, memory, lambda e: True, "limit=3", probe_dir=tmp_path / "b", name="c")
    probe_dir = probe(tmp_path, memory, "limit=20")
    other = planted(items(), SHARE, seed=4)  # another model: another memory, another identity
    with pytest.raises(ConfigError, match=r"the probe run is of model smollm2, this run of model smollm2 \(memory "):
        perrec_run(tmp_path, other, lambda e: True, "limit=3", probe_dir=probe_dir, name="d")
    assert not (tmp_path / "d").exists()  # refused before the run dir was written


@pytest.mark.full  # the whole catalogue probed (the module's planted probe)
def test_plan_mode_checks_the_probe_as_the_run_does(planted_probe, tmp_path):
    from recbench.run.plan import plan_from_config

    with pytest.raises(ConfigError, match=r"contamination.probe_run=.*nowhere: no finished probe run there"):
        plan_from_config(_cfg(tmp_path, "mode=plan", "method=listwise", "limit=3",
                              f"contamination.probe_run={tmp_path / 'nowhere'}"), tmp_path / "r" / "m" / "p1")
    probe_dir = planted_probe[2]
    p = plan_from_config(_cfg(tmp_path, "mode=plan", "method=random", "limit=3", f"contamination.probe_run={probe_dir}"),
                         tmp_path / "r" / "m" / "p2")  # a runs root of its own (the power step reads it)
    assert p.examples == 3 and p.model == "none"
    assert not (tmp_path / "r").exists()  # plan mode writes no run dir


def test_another_catalogue_with_the_same_ids_is_refused(tmp_path):
    """Same item ids, other titles (as ML-1M ids against ml-100k ids): the titles give it away. Here each id takes
    the title of the item 7 places on (the same vocabulary, so the control set can still be spliced from it)."""
    import shutil

    data = tmp_path / "other"
    shutil.copytree(bundled_data("perrec_sample"), data)
    rows = [json.loads(x) for x in (data / "items.jsonl").read_text().splitlines()]
    (data / "items.jsonl").write_text("".join(json.dumps({**r, "title": rows[(k + 7) % len(rows)]["title"]}) + "\n"
                                              for k, r in enumerate(rows)))
    memory = planted(items(), SHARE, seed=3)
    probe_dir = probe(tmp_path, memory, f"task.data.path={data}")
    with pytest.raises(ConfigError, match=r"item 'i\d+' is '.*' in this task but '.*' in the probe's catalogue \(task "
                                          r"memorization_bundled: perrec_sample at .*other, items keyed by item_id; "
                                          r"\d+ of \d+ shared items differ\)"):
        perrec_run(tmp_path, memory, lambda e: True, "limit=6", probe_dir=probe_dir)


@pytest.mark.full  # two probes and two benchmark runs
def test_control_items_never_count_and_a_changed_probe_is_refused(tmp_path):
    memory = planted(items(), SHARE, seed=5)
    probe_dir = probe(tmp_path, memory, "limit=120")
    lines = [json.loads(x) for x in (probe_dir / "samples.jsonl").read_text().splitlines()]
    real = next(r for r in lines if r["meta"]["set"] == "real" and not r["metrics"]["recalled"])
    control = next(r for r in lines if r["meta"]["set"] == "control")
    # a control sample "recalled" under a real item's id: the item stays not recalled
    doctored = [{**r, "meta": {**r["meta"], "item_id": real["meta"]["item_id"]}, "metrics": {**r["metrics"],
                 "recalled": 1.0}} if r is control else r for r in lines]
    (probe_dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in doctored))
    p = read_probe(str(probe_dir), "smollm2")
    assert p.recalled[real["meta"]["item_id"]] is False and p.control == (1, 60)
    assert sum(p.recalled.values()) == sum(r["metrics"]["recalled"] for r in lines if r["meta"]["set"] == "real")
    perrec_run(tmp_path, memory, lambda e: True, "limit=30", probe_dir=probe_dir)
    # the probe asked again with more items: finished examples' labels would change
    import shutil

    shutil.rmtree(probe_dir)
    probe(tmp_path, memory)
    with pytest.raises(ConfigError, match=r"samples.jsonl: \d+ finished example\(s\) were split by another state of "
                                          r"the probe run .*recalled=unprobed there, (yes|no) now\): delete"):
        perrec_run(tmp_path, memory, lambda e: True, "limit=30", probe_dir=probe_dir)


def test_bad_settings_are_one_line(tmp_path):
    from recbench.api.config import validate

    with pytest.raises(ConfigError, match=r"contamination.alpha=0.7: must be in \(0, 0.5\]"):
        validate(compose_cfg(["contamination.alpha=0.7"]))
    with pytest.raises(ConfigError, match=r"contamination.n_resamples=10: must be a whole number >= 99"):
        validate(compose_cfg(["contamination.n_resamples=10"]))
    cfg = copy.deepcopy(_cfg(tmp_path, "task=recbench_plus", "method=popular_match", "limit=2",
                             f"contamination.probe_run={tmp_path}"))
    with pytest.raises(ConfigError, match=r"task recbench_plus declares no item an example is about "
                                          r"\(RecBenchPlusTask.contamination_items\)"):
        run_from_config(cfg, tmp_path / "rp")


@pytest.mark.full  # a subprocess of the app
def test_cli_refusal_is_one_line_exit_2(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs")}
    p = subprocess.run([sys.executable, "-m", "recbench", "method=random", "limit=2",
                        f"contamination.probe_run={tmp_path / 'none'}"], capture_output=True, text=True, env=env,
                       check=False)
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("recbench: config error: contamination.probe_run=")
    assert "run it first: python -m recbench task=<probe task of this data" in lines[0]
