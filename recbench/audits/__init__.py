"""The validity audits (docs/validity.md), declared by key without importing them (recbench.api.audits: one
Registry; an audit module registers itself when imported, its blocks with it).

Reading a metrics.json imports only the block modules of the keys it holds; a run imports every audit. A new audit is
one module here (its blocks beside it), one line of this table, and its test.
"""
from __future__ import annotations

import recbench.api.audits as _audits

#: audit key -> where its registered instance lives, its metrics.json blocks -> their typed records, and the config
#: keys that switch it on (a run imports only the audits its config switches on; () = every run: the order audit's
#: pair consistency is read from any record that carries comparisons asked in both orders)
TABLE: dict[str, tuple[str, dict[str, str], tuple[str, ...]]] = {
    "order_audit": ("recbench.audits.order:AUDIT",
                    {"order_audit": "recbench.audits.order_blocks:OrderBlock",
                     "pair_order_consistency": "recbench.audits.order_blocks:PairOrderBlock"}, ()),
    "template_audit": ("recbench.audits.templates:AUDIT",
                       {"template_audit": "recbench.audits.template_blocks:TemplateBlock"}, ("audit.templates",)),
    "noise_floor": ("recbench.audits.noise:AUDIT", {"noise_floor": "recbench.audits.noise_blocks:NoiseBlock"},
                    ("audit.noise.batch_size", "audit.noise.dtype")),
    "contamination": ("recbench.audits.contamination:AUDIT",
                      {"contamination": "recbench.audits.contamination_blocks:ContaminationBlock"},
                      ("contamination.probe_run",)),
    "judge_validity": ("recbench.audits.judge_validity:AUDIT",
                       {"judge_validity": "recbench.audits.judge_validity_blocks:JudgeValidityBlock"},
                       ("judge.name",)),
    "seed_audit": ("recbench.audits.seeds:AUDIT", {"seed_audit": "recbench.audits.seed_blocks:SeedBlock"},
                   ("audit.seeds",)),
}

for _key, (_where, _blocks, _switches) in TABLE.items():
    _audits.declare(_key, _where, _blocks, _switches)
