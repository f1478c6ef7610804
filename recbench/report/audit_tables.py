"""Audits in reports: one row per run whose metrics.json extra has `order_audit` (audit.orders=K) or
`pair_order_consistency` (comparisons asked in both orders), `template_audit` (audit.templates=K; plus one row per
pair of such runs: the verdict under each template), `noise_floor` (audit.noise) or `contamination`
(contamination.probe_run). Benchmark-agnostic: reads metrics.json (and, for the per-template verdicts, the runs'
samples).

Long because every audit's report table is declared here, one function each, sharing the cell, label and row-order
helpers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from recbench.report.collect import Run, variant_labels
from recbench.report.numbers import fmt, number
from recbench.report.tables import Cell, Table, _header, method_label

#: first-slot share columns shown one by one; slots beyond are summed into one derived column
MAX_SLOTS = 10


@dataclass
class AuditCell(Cell):
    """A cell with its own number format: 'int' (counts), 'p' (p-values, 3 significant digits) or decimals."""

    style: str = "3"

    @property
    def text(self) -> str:
        """The displayed value."""
        if self.shown is not None or not self.has_value:
            return super().text
        if self.style == "int":
            return str(int(round(self.mean)))
        if self.style == "p":
            return p_text(self.mean)
        return fmt(self.mean, int(self.style))


def p_text(p: float) -> str:
    """A p-value as shown: 3 significant digits ('0.0123', '4.56e-07')."""
    return f"{p:.3g}"


def _cell(metric: str, v: Any, style: str = "3") -> AuditCell:
    return AuditCell(metric=metric, mean=number(v), style=style)


def _row_labels(runs: list[Run]) -> dict[int, list[str]]:
    """Row labels per run: task, model, method [variant], plus the seed when one configuration has several."""
    labels = variant_labels(runs)
    seeds: dict[tuple, set] = {}
    for r in runs:
        seeds.setdefault((r.task, r.model, r.method, labels[id(r)]), set()).add(str(r.seed))
    out = {}
    for r in runs:
        method = method_label(r.method, labels[id(r)])
        if len(seeds[(r.task, r.model, r.method, labels[id(r)])]) > 1:
            method += f" seed={r.seed}"
        out[id(r)] = [r.task, r.model, method]
    return out


def _sorted(runs: list[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (r.task, r.model, r.method, str(r.dir)))


def order_audit_table(runs: list[Run]) -> Optional[Table]:
    """One row per audited run: K, the headline per order, mean and sd over orders, the averaged score, Kendall's W
    (n), first-slot shares with the chi-square test against uniform. None when no run has extra.order_audit."""
    audited = _sorted([r for r in runs if isinstance(r.result.extra.get("order_audit"), dict)])
    if not audited:
        return None
    labels = _row_labels(audited)
    blocks = [r.result.extra["order_audit"] for r in audited]
    k_max = max(len(b.get("per_order") or []) for b in blocks)
    slots = max(len((b.get("first_slot") or {}).get("share") or []) for b in blocks)
    shown_slots = min(slots, MAX_SLOTS)
    cols: list[tuple[str, str]] = [("", "K")] + [("headline per display order", f"order {j}") for j in range(k_max)]
    cols += [("over orders", "mean"), ("over orders", "sd"), ("over orders", "averaged"),
             ("Kendall's W", "W"), ("Kendall's W", "n")]
    cols += [("first-ranked display slot", f"slot {s + 1}") for s in range(shown_slots)]
    if slots > MAX_SLOTS:
        cols.append(("first-ranked display slot", f"slots {MAX_SLOTS + 1}+"))
    cols += [("first-ranked display slot", "n"), ("first-ranked display slot", "chi2"),
             ("first-ranked display slot", "p")]
    rows = []
    for r, b in zip(audited, blocks):
        metric = str(b.get("metric") or r.result.headline_metric)
        per = list(b.get("per_order") or [])
        fs = b.get("first_slot") or {}
        share = list(fs.get("share") or [])
        cells = [_cell("orders", b.get("orders"), "int")]
        cells += [_cell(metric, per[j] if j < len(per) else None) for j in range(k_max)]
        cells += [_cell(metric, b.get("mean_over_orders")), _cell(metric, b.get("sd_over_orders")),
                  _cell(metric, b.get("averaged_over_orders")),
                  _cell("kendalls_w", b.get("kendalls_w_mean")), _cell("kendalls_w_n", b.get("kendalls_w_n"), "int")]
        cells += [_cell("first_slot_share", share[s] if s < len(share) else None) for s in range(shown_slots)]
        if slots > MAX_SLOTS:
            rest = share[MAX_SLOTS:]
            cells.append(_cell("first_slot_share", sum(rest) if rest else None))
        cells += [_cell("first_slot_n", fs.get("n"), "int"), _cell("chi2", fs.get("chi2"), "2"),
                  _cell("p_value", fs.get("p_value"), "p")]
        rows.append((labels[id(r)] + [metric], cells))
    caption = ("Order audit (audit.orders=K; metrics.json extra.order_audit): each example asked in K display orders "
               "(order 0 = the plain run, so its value is the headline). 'over orders': mean and sample sd of the K "
               "per-order means, and the per-example mean over orders averaged over examples (the order-robust "
               "score). Kendall's W: agreement of the K rankings of an example, averaged over the n examples whose K "
               "answers all parsed (1 = the same ranking whatever the order). First-ranked display slot: share of "
               "answers (pooled over orders) that put the item shown in that slot first; chi-square against the "
               "uniform expectation for the mix of group sizes. The K answers to one example are not independent: "
               "read p as descriptive.")
    if slots > MAX_SLOTS:
        caption += f" Slots beyond {MAX_SLOTS} are summed into one column."
    return Table(id="order-audit", title="Order audit: score, agreement and first slot across display orders",
                 caption=caption, row_header=["task", "model", "method", "metric"], header=_header(cols),
                 columns=cols, rows=rows, section="order-audit")


def pair_consistency_table(runs: list[Run]) -> Optional[Table]:
    """One row per run whose comparisons were asked in both orders: n, consistent and inconsistent shares, and which
    slot won the inconsistent ones. None when no run has extra.pair_order_consistency."""
    paired = _sorted([r for r in runs if isinstance(r.result.extra.get("pair_order_consistency"), dict)])
    if not paired:
        return None
    labels = _row_labels(paired)
    cols = [("", "n"), ("share of comparisons", "consistent"), ("share of comparisons", "inconsistent"),
            ("inconsistent ones won by", "slot 1 (primacy)"), ("inconsistent ones won by", "slot 2 (recency)")]
    rows = []
    for r in paired:
        b = r.result.extra["pair_order_consistency"]
        rows.append((labels[id(r)], [_cell("pairs", b.get("n"), "int"), _cell("consistent", b.get("consistent")),
                                      _cell("inconsistent", b.get("inconsistent")),
                                      _cell("first_slot_wins", b.get("first_slot_wins_inconsistent")),
                                      _cell("second_slot_wins", b.get("second_slot_wins_inconsistent"))]))
    caption = ("Pairwise order consistency (metrics.json extra.pair_order_consistency): every comparison asked in "
               "both orders (A,B) and (B,A); n = comparisons whose two answers parsed. Consistent: the same item won "
               "in both orders. Among the inconsistent ones, the share won by the slot shown first both times (a "
               "primacy bias) or second both times (a recency bias). A dash: no inconsistent comparison.")
    return Table(id="pair-order-consistency", title="Pairwise order consistency", caption=caption,
                 row_header=["task", "model", "method"], header=_header(cols), columns=cols, rows=rows,
                 section="order-audit")


def _ci_cell(metric: str, block: Any, style: str = "3") -> AuditCell:
    """A value with its CI from a {'mean' or 'share' or 'diff', 'ci_low', 'ci_high', 'n'} block."""
    b = block or {}
    v = b.get("mean", b.get("share", b.get("diff")))
    return AuditCell(metric=metric, mean=number(v), ci_low=number(b.get("ci_low")), ci_high=number(b.get("ci_high")),
                     n=b.get("n"), style=style)


#: variance sources of the template audit, in column order (recbench.stats.variance)
VARIANCE_SOURCES = (("example", "example"), ("template", "template"), ("example:template", "example × template"),
                    ("order(example)", "order (within example)"), ("residual", "residual"))


def template_audit_table(runs: list[Run]) -> Optional[Table]:
    """One row per template-audited run (extra.template_audit): the headline per template with its CI, the spread,
    the share of answers that differ from template 0's, the variance shares and the template-effect test."""
    audited = _sorted([r for r in runs if isinstance(r.result.extra.get("template_audit"), dict)])
    if not audited:
        return None
    labels = _row_labels(audited)
    blocks = [r.result.extra["template_audit"] for r in audited]
    k_max = max(int(b.get("templates") or 0) for b in blocks)
    cols: list[tuple[str, str]] = [("", "K")] + [("headline per template", f"t{j}") for j in range(k_max)]
    cols += [("over templates", "spread"), ("answer differs from t0", "any template")]
    cols += [("share of variance", label) for _, label in VARIANCE_SOURCES]
    cols += [("template effect", "p"), ("template effect", "detected")]
    rows = []
    for r, b in zip(audited, blocks):
        metric = str(b.get("metric") or r.result.headline_metric)
        per = list(b.get("per_template") or [])
        var = b.get("variance") or {}
        shares = var.get("shares") or {}
        eff = b.get("template_effect") or {}
        cells = [_cell("templates", b.get("templates"), "int")]
        cells += [_ci_cell(metric, per[j] if j < len(per) else None) for j in range(k_max)]
        cells += [_cell(metric, b.get("spread")), _cell("answer_changed", b.get("answer_changed_any"))]
        for key, _ in VARIANCE_SOURCES:
            c = _cell("variance_share", shares.get(key))
            if key == "template" and var.get("template_share_ci"):
                c.ci_low, c.ci_high = (number(x) for x in var["template_share_ci"])
            cells.append(c)
        cells += [_cell("p_value", eff.get("p_value"), "p"),
                  AuditCell(metric="detected", shown=("yes" if eff.get("detected") else "no") if eff else None)]
        rows.append((labels[id(r)] + [metric], cells))
    caption = ("Template audit (audit.templates=K; metrics.json extra.template_audit): each example asked with K "
               "paraphrased prompt templates that keep the answer format (t0 = the run's own template, so its value "
               "is the headline), each with its 95% bootstrap CI; spread = largest minus smallest template mean; "
               "'answer differs' = share of examples whose prediction under some template differs from t0's. Share of "
               "variance: a random-effects ANOVA of the per-example headline (method-of-moments components of example, "
               "template and, with audit.orders on too, example × template and display order within example; "
               "negative estimates set to 0; recbench/stats/variance.py), the template share with a 95% bootstrap CI "
               "over examples. Template effect: permutation test of the template means (template labels permuted "
               "within each example), detected when p < 0.05. A dash: not estimated (no orders audited).")
    return Table(id="template-audit", title="Template audit: score and variance across prompt templates",
                 caption=caption, row_header=["task", "model", "method", "metric"], header=_header(cols),
                 columns=cols, rows=rows, section="validity-audit")


