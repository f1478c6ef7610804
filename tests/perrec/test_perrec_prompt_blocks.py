"""PerRecBench prompts: each user block rendered once per example (shared by the methods), prompts unchanged
(hand-written expected text), and the one average-rating reference class behind user_avg / item_avg."""
from __future__ import annotations

from pathlib import Path

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


def _sample_members():
    from recbench.tasks.perrec.data import load_examples

    return load_examples.__wrapped__.uncached(str(Path(__file__).resolve().parents[2] / "data" / "perrec_sample"), 4,
                                              200)


def test_user_blocks_written_by_the_compiled_template_are_jinjas_text():
    from recbench.api.prompts import get_template
    from recbench.tasks.perrec.compiled import compiled

    template = get_template(pp.PKG, "_user_block.j2")
    odd = [{"title": t, "rating": r} for t, r in (("{{ x }} & <b>", 4.5), ("Été \"quoted\" 100%", 1.0), ("", 3.0),
                                                  ("neg zero", -0.0), ("int", 4))]
    users = [u for e in _sample_members() for u in e.data["users"]]
    users += [{**users[0], "retrieved": []}, {**users[1], "retrieved": odd, "avg_rating": 3, "history_len": 7}]
    assert compiled(pp.PKG, "_user_block.j2", strip=False) is not None  # the block's fast path is the compiled one
    for u in users:
        for profile in (None, "", "likes {{ x }}\nand 50% more"):
            want = template.render(label=pp._LABEL_SLOT, user=u, profile=profile, query_title="Q \"t\" {% x %}")
            assert pp._block_body(u, profile, "Q \"t\" {% x %}") == want


def _listwise_files() -> list[str]:
    from recbench.api.prompts import template_path

    return sorted(p.name for p in template_path(pp.PKG, "listwise.j2").parent.glob("listwise*.j2"))


@pytest.mark.parametrize("name", _listwise_files())
def test_every_listwise_template_compiled_writes_jinjas_text_on_the_bundled_data(name):
    """Each listwise template (the method's, chain of thought, the paraphrases): its compiled function and Jinja's
    render give the same bytes for every group of data/perrec_sample, shown in each display order, with and without
    profiles (and Jinja's own error for variables it cannot read)."""
    from recbench.api.prompts import render
    from recbench.tasks.perrec.compiled import compiled

    program = compiled(pp.PKG, name)
    assert program is not None, f"{name} is not compiled: its prompts would all be rendered by Jinja"
    m = _method("listwise")
    n = 0
    for ex in _sample_members():
        q = ex.data["query_title"]
        for order in (0, 1):
            users = pp.presentation_order(ex, m.seed, order)
            for profiles in ({}, {u["user_id"]: f"likes {{{{ {i} }}}} 100%" for i, u in enumerate(users)}):
                labels = pm.LABELS[:len(users)]
                shown = [{"label": lab, "user": u, "profile": profiles.get(u["user_id"]),
                          "block": m.user_block(u, lab, profiles.get(u["user_id"]), q)} for lab, u in zip(labels, users)]
                assert program(users=shown, query_title=q) == render(pp.PKG, name, users=shown, query_title=q)
                n += 1
    assert n == 4 * 120
    with pytest.raises(Exception, match="query_title"):  # a variable missing: Jinja's error, not a KeyError
        program(users=[])


def test_an_edited_template_is_what_the_fast_path_writes(tmp_path, monkeypatch):
    """Templates planted in the working folder (found before the package's) with new text, a loop index and a
    condition: the compiled fast path follows them, and writes Jinja's text."""
    from recbench.api.prompts import get_template, render, template_path
    from recbench.tasks.perrec.compiled import compiled

    listwise = template_path(pp.PKG, "listwise.j2").read_text(encoding="utf-8")
    block = template_path(pp.PKG, "_user_block.j2").read_text(encoding="utf-8")
    (tmp_path / "listwise.j2").write_text(listwise.replace("Rank all", "Order all").replace(
        "{{ u.block }}", "#{{ loop.index }} of {{ loop.length }}{{ ' (first)' if loop.first else '' }}\n{{ u.block }}"))
    (tmp_path / "_user_block.j2").write_text(block.replace("- Average rating:", "- Mean rating:").replace(
        "stars", "{{ 'star' if h.rating == 1 else 'stars' }}"))
    monkeypatch.chdir(tmp_path)
    clear = (compiled.cache_clear, pp._BLOCKS.clear, get_template.cache_clear)
    for c in clear:
        c()
    try:
        m = _method("listwise")
        ex = _sample_members()[0]
        text, labels = m.prompt(ex, pp.presentation_order(ex, m.seed), {}, 0)
        assert m._plain is not None and m._plain.template == "listwise.j2" and "loop.index" not in m._plain.source
        assert "Order all" in text and "#1 of " in text and " (first)\nUser A:\n- Mean rating:" in text
        shown = [{"label": lab, "user": u, "profile": None, "block": m.user_block(u, lab, None, ex.data["query_title"])}
                 for lab, u in zip(labels, pp.presentation_order(ex, m.seed))]
        assert text == render(pp.PKG, "listwise.j2", users=shown, query_title=ex.data["query_title"])
        assert all(b["block"].startswith(f"{b['label']}:\n- Mean rating: ") for b in shown)
    finally:
        for c in clear:
            c()


