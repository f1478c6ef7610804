"""The valid values of the LLMRec task and method keys (conf/task/llmrec_*.yaml, conf/method/llmrec/*.yaml), checked by
recbench.run.construct.build_task before anything is loaded or written: each violation is one line naming the key."""
from __future__ import annotations

from recbench.api.config import flag, list_of, number, one_of, text, whole

_COMMON = {
    "name": text(),
    "dataset": text(),
    "data_dir": text(),
    "title_max_chars": whole(1, null=True),
    "template": text(null=True),
    "system_template": text(),
    "max_tokens": whole(1),
}

#: rating, explanation, summary (Amazon Reviews 2023 format); history_max 0 = no history in the prompt
REVIEW = {**_COMMON, "history_max": whole(0), "min_history": whole(0)}
RATING = {**REVIEW, "fallback_rating": number(1, 5)}
EXPLANATION = {**REVIEW, "reference": one_of("first_sentence", "text")}
SUMMARY = {**REVIEW, "review_max_chars": whole(1, null=True)}

#: sequential and direct recommendation (P5 format, frozen candidates)
RANK = {
    **_COMMON,
    "history_max": whole(1),
    "n_recommend": whole(1),
    "ks": list_of(whole(1)),
    "fuzzy_cutoff": number(above=0, hi=1),
    "candidates.path": text(),
    "candidates.sha256": text(null=True),
    "candidates.seed": whole(),
    "candidates.negatives": whole(1),
    "candidates.progress": flag(),
}

ZERO_SHOT = {"max_tokens": whole(1, null=True), "constrained": flag(), "seed": whole(null=True)}
RATING_BASELINE = {"seed": whole(null=True)}
LEAD = {"words": whole(1)}
RANK_BASELINE = {"recency_decay": number(above=0, hi=1), "batch_users": whole(1), "seed": whole(null=True),
                 "neighbours": whole(1, null=True), "factors": whole(1)}