def template_verdict_table(runs: list[Run]) -> Optional[Table]:
    """One row per pair of template-audited runs of one task (headline metric, all examples): the difference and
    verdict under each template, and whether the sign and the verdict are kept under every template."""
    from recbench.audits.templates import template_verdicts, verdict_kept
    from recbench.stats.verdicts import CompareError, load_systems

    audited = [r for r in runs if isinstance(r.result.extra.get("template_audit"), dict)]
    if len(audited) < 2:
        return None
    try:
        systems = load_systems([r.dir for r in audited], pool_seeds_=True)
    except CompareError:
        return None
    heads = {r.task: r.result.headline_metric for r in audited}
    recs = [c for task, metric in heads.items()
            for c in template_verdicts([s for s in systems if s.task == task], metrics=[metric])]
    if not recs:
        return None
    kept = verdict_kept(recs)
    by_dir = {str(r.dir.resolve()): f"{r.model} · {method_label(r.method, '')}" for r in audited}
    name = {s.label: by_dir.get(str(s.runs[0].dir.resolve()), s.label) for s in systems}
    k_max = max(r["templates"] for r in kept)
    cols: list[tuple[str, str]] = []
    for j in range(k_max):
        cols += [(f"template {j}", "diff (a − b)"), (f"template {j}", "verdict")]
    cols += [("under every template", "sign kept"), ("under every template", "verdict kept")]
    rows = []
    for r in kept:
        cells = []
        for j in range(k_max):
            v = r["verdict"][j] if j < len(r["verdict"]) else None
            if v is not None:
                v = {f"{r['run_a']} better": "a better", f"{r['run_b']} better": "b better"}.get(v, v)
            cells += [_cell(r["metric"], r["diff"][j] if j < len(r["diff"]) else None),
                      AuditCell(metric="verdict", shown=v)]
        cells += [AuditCell(metric="sign_kept", shown="yes" if r["sign_kept"] else "no"),
                  AuditCell(metric="verdict_kept", shown="yes" if r["verdict_kept"] else "no")]
        rows.append(([name.get(r["run_a"], r["run_a"]), name.get(r["run_b"], r["run_b"]), r["metric"]], cells))
    caption = ("Paired verdicts under each prompt template (runs asked with audit.templates=K): for every pair of "
               "template-audited runs of one task, the headline's paired comparison computed on the per-example "
               "values of each template (recbench.stats.verdicts.compare_pair; Holm within each family = one metric "
               "and template, over its pairs of runs); 'verdict kept' = the same verdict (which run is better, or n.s.) "
               "under every template as under template 0, 'sign kept' = the same sign of the difference. python -m "
               "recbench.compare <these runs> prints the same records.")
    return Table(id="template-verdicts", title="Verdicts under each prompt template", caption=caption,
                 row_header=["run a", "run b", "metric"], header=_header(cols), columns=cols, rows=rows,
                 section="validity-audit")


