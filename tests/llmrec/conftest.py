"""Helpers for the LLMRec tests: compose the real Hydra config and run it through the real app."""
from __future__ import annotations

from pathlib import Path

import pytest
from tests.llmrec.llmrec_helpers import compose_cfg

from recbench.run.evaluate import run_from_config


@pytest.fixture
def run_cfg(tmp_path: Path):
    """run_cfg(backend, *overrides) -> (metrics, records) of a fresh run in a temp run dir with a temp cache."""
    from tests.helpers import read_samples

    def _run(backend, *overrides: str, name: str = "run"):
        cfg = compose_cfg(f"cache.path={tmp_path / 'cache.sqlite'}", *overrides)
        metrics = run_from_config(cfg, tmp_path / name, backend=backend).to_dict()
        return metrics, read_samples(tmp_path / name)

    return _run


@pytest.fixture(scope="session")
def p5_dir(shared_data: Path) -> Path:
    """../shared/data/beauty_p5, or skip."""
    p = shared_data / "beauty_p5"
    if not (p / "sequential_data.txt").exists():
        pytest.skip(f"P5 Beauty not available at {p}")
    return p


@pytest.fixture(scope="session")
def az23_dir(shared_data: Path) -> Path:
    """../shared/data/amazon2023_all_beauty, or skip."""
    p = shared_data / "amazon2023_all_beauty"
    if not (p / "filtered_user_reviews.json").exists():
        pytest.skip(f"Amazon 2023 All_Beauty not available at {p}")
    return p
