"""The valid values of the memorization task and probe keys (conf/task/memorization*.yaml,
conf/method/memorization/*.yaml), checked before anything is loaded: each violation is one line naming the key."""
from __future__ import annotations

from recbench.api.config import number, one_of, text, whole
from recbench.tasks.memorization.catalogue import READERS
from recbench.tasks.memorization.matching import SCORERS

TASK = {
    "name": text(),
    "data.format": one_of(*READERS),
    "data.path": text(),
    "data.id_field": text(),
    "data.name": text(),
    "data.key_name": text(),
    "seed": whole(),
    "control.n": whole(1),
    "match.scorer": one_of(*SCORERS),
    "match.threshold": number(above=0, hi=100),
    "match.max_chars": whole(1),
    "stats.alpha": number(above=0, hi=0.5),
}

_PROMPT = {"max_tokens": whole(1), "system_template": text(), "query_template": text()}

LOOKUP = {**_PROMPT, "few_shot": whole(0), "answer_template": text()}
PREFIX = {**_PROMPT, "few_shot": whole(0), "prefix_fraction": number(above=0, hi=1)}
HISTORY = {**_PROMPT, "history_len": whole(1)}
LIKELIHOOD = {**LOOKUP, "n_choices": whole(2)}