def noise_floor_table(runs: list[Run]) -> Optional[Table]:
    """One row per run with a noise-floor audit (extra.noise_floor): what was changed, the share of answers and
    predictions that changed, the headline's shift with its CI and p, and the noise floor."""
    audited = _sorted([r for r in runs if isinstance(r.result.extra.get("noise_floor"), dict)])
    if not audited:
        return None
    labels = _row_labels(audited)
    cols = [("re-decoded with", "settings"), ("re-decoded with", "run had"), ("", "examples"),
            ("changed by the re-decode", "answer text"), ("changed by the re-decode", "prediction"),
            ("headline shift (re-decode − run)", "diff"), ("headline shift (re-decode − run)", "p"),
            ("", "noise floor")]
    rows = []
    for r in audited:
        b = r.result.extra["noise_floor"]
        metric = str(b.get("metric") or r.result.headline_metric)
        head = (b.get("metrics") or {}).get(metric) or {}
        ref = b.get("reference") or {}
        cells = [AuditCell(metric="settings", shown=str(b.get("tag") or "")),
                 AuditCell(metric="reference", shown=",".join(f"{k}={v}" for k, v in ref.items()) or None),
                 _cell("examples", b.get("examples"), "int"),
                 _ci_cell("answers_changed", b.get("answers_changed")),
                 _ci_cell("predictions_changed", b.get("predictions_changed")),
                 _ci_cell(metric, head), _cell("p_value", head.get("p_value"), "p"),
                 _cell(metric, b.get("floor"))]
        rows.append((labels[id(r)] + [metric], cells))
    caption = ("Noise-floor audit (audit.noise.batch_size=B or audit.noise.dtype=D; metrics.json extra.noise_floor): "
               "the run's examples decoded again with another batch size (or dtype), under their own cache namespace "
               "so no answer comes from the run's cache entries. Answer text: share of examples whose raw answer to "
               "the same prompt changed; prediction: share whose scored answer changed (exact 95% CIs). Headline "
               "shift: mean per-example difference re-decode minus run, 95% paired bootstrap CI and sign-flip p. "
               "Noise floor = the larger end of that CI in absolute value: a difference between two runs smaller "
               "than the floor of either is marked ≈ in recbench.compare and in the paired comparisons below.")
    return Table(id="noise-floor", title="Noise floor: answers and headline under another batch size", caption=caption,
                 row_header=["task", "model", "method", "metric"], header=_header(cols), columns=cols, rows=rows,
                 section="validity-audit")


