"""The valid values of the explanation-judging task and method keys (conf/task/explanation_judging.yaml,
conf/method/explanation_judging/*.yaml), checked before anything is loaded or written."""
from __future__ import annotations

from recbench.api.config import flag, list_of, number, one_of, text, whole

#: the four aspects the users rated, in the paper's order (each a column of the ratings file)
ASPECTS = ("persuasiveness", "transparency", "satisfaction", "interest_accuracy")

TASK = {
    "name": text(),
    "dataset": text(),
    "data_dir": text(),
    "file": text(),
    "aspects": list_of(one_of(*ASPECTS)),
    **{f"definitions.{a}": text() for a in ASPECTS},
    "fallback_rating": number(1, 5),
    "template": text(),
    "system_template": text(),
    "max_tokens": whole(1),
}

JUDGE_SCORE = {"max_tokens": whole(1, null=True), "constrained": flag()}
CONSTANT = {"score": number(1, 5)}
RANDOM = {"seed": whole(null=True)}