def test_a_template_using_what_the_compiler_does_not_write_is_rendered_by_jinja(tmp_path, monkeypatch):
    from recbench.tasks.perrec.compiled import compiled

    for i, text in enumerate(["{{ users|length }} {{ query_title|upper }}\n", "{% set n = 2 %}{{ n }}\n",
                              "{{ users.items }}\n", "{% for u in users %}{{ loop.cycle('a', 'b') }}{% endfor %}"]):
        (tmp_path / f"odd{i}.j2").write_text(text)
        assert compiled(pp.PKG, str(tmp_path / f"odd{i}.j2")) is None, text


def _template_files(stem: str) -> list[str]:
    from recbench.api.prompts import template_path

    return sorted(p.name for p in template_path(pp.PKG, "system.j2").parent.glob(f"{stem}*.j2"))


@pytest.mark.parametrize("name", _template_files("pointwise") + _template_files("pairwise"))
def test_every_pointwise_and_pairwise_template_compiled_writes_jinjas_text(name):
    """The pointwise and pairwise prompts (and their CoT and paraphrase files) come from the same compiled functions:
    Jinja's bytes for every member and pair of members of data/perrec_sample, with and without profiles."""
    from recbench.api.prompts import render
    from recbench.tasks.perrec.compiled import compiled

    program = compiled(pp.PKG, name)
    assert program is not None, f"{name} is not compiled"
    m = _method("pairwise")
    for ex in _sample_members()[::7]:
        q, users = ex.data["query_title"], ex.data["users"]
        for a, b in zip(users, users[1:] + users[:1]):
            for pa, pb in ((None, None), ("likes {{ x }} 100%", "")):
                if name.startswith("pointwise"):
                    v = dict(label="User", user=a, profile=pa, query_title=q, block=m.user_block(a, "User", pa, q))
                else:
                    v = dict(query_title=q, user_a=a, user_b=b, profile_a=pa, profile_b=pb,
                             block_a=m.user_block(a, pp.PAIR_CHOICES[0], pa, q),
                             block_b=m.user_block(b, pp.PAIR_CHOICES[1], pb, q))
                assert program(**v) == render(pp.PKG, name, **v)
    for other in ("system.j2", "profile.j2"):
        assert compiled(pp.PKG, other) is not None


def test_formatted_numbers_kept_per_site_print_as_jinja_prints_them(tmp_path):
    """A format site keeps the text of the floats it printed: a later equal number of another type (4 after 4.0,
    True after 1.0), a zero of the other sign and NaN print as Jinja prints them, for float and non-float formats."""
    from recbench.api.prompts import render
    from recbench.tasks.perrec.compiled import compiled

    (tmp_path / "fmt.j2").write_text('{{ "%g"|format(x) }} {{ "%.2f"|format(x) }} {{ "%s"|format(x) }} {{ "%r"|format(x) }}')
    program = compiled(pp.PKG, str(tmp_path / "fmt.j2"))
    assert program is not None
    for x in (4.0, 4, 1.0, True, 0.0, -0.0, 0, float("nan"), 2.5, 2.5, 10 ** 400, "s"):
        want = None
        try:
            want = render(pp.PKG, str(tmp_path / "fmt.j2"), x=x)
        except Exception as e:  # noqa: BLE001 - Jinja's error is the compiled function's error too
            with pytest.raises(type(e)):
                program(x=x)
        if want is not None:
            assert program(x=x) == want, x