def contamination_table(runs: list[Run]) -> Optional[Table]:
    """One row per run split by a memorization probe (extra.contamination): the probe, the examples per split value,
    the headline on recalled examples and on the clean subset, and the gap with its permutation test."""
    split = _sorted([r for r in runs if isinstance(r.result.extra.get("contamination"), dict)])
    if not split:
        return None
    labels = _row_labels(split)
    cols = [("probe", "method"), ("probe", "coverage"), ("examples", "recalled"), ("examples", "not recalled"),
            ("examples", "unprobed"), ("headline", "recalled"), ("headline", "clean subset"),
            ("gap (recalled − clean)", "diff"), ("gap (recalled − clean)", "p"), ("gap (recalled − clean)", "significant")]
    rows = []
    for r in split:
        b = r.result.extra["contamination"]
        metric, n, g = str(b.get("metric") or r.result.headline_metric), b.get("examples") or {}, b.get("gap") or {}
        cells = [AuditCell(metric="probe", shown=f"{b.get('probe_method')} ({b.get('probe_task')})"),
                 _cell("coverage", (b.get("probe") or {}).get("coverage")),
                 _cell("examples", n.get("yes"), "int"), _cell("examples", n.get("no"), "int"),
                 _cell("examples", n.get("unprobed"), "int"),
                 _ci_cell(metric, b.get("recalled")), _ci_cell(metric, b.get("clean")), _ci_cell(metric, g),
                 _cell("p_value", g.get("p_value"), "p"),
                 AuditCell(metric="significant", shown=None if g.get("p_value") is None
                           else "yes" if g.get("significant") else "no")]
        rows.append((labels[id(r)] + [metric], cells))
    caption = ("Contamination split (contamination.probe_run=DIR; metrics.json extra.contamination): examples whose "
               "item (Task.contamination_items) a memorization probe run of the same model recalled, did not recall, "
               "or did not ask about (control-set items never count). Headline on each with its 95% bootstrap CI "
               "(the clean subset = not recalled; the same numbers as the breakdown 'recalled'); gap = recalled minus "
               "clean mean with a percentile bootstrap CI and a two-sided permutation test of the difference in "
               "means on per-example (per-cluster) values, significant when p < alpha. Unprobed examples are in "
               "neither group. Coverage: the probe's share of asked catalogue items recalled.")
    return Table(id="contamination", title="Contamination split: the headline on recalled and not-recalled items",
                 caption=caption, row_header=["task", "model", "method", "metric"], header=_header(cols),
                 columns=cols, rows=rows, section="validity-audit")


def audit_tables(runs: list[Run]) -> list[Table]:
    """The audit tables of a report (empty when no run was audited): order audits (section 'order-audit'), then the
    template, noise-floor and contamination audits (section 'validity-audit')."""
    return [t for t in (order_audit_table(runs), pair_consistency_table(runs), template_audit_table(runs),
                        template_verdict_table(runs), noise_floor_table(runs), contamination_table(runs))
            if t is not None]
