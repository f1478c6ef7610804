"""The released LLMasEvaluator data (../shared/data/llmaseval; skipped when absent): its size as the paper states it,
and the random judge on all of it with every correlation recomputed from samples.jsonl."""
from __future__ import annotations

from pathlib import Path

import pytest
from tests.explanation_judging.ej_helpers import samples
from tests.explanation_judging.test_explanation_judging_runs import _run, assert_recomputed
from tests.helpers import compose_cfg

from recbench.run.construct import build_task
from recbench.tasks.explanation_judging.settings import ASPECTS

pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def llmaseval(shared_data: Path) -> Path:
    p = shared_data / "llmaseval"
    if not (p / "df_explanation_selected.csv").is_file():
        pytest.skip(f"LLMasEvaluator data not available at {p}")
    return p


def test_the_real_data_loads_at_full_size(llmaseval):
    exs = build_task(compose_cfg(["task=explanation_judging", f"task.data_dir={llmaseval}"])).load()
    assert len(exs) == 10_144 == 2_536 * 4
    assert len({e.meta["user_id"] for e in exs}) == 39
    assert len({(e.meta["user_id"], e.meta["movie_id"]) for e in exs}) == 310
    assert len({e.meta["movie_id"] for e in exs}) == 140
    assert {e.meta["aspect"] for e in exs} == set(ASPECTS) and len({e.meta["explanation_type"] for e in exs}) == 9
    assert all("<" not in e.data["explanation"] for e in exs)
    assert {e.data["rating"] for e in exs} == {1, 2, 3, 4, 5}


def test_random_judge_on_the_real_data(tmp_path, llmaseval):
    metrics, run_dir = _run(tmp_path, "method=random_judge", f"task.data_dir={llmaseval}")
    recs = samples(run_dir)
    assert len(recs) == 10_144
    mine = assert_recomputed(metrics, recs)
    assert all(abs(v[f"{c}_{lv}"]) < 0.1 for v in mine.values() for c in ("pearson", "spearman", "kendall")
               for lv in ("dataset", "user", "pair"))
    assert all(v["users_skipped"] == 0 for v in mine.values())
