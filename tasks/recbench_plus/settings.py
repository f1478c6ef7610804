"""The valid values of the RecBench+ task and method keys (conf/task/recbench_plus*.yaml,
conf/method/recbench_plus/*.yaml), checked by recbench.run.construct.build_task before anything is loaded or written:
each violation is one line naming the key."""
from __future__ import annotations

from recbench.api.config import flag, list_of, number, one_of, text, whole
from recbench.kg.queries import QUERY_TYPES

TASK = {
    "name": text(),
    "domain": one_of("movie", "book"),
    "types": list_of(one_of(*QUERY_TYPES), null=True),  # null = every type (released files: every type found)
    "data.kind": one_of("bundle", "build", "released", "queries"),
    "data.query_type": one_of(*QUERY_TYPES, null=True),
    "data.domain": one_of("movie", "book", null=True),
    "data.build.per_type": whole(1),
    "data.build.seed": whole(),
    "data.build.scope": one_of("history", "catalogue"),
    "data.build.max_users": whole(1, null=True),
    "data.build.extraction.min_conditions": whole(1),
    "data.build.extraction.max_conditions": whole(1),
    "data.build.extraction.min_subset": whole(1),
    "data.build.extraction.max_subset": whole(1),
    "match_threshold": number(above=0, hi=1, null=True, per_key=("movie", "book")),
    "strict.enabled": flag(),
    "strict.cutoff": number(above=0, hi=1),
    # the held-out split (task=recbench_plus_ml100k_heldout)
    "split.part": one_of("heldout", "train"),
    "split.fraction": number(above=0, hi=1),
    "split.seed": whole(),
}

ASSISTANT = {
    "with_history": flag(),
    "k": whole(0),
    "max_tokens": whole(1),
    "adapter": text(null=True),
    "history_len": whole(0),
    "exclude_ground_truth": flag(),
    "system_template": text(),
    "template": text(),
}

#: the reference rows without a model (popular_match, bm25_items): how many titles they answer with
REFERENCE = {"n": whole(1)}
