"""The listwise method's cheaper paths give exactly what the plain ones give: the display permutation (numpy's),
the lazy members and their retrieved items, the user blocks and prompt (Jinja's text), the ranking constraint, the
requests and the parsed answers, on odd inputs."""
from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

import recbench.tasks.perrec.methods as pm
import recbench.tasks.perrec.prompting as pp
from recbench.api.prompts import get_template, render
from recbench.api.types import Constraint, Example, Request
from recbench.run.construct import build_task
from recbench.tasks.perrec import display_order, lazy
from recbench.tasks.perrec.data import load_examples
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast
SAMPLE = str(Path(__file__).resolve().parents[2] / "data" / "perrec_sample")


def _method(name: str, *extra: str):
    cfg = compose_cfg([f"method={name}", *extra])
    return build_task(cfg).make_method(cfg.method, cfg.sampling)


def _odd_ids(rnd: random.Random, n: int) -> list[str]:
    return list({"".join(rnd.choice("ab-09_üé€ ") for _ in range(rnd.randrange(0, 25))) for _ in range(n)})


@pytest.mark.parametrize("seed,order", [(0, 0), (1, 0), (2 ** 32 - 1, 0), (123456789, 3), (7, 2 ** 32 - 1), (2 ** 40, 1)])
def test_display_permutations_are_numpys_from_the_plain_seed_words(seed, order):
    """The uint32 coercion of the seed words gives the permutation numpy gives the plain list of ints."""
    ids = _odd_ids(random.Random(seed ^ order), 100)
    for k, eid in enumerate(ids):
        n = (0, 1, 2, 3, 4, 5, 7, 8, 9, 26)[k % 10]
        want = tuple(np.random.default_rng(display_order.seed_words(seed, eid, order)).permutation(n).tolist())
        assert display_order.permutation.__wrapped__(seed, eid, order, n) == want, (eid, n)


def test_lazy_members_records_and_retrieved_items_match_the_row_by_row_reading(monkeypatch):
    monkeypatch.setattr(lazy, "RETRIEVED_CHUNK", 7)  # many chunk edges inside the sample
    exs = load_examples.__wrapped__.uncached(SAMPLE, 4, 200)
    s = exs[0].data._store
    mem, r = s.members, s.ratings
    for e in exs:
        users = e.data["users"]
        assert [type(u) for u in users] == [lazy.LazyMember] * len(users)
        for m, u in zip(e.data._rows, users):
            assert dict(u) == dict(lazy.member(s, m))
            assert u["user_id"] == str(r.users[int(mem.user[m])]) and u["most_common_rating"] == float(mem.common[m])
            assert u["avg_rating"] == round(mem.avg[m], 4) and type(u["history_len"]) is int
            lo = int(mem.shown_start[m])
            want = [{"item_id": str(r.items[int(r.item[lo + p])]), "title": s.titles[int(r.item[lo + p])],
                     "rating": float(r.rating[lo + p])} for p in mem.retrieved[m].tolist() if p >= 0]
            pairs = u.retrieved_pairs()  # read before the records are built, then from them
            assert pairs == [(h["title"], h["rating"]) for h in want] and u["retrieved"] == want
            assert u.retrieved_pairs() == pairs and "retrieved" in dict.keys(u)


def test_user_blocks_and_listwise_prompts_equal_jinjas_on_odd_values():
    m = _method("listwise")
    odd = [(-0.0, "Zero \"neg\""), (0.0, "{{ x }}"), (4, "int four"), (4.0, "float four"), (math.nan, "nan"),
           (4.5, ""), (1e-7, "tiny"), (3.0, "Été <b>")]
    users = [{"user_id": f"u{i}", "rating": 4.0, "avg_rating": 3.14159 + i, "relative_rating": 0.5 - i,
              "most_common_rating": float(i), "history_len": 10 + i,
              "retrieved": [{"title": t, "rating": v} for v, t in odd[i:] + odd[:i]]} for i in range(4)]
    block = get_template(pp.PKG, "_user_block.j2")
    for u in users:
        for _ in range(2):  # rendered once, then from the block memo
            want = block.render(label="User A", user=u, profile=None, query_title="Q {% x %}").rstrip("\n")
            assert m.user_block(u, "User A", None, "Q {% x %}") == want
    ex = Example(id="g-odd", data={"query_title": "Q \"t\" {{ y }}", "users": users}, meta={})
    for _ in range(3):  # written by the template's compiled function each time
        text, labels = m.prompt(ex, users, {}, 0)
        shown = [{"label": lab, "user": u, "profile": None, "block": m.user_block(u, lab, None, ex.data["query_title"])}
                 for lab, u in zip(labels, users)]
        assert text == render(pp.PKG, "listwise.j2", users=shown, query_title=ex.data["query_title"])
    with_profiles, labels = m.prompt(ex, users, {"u1": "likes {{ z }}"}, 0)
    assert "- Profile: likes {{ z }}" in with_profiles


