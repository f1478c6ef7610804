"""RunResult holds every audit's block as its typed record (RunResult.audits) and converts only at metrics.json's
boundary: the blocks the audits computed are written unchanged, and metrics.json written -> read -> written again is
byte-identical, on a run with the order, template and noise-floor audits on."""
from __future__ import annotations

import pytest

from recbench.audits.noise_blocks import NoiseBlock
from recbench.audits.order_blocks import OrderBlock, PairOrderBlock
from recbench.audits.template_blocks import TemplateBlock
from recbench.run.evaluate import run_from_config
from recbench.store.runstore import write_json_atomic
from recbench.store.schema import read_result
from recbench.testing.planted_audits import BatchSensitive
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast


def test_audit_blocks_are_typed_in_memory_and_metrics_json_round_trips_byte_identical(tmp_path):
    cfg = compose_cfg(["method=listwise", "limit=8", "run.progress=false", f"cache.path={tmp_path / 'c.sqlite'}",
                       "audit.orders=3", "audit.templates=2", "audit.noise.batch_size=4",
                       "run.bootstrap_resamples=50"])
    result = run_from_config(cfg, tmp_path / "run", backend=BatchSensitive(0.5, seed=0))
    kinds = {k: type(b) for k, b in result.audits.items()}
    assert kinds == {"order_audit": OrderBlock, "template_audit": TemplateBlock, "noise_floor": NoiseBlock} | (
        {"pair_order_consistency": PairOrderBlock} if "pair_order_consistency" in kinds else {})
    assert not set(kinds) & set(result.extra)  # the task's own values and the audits' blocks are held apart
    assert result.audits["order_audit"].orders == 3 and result.audits["template_audit"].templates == 2
    written = (tmp_path / "run" / "metrics.json").read_bytes()
    read = read_result(tmp_path / "run")
    assert {k: type(b) for k, b in read.audits.items()} == kinds  # NaN in memory reads back as None: compare bytes
    write_json_atomic(tmp_path / "again.json", read.to_dict())  # how RunStore.write_result writes metrics.json
    assert (tmp_path / "again.json").read_bytes() == written
