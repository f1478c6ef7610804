"""The valid values of PerRecBench's task and method keys (conf/task/perrec*.yaml, conf/method/perrec/*.yaml), checked by
recbench.run.construct.build_task before anything is loaded or written: each violation is one line naming the key."""
from __future__ import annotations

from recbench.api.config import flag, list_of, number, one_of, text, whole

TASK = {
    "data_dir": text(),
    "difficulties": list_of(text()),  # each must also occur in the data (checked by the loader)
    "retrieval_k": whole(1),
    "history_max": whole(1),
    "profile": flag(),
    "profile_max_tokens": whole(1),
    "profile_history": whole(1),
    "legacy_tau": flag(),
    "format": one_of("recbench", "released"),
    "heldout_file": text(),
    "profile_file": text(null=True),
}

#: pointwise, pairwise, listwise and their variants (kind: pointwise | pairwise | listwise)
PROMPTED = {
    "max_tokens": whole(1),
    "constrained": flag(),
    "cot": flag(),
    "shots": whole(0),
    "samples": whole(1),
    "temperature": number(lo=0, null=True),
    "template": text(null=True),
    "adapter": text(null=True),
}

#: the random reference row
RANDOM = {"seed": whole(null=True)}
