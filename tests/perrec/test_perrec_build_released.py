"""Released PerRecBench layout: round trip (write released -> load == recbench-format examples) and field errors."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from recbench.run.construct import bundled_data
from recbench.tasks.perrec.build import BuildConfig, build
from recbench.tasks.perrec.data import load_examples
from recbench.tasks.perrec.released import ReleasedFormatError, load_profiles, load_released, write_released

pytestmark = pytest.mark.fast


def _roundtrip(src: Path, dst: Path, heldout: bool) -> None:
    test = list(load_examples(str(src), 4, 200))
    held = list(load_examples(str(src), 4, 200, "heldout.jsonl")) if heldout else []
    ratings = pd.read_csv(next(p for p in (src / "ratings.csv.gz", src / "ratings.csv") if p.exists()))
    items = pd.read_json(src / "items.jsonl", lines=True, dtype=False)
    write_released(dst, test, held, ratings, items, profiles={test[0].data["users"][0]["user_id"]: "likes sci-fi"})
    for name in ("userid2history.json", "parentasin2item.json", "item2group_avg_diff_sample-easy.json", "userid2profile.json"):
        assert (dst / name).exists()
    again = list(load_released(str(dst), 4, 200))
    assert [e.id for e in again] == [e.id for e in test]
    assert again == test  # identical examples: ids, histories, averages, relative ratings, retrieval, item average
    if heldout:
        assert list(load_released(str(dst), 4, 200, "heldout")) == held
    assert load_profiles(str(dst)) == {test[0].data["users"][0]["user_id"]: "likes sci-fi"}


def test_roundtrip_on_the_bundled_sample(tmp_path):
    _roundtrip(Path(bundled_data("perrec_sample")), tmp_path / "released", heldout=False)


def test_roundtrip_on_real_movielens_groups(shared_data, tmp_path):
    build("movielens", str(shared_data / "ml-latest-small"), str(tmp_path / "built"), None,
          BuildConfig(per_size=15, heldout_per_size=5))
    _roundtrip(tmp_path / "built", tmp_path / "released", heldout=True)


def test_released_task_runs_through_the_loop(tmp_path):
    from tests.helpers import compose_cfg
    from recbench.run.evaluate import run_from_config

    _roundtrip(Path(bundled_data("perrec_sample")), tmp_path / "rel", heldout=False)
    cfg = compose_cfg(["task=perrec_released", f"task.data_dir={tmp_path / 'rel'}", "method=bm25_history", "limit=10",
                       "run.progress=false", "cache.enabled=false"])
    ref = compose_cfg(["task=perrec", "method=bm25_history", "limit=10", "run.progress=false", "cache.enabled=false"])
    a = run_from_config(cfg, tmp_path / "run_rel").to_dict()
    b = run_from_config(ref, tmp_path / "run_ref").to_dict()
    assert a["metrics"]["ptc"]["mean"] == b["metrics"]["ptc"]["mean"] and a["counts"]["examples"] == 10


@pytest.fixture()
def released(tmp_path):
    _roundtrip(Path(bundled_data("perrec_sample")), tmp_path / "r", heldout=False)
    load_released.cache_clear()
    return tmp_path / "r"


def _edit(path: Path, fn) -> None:
    obj = json.loads(path.read_text())
    fn(obj)
    path.write_text(json.dumps(obj))


@pytest.mark.parametrize("field", ["user_id", "history_len", "relative_rating", "avg_rating"])
def test_missing_member_field_names_file_record_and_field(released, field):
    p = released / "item2group_avg_diff_sample-easy.json"
    first = next(iter(json.loads(p.read_text())))
    _edit(p, lambda o: o[first][0][1].pop(field))
    with pytest.raises(ReleasedFormatError) as e:
        load_released(str(released), 4, 200)
    msg = str(e.value)
    assert p.name in msg and f"'{first}' group 0 member 1" in msg and f"'{field}'" in msg


def test_malformed_history_and_item_fields(released):
    hp = released / "userid2history.json"
    uid = next(iter(json.loads(hp.read_text())))
    _edit(hp, lambda o: o[uid][0].update(rating="five"))
    with pytest.raises(ReleasedFormatError, match=rf"userid2history.json: record '{uid}' entry 0: field 'rating'"):
        load_released(str(released), 4, 200)
    load_released.cache_clear()
    _edit(hp, lambda o: o[uid][0].update(rating=5.0))
    ip = released / "parentasin2item.json"
    asin = next(iter(json.loads(ip.read_text())))
    _edit(ip, lambda o: o[asin].pop("title"))
    with pytest.raises(ReleasedFormatError, match=rf"parentasin2item.json: record '{asin}': missing field 'title'"):
        load_released(str(released), 4, 200)


def test_history_len_out_of_range_and_author(released):
    p = released / "item2group_avg_diff_sample-easy.json"
    first = next(iter(json.loads(p.read_text())))
    _edit(p, lambda o: o[first][0][0].update(history_len=10**6))
    with pytest.raises(ReleasedFormatError, match="history_len"):
        load_released(str(released), 4, 200)
    load_released.cache_clear()
    _edit(p, lambda o: o[first][0][0].update(history_len=5))
    ip = released / "parentasin2item.json"
    _edit(ip, lambda o: o[first].update(author={"name": "Jane Doe"}))
    ex = load_released(str(released), 4, 200)[0]
    assert ex.data["query_title"].endswith("by Jane Doe") and ex.data["users"][0]["history_len"] == 5


def test_released_profiles_are_used_when_profile_is_on(released, tmp_path):
    from tests.helpers import compose_cfg
    from tests.doubles import ScriptedBackend
    from recbench.run.evaluate import run_from_config

    uid = next(iter(json.loads((released / "userid2profile.json").read_text())))
    cfg = compose_cfg(["task=perrec_released", f"task.data_dir={released}", "task.profile=true", "method=listwise",
                       "limit=1", "run.progress=false", "cache.enabled=false"])
    seen = []
    run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(lambda r: (seen.append(r), '{"ranking": ["User A"]}')[1]))
    assert len(seen) == 1 and seen[0].purpose == "answer" and "likes sci-fi" in seen[0].messages[-1][1]
    assert uid in {u["user_id"] for u in load_released(str(released), 4, 200)[0].data["users"]}
