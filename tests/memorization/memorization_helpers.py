"""Running the memorization probe in-process with a planted-effect double (recbench.testing.planted)."""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

from recbench.run.construct import bundled_data
from recbench.run.evaluate import run_from_config
from recbench.tasks.memorization.catalogue import read_catalogue
from tests.helpers import compose_cfg

BUNDLED = "memorization_bundled"


def bundled_items() -> dict[str, str]:
    """The bundled PerRecBench sample's catalogue (item id -> title), what memorization_bundled probes."""
    return read_catalogue("perrec_sample", bundled_data("perrec_sample"), "item_id").items


@functools.lru_cache(maxsize=16)
def _composed(overrides: tuple[str, ...]):
    return compose_cfg([f"task={BUNDLED}", *overrides])


def probe(tmp_path: Path, overrides: list[str], backend, name: str = "run", seed: int = 0) -> tuple[dict, list[dict]]:
    """(metrics.json, samples.jsonl records) of one probe run through the loop with `backend` (the config is
    composed once per set of overrides; `seed` is the run seed: control set, example order, distractors)."""
    cfg = copy.deepcopy(_composed(tuple(overrides)))
    cfg.seed = seed
    cfg.cache.path = str(tmp_path / "cache.sqlite")
    cfg.cache.derived_dir = str(tmp_path / "derived")
    cfg.run.progress = False
    m = run_from_config(cfg, tmp_path / name, backend=backend).to_dict()
    recs = [json.loads(x) for x in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
    return m, recs


def rates(m: dict) -> tuple[float, float]:
    """(coverage on real items, recall rate on the control set) from metrics.json."""
    s = m["extra"]["memorization"]
    return s["real"]["rate"], s["control"]["rate"]
