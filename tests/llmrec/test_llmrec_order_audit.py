"""The order audit on LLMRec sequential: order k > 0 shows the same candidates in another order; order 0 is the
prompt of a run without the audit."""
from __future__ import annotations

import pytest

from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import read_samples
from tests.llmrec.llmrec_helpers import compose_cfg

pytestmark = pytest.mark.fast


def test_llmrec_sequential_permutes_candidates(tmp_path):
    b = ScriptedBackend(lambda req: "1. nothing", batch_size=16)
    cfg = compose_cfg("task=llmrec_sequential", "method=zero_shot", "limit=3", f"cache.path={tmp_path / 'c.sqlite'}",
                      "audit.orders=3")
    run_from_config(cfg, tmp_path / "seq", backend=b)
    recs = read_samples(tmp_path / "seq")
    cfg0 = compose_cfg("task=llmrec_sequential", "method=zero_shot", "limit=3", f"cache.path={tmp_path / 'c.sqlite'}")
    b0 = ScriptedBackend(lambda req: "1. nothing")
    run_from_config(cfg0, tmp_path / "plain", backend=b0)
    assert b0.calls == 0  # order 0 asked exactly today's prompts (all cached by the audited run)
    assert b.calls == 3 * 3
    for r in recs:
        orders = [v for v in r["variants"] if "order" in v["variant"]]  # SampleRecord.variants
        assert len({tuple(o["shown"]) for o in orders}) == 3
        assert all(sorted(o["shown"]) == sorted(orders[0]["shown"]) for o in orders)
