"""Fixtures the RecBench+ tests share."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data


@pytest.fixture()
def bundle(tmp_path) -> Path:
    """A writable copy of the bundled RecBench+ sample, for tests that plant a defect in one of its files."""
    d = tmp_path / "bundle"
    shutil.copytree(bundled_data("recbench_plus_sample"), d)
    return d
