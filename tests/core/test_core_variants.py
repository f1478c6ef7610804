"""The variant protocol (recbench/api/variant.py): one typed value a method declares, typed answers on the sample
record, and run dirs written before it (details["audit"], details["template_audit"]) read into the same slots."""
from __future__ import annotations

import pytest

from recbench.api.task import honours
from recbench.api.variant import PLAIN, SEED_STRIDE, Variant, VariantAnswer, reseeded_sampling
from recbench.api.types import SamplingParams
from recbench.audits.order import audit_aggregates
from recbench.audits.templates import template_aggregates
from recbench.store.records import SampleRecord
from tests.toy.task import ToyPopular, ToyRank

pytestmark = pytest.mark.fast


def _order(k, shown, ranked, tau):
    return {"order": k, "shown": shown, "ranked": ranked, "parse_status": "ok", "metrics": {"toy_tau": tau}}


def test_variant_is_one_typed_value_with_a_short_file_form():
    assert PLAIN == Variant() and PLAIN.to_dict() == {}
    v = Variant(order=0, template=2)
    assert v.to_dict() == {"order": 0, "template": 2} and Variant.from_dict(v.to_dict()) == v
    a = VariantAnswer(Variant(seed=3), {"order": ["x"]}, "ok", {"m": 1.0})
    assert VariantAnswer.from_dict(a.to_dict()) == a
    assert reseeded_sampling(SamplingParams(seed=7), 0).seed == 7
    assert reseeded_sampling(SamplingParams(seed=7), 2).seed == 7 + 2 * SEED_STRIDE


def test_methods_declare_the_fields_they_honour():
    assert honours(ToyRank, "order") and not honours(ToyRank, "template")
    assert not honours(ToyPopular, "order") and not honours(ToyPopular, "seed")  # asks no model
    assert honours(ToyRank, "seed")  # every method that asks a model: the protocol applies the seed


def test_an_old_order_audited_record_reads_into_variants():
    old = {"id": "e1", "metrics": {"toy_tau": 1.0}, "details": {"audit": {"orders": [
        _order(0, ["a", "b"], ["a", "b"], 1.0), _order(1, ["b", "a"], ["b", "a"], -1.0)]}, "notes": ["x"]}}
    r = SampleRecord.from_dict(old)
    assert [a.variant for a in r.variants] == [Variant(order=0), Variant(order=1)]
    assert r.variants[1].shown == ["b", "a"] and r.variants[1].metrics == {"toy_tau": -1.0}
    assert r.details == {"notes": ["x"]}  # the audit's answers moved out of the method's payload
    block = audit_aggregates([r], "toy_tau")["order_audit"]
    assert block.per_order == [1.0, -1.0] and block.kendalls_w_mean == pytest.approx(0.0)
    again = SampleRecord.from_dict(r.to_dict())  # written back in today's form, read the same
    assert again.variants == r.variants and "audit" not in r.to_dict()["details"]


def test_an_old_template_and_order_audited_record_reads_into_variants():
    templates = [{"template": j, "file": f"t{j}.j2", "prediction": {"order": ["a", "b"]}, "parse_status": "ok",
                  "metrics": {"toy_tau": m[0]}, "orders": [{"toy_tau": x} for x in m]}
                 for j, m in enumerate([(1.0, 0.5), (0.0, -0.5)])]
    recs = [SampleRecord.from_dict({"id": f"e{i}", "details": {
        "audit": {"orders": [_order(0, ["a", "b"], ["a", "b"], 1.0), _order(1, ["b", "a"], ["a", "b"], 0.5)]},
        "template_audit": {"templates": templates}}}) for i in range(3)]
    r = recs[0]
    assert [a.variant for a in r.variants] == [Variant(order=k, template=j) for j in range(2) for k in range(2)]
    assert [a.metrics["toy_tau"] for a in r.variants] == [1.0, 0.5, 0.0, -0.5]
    assert r.variants[1].shown == ["b", "a"] and r.variants[2].template_file == "t1.j2"
    block = template_aggregates(recs, "toy_tau", n_boot=50)["template_audit"]
    assert block.templates == 2 and block.files == ["t0.j2", "t1.j2"]
    assert [p.mean for p in block.per_template] == [1.0, 0.0] and block.variance["n_orders"] == 2
    assert audit_aggregates(recs, "toy_tau")["order_audit"].per_order == [1.0, 0.5]
