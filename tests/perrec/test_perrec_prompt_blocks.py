"""PerRecBench prompts: each user block rendered once per example (shared by the methods), prompts unchanged
(hand-written expected text), and the one average-rating reference class behind user_avg / item_avg."""
from __future__ import annotations

import recbench.tasks.perrec.methods as pm
import recbench.tasks.perrec.prompting as pp
from recbench.run.construct import build_task
from recbench.api.types import Example, Response
from tests.helpers import compose_cfg

import pytest

pytestmark = pytest.mark.fast

UA = {"user_id": "u1", "rating": 4.0, "avg_rating": 3.5, "relative_rating": 0.5, "most_common_rating": 4.0,
      "history_len": 12, "retrieved": [{"title": "Lip Balm", "rating": 5.0}, {"title": "Soap", "rating": 2.0}]}
UB = {"user_id": "u2", "rating": 4.0, "avg_rating": 4.25, "relative_rating": -0.25, "most_common_rating": 5.0,
      "history_len": 3, "retrieved": []}
PAIR_TEXT = (
    'Two users both rated the item "Hand Cream". Compare how much each of them likes it RELATIVE TO THEIR OWN USUAL '
    "RATINGS (a rating above the user's average means they like it more than usual).\n\n"
    "[User A]:\n- Average rating: 3.50; most common rating: 4; number of ratings: 12\n"
    '- Past ratings of items related to "Hand Cream":\n  * "Lip Balm": 5 stars\n  * "Soap": 2 stars\n\n'
    "[User B]:\n- Average rating: 4.25; most common rating: 5; number of ratings: 3\n- Profile: Likes creams.\n"
    '- Past ratings of items related to "Hand Cream":\n\n'
    'Which user likes "Hand Cream" more relative to their own average rating? Answer with exactly "[User A]" or "[User B]".')


def _method(name: str, *extra: str):
    cfg = compose_cfg([f"method={name}", *extra])
    return build_task(cfg).make_method(cfg.method, cfg.sampling)


def test_pairwise_prompt_text_is_unchanged():
    m = _method("pairwise")
    for _ in range(3):  # first call renders and checks the skeleton, later ones fill it in
        assert m.prompt("Hand Cream", UA, UB, None, "Likes creams.") == PAIR_TEXT
    swapped = m.prompt("Hand Cream", UB, UA, "Likes creams.", None)
    assert swapped.index("[User A]:\n- Average rating: 4.25") < swapped.index("[User B]:\n- Average rating: 3.50")


def test_each_user_block_rendered_once_per_example_and_shared_by_methods(monkeypatch):
    users = [dict(UA, user_id=f"u{i}", relative_rating=i / 10) for i in range(4)]
    ex = Example(id="g1", data={"query_item": "i1", "query_title": "Hand Cream", "timestamp": 0,
                                "item_avg_rating": 3.9, "users": users}, meta={"difficulty": "hard"})
    rendered = []
    real = pp._block_body

    def counting(user, profile, query_title):
        rendered.append(user["user_id"])
        return real(user, profile, query_title)

    monkeypatch.setattr(pp, "_block_body", counting)
    pp._BLOCKS.clear()
    m = _method("pairwise")
    gen = m.run(ex)
    reqs, n_prompts = next(gen), 0
    try:
        while True:
            n_prompts += len(reqs)
            reqs = gen.send([Response(text="[User A]") if i % 2 == 0 else Response(text="[User B]")
                             for i in range(len(reqs))])
    except StopIteration:
        pass
    assert n_prompts >= 8 and sorted(rendered) == ["u0", "u1", "u2", "u3"]  # 4 blocks for every comparison
    for name in ("pointwise", "listwise"):  # the same users in other methods: no new renders
        next(_method(name).run(ex))
    assert len(rendered) == 4