def test_a_user_block_template_that_does_not_open_with_the_label_is_rendered_with_it(tmp_path, monkeypatch):
    (tmp_path / "_user_block.j2").write_text("{{ user.history_len }} is {{ label }}\n")
    monkeypatch.chdir(tmp_path)
    clear = (pp.compiled.cache_clear, pp._BLOCKS.clear, get_template.cache_clear)
    for c in clear:
        c()
    try:
        m = _method("listwise")
        u = {"user_id": "u1", "history_len": 12}
        assert [m.user_block(u, lab, None, "Q") for lab in ("User A", "User B")] == ["12 is User A", "12 is User B"]
    finally:
        for c in clear:
            c()
    assert pp._after_label(pp._LABEL_SLOT) is None and pp._after_label(pp._LABEL_SLOT + "x\n") == "x"


def test_ranking_constraint_is_the_schema_constraint_built_once():
    for n in (1, 2, 5, 26):
        labels = pm.LABELS[:n]
        schema = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"enum": labels},
                                                               "minItems": n, "maxItems": n}},
                  "required": ["ranking"]}
        assert pm.ranking_constraint(tuple(labels)) == Constraint.json_schema(schema)
        assert pm.ranking_constraint(tuple(labels)) is pm.ranking_constraint(tuple(labels))


def test_requests_equal_the_chat_requests_they_stand_for():
    m = _method("listwise", "method.samples=3", "method.temperature=0.7")
    shots = [("q1", "a1"), ("q2", "a2")]
    got = m._samples("the prompt", 64, pm.ranking_constraint(("User A", "User B")), shots)
    for j, r in enumerate(got):
        sp = dataclasses.replace(m.sampling(64, j), temperature=0.7)
        assert r == Request.chat(m._messages("the prompt", shots), sp, constraint=None, purpose="answer", adapter=None)
        assert r.sampling is m._samples("x", 64)[j].sampling  # built once per seed offset
    assert m.seed == m.sampling_cfg.seed


ODD_ANSWERS = [
    '{"ranking": ["User B", "User A", "User C"]}', '  {"ranking": ["User C", "User B", "User A"]}\n',
    '["User A", "User C", "User B"]', '{"ranking": ["User A", "User A", "User B"]}', '{"ranking": ["User A"]}',
    '{"ranking": ["user a", "User B", "User C"]}', '{"ranking": ["A", "B", "C"]}', '{"order": ["User B", "User A"]}',
    '{"ranking": ["User A", "User B", "User C", "User D"]}', '{"ranking": ["User A", ["User B"], "User C"]}',
    '{"ranking": [1, 2, 3]}', '{"ranking": null, "x": ["User C"]}', '{"ranking": "User A, User B"}', '[]', '{}',
    'User B then User A then User C', 'Answer: {"ranking": ["User B", "User A", "User C"]}', 'nothing', '',
    '{"ranking": ["User A", "User B", "User C"]} extra', '{"ranking": ["User B", "User C", "User A"], "why": 1}',
    "{'ranking': ['User B', 'User A', 'User C']}", '{"ranking": ["User A", "User B", {"x": 1}]}', '3', '"User A"',
    '{"ranking": ["User A", "User B", "User C", "User A"]}', '{"ranking": [true, "User A", "User B"]}',
]


@pytest.mark.parametrize("labels", [["User A", "User B", "User C"], ["User A"], ["User A", "user a", "User B"],
                                    ["[User A]", "[User B]", "[User C]"]])
def test_parse_ranking_fast_path_returns_what_the_general_reading_returns(labels):
    for text in ODD_ANSWERS:
        got, want = pm.parse_ranking(text, labels), pm._read_ranking(text, tuple(labels))
        assert (got.value, got.status, got.note) == (want.value, want.status, want.note), text
    exact = json.dumps({"ranking": labels[::-1]})
    if len(set(labels)) == len(labels) and "user a" not in labels:
        assert pm._exact_ranking(exact, tuple(labels)) is not None  # a well-formed answer takes the fast path