def test_user_and_item_average_rows_are_one_class_with_a_parameter():
    ex = Example(id="g2", data={"query_item": "i1", "query_title": "Hand Cream", "timestamp": 0,
                                "item_avg_rating": 3.9, "users": [UA, UB]}, meta={"difficulty": "easy"})
    outs = {}
    for name in ("user_avg", "item_avg"):
        m = _method(name)
        assert isinstance(m, pm.AverageRating) and m.name == name
        try:
            next(m.run(ex))
        except StopIteration as stop:
            outs[name] = stop.value.prediction
    assert outs["user_avg"]["ratings"] == {"u1": 3.5, "u2": 4.25}
    assert outs["item_avg"]["ratings"] == {"u1": 3.9, "u2": 3.9}
    # item average: 3.9 - 3.5 = 0.4 > 3.9 - 4.25, so u1 first
    assert outs["item_avg"]["order"] == ["u1", "u2"]


@pytest.mark.parametrize("seed", [0, 7, 2 ** 32 - 1, 2 ** 32, 2 ** 40])
def test_display_permutation_is_numpys_over_the_listed_seed_words(seed):
    import numpy as np

    from recbench.tasks.perrec.prompting import _permutation

    for order in (0, 1, 5):
        for eid in ("g1", "grp-ü€", "x" * 40):
            words = [seed, *eid.encode()] if not order else [seed, 9, order, *eid.encode()]
            for n in (2, 3, 4, 9):
                want = tuple(int(i) for i in np.random.default_rng(words).permutation(n))
                assert _permutation.__wrapped__(seed, eid, order, n) == want


def test_user_blocks_written_without_jinja_are_the_templates_text(tmp_path, monkeypatch):
    from recbench.api.prompts import get_template
    from recbench.tasks.perrec.data import load_examples

    template = get_template(pp.PKG, "_user_block.j2")
    odd = [{"title": t, "rating": r} for t, r in (("{{ x }} & <b>", 4.5), ("Été \"quoted\"", 1.0), ("", 3.0))]
    users = [u for e in load_examples.__wrapped__.uncached("data/perrec_sample", 4, 200) for u in e.data["users"]]
    users += [{**users[0], "retrieved": []}, {**users[1], "retrieved": odd, "avg_rating": 3, "history_len": 7}]
    pp._block_is_plain.cache_clear()
    assert pp._block_is_plain()
    for u in users:
        for profile in (None, "", "likes {{ x }}\nand more"):
            want = template.render(label=pp._LABEL_SLOT, user=u, profile=profile, query_title="Q \"t\" {% x %}")
            assert pp._block_body(u, profile, "Q \"t\" {% x %}") == want
    # a user block template of another text (here one in the working folder) is rendered by Jinja
    (tmp_path / "_user_block.j2").write_text("{{ label }} {{ user.history_len }}\n")
    monkeypatch.chdir(tmp_path)
    pp._block_is_plain.cache_clear()
    try:
        assert not pp._block_is_plain()
    finally:
        pp._block_is_plain.cache_clear()


def test_listwise_prompts_written_without_jinja_are_the_templates_text(tmp_path, monkeypatch):
    from recbench.api.prompts import render

    blocks = ["User 1:\n- Average rating: 3.50", "User 2:\n- Past ratings of \"{{ x }}\" & <b>:\n  * \"Été\": 4 stars",
              "", "User 4:\n\n- trailing\n"]
    users = [{"label": f"User {i + 1}", "block": b} for i, b in enumerate(blocks)]
    pp._plain_prompt.cache_clear()
    plain = pp._plain_prompt("listwise.j2")
    assert plain is pp._plain_listwise
    for shown in (users, users[:2], users[1:2]):
        for title in ("Heat (1995)", "Q \"t\" {% x %} {{ y }}", "", "  spaced  "):
            assert plain(users=shown, query_title=title) == render(pp.PKG, "listwise.j2", users=shown,
                                                                   query_title=title)
    # a listwise template of another text (here one in the working folder) is rendered by Jinja
    (tmp_path / "listwise.j2").write_text("{{ users|length }} users: {{ query_title }}\n")
    monkeypatch.chdir(tmp_path)
    pp._plain_prompt.cache_clear()
    try:
        assert pp._plain_prompt("listwise.j2") is None
    finally:
        pp._plain_prompt.cache_clear()
