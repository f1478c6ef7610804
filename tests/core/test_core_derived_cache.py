"""The derived-data cache: a second load reads the stored examples; changed bytes, a torn entry or a missing input
rebuild or report, never serve stale data."""
from __future__ import annotations

from pathlib import Path

import pytest

from recbench.store import derived_cache
from recbench.store.derived_cache import disk_cached

pytestmark = pytest.mark.fast


@pytest.fixture()
def cache_dir(tmp_path):
    derived_cache.configure(tmp_path / "derived")
    yield tmp_path / "derived"
    derived_cache._DIR.clear()


def _counting(tmp_path: Path):
    calls = []

    @disk_cached("demo", lambda path, k: [Path(path)])
    def build(path: str, k: int) -> list[str]:
        calls.append((path, k))
        return Path(path).read_text().split()[:k]

    return build, calls


def test_second_call_reads_the_entry_and_changed_bytes_rebuild(tmp_path, cache_dir):
    f = tmp_path / "in.txt"
    f.write_text("a b c d")
    build, calls = _counting(tmp_path)
    assert build(str(f), 2) == ["a", "b"] and build(str(f), 2) == ["a", "b"]
    assert len(calls) == 1 and len(list(cache_dir.glob("demo-*.pkl"))) == 1
    assert build(str(f), 3) == ["a", "b", "c"] and len(calls) == 2  # other arguments: another entry
    f.write_text("x y c d")  # same size, other bytes
    assert build(str(f), 2) == ["x", "y"] and len(calls) == 3


def test_a_torn_entry_is_rebuilt_and_a_missing_input_reaches_the_builder(tmp_path, cache_dir, caplog):
    f = tmp_path / "in.txt"
    f.write_text("a b")
    build, calls = _counting(tmp_path)
    build(str(f), 1)
    entry = next(cache_dir.glob("demo-*.pkl"))
    entry.write_bytes(entry.read_bytes()[:5])
    assert build(str(f), 1) == ["a"] and len(calls) == 2
    assert "unreadable" in caplog.text
    with pytest.raises(FileNotFoundError):
        build(str(tmp_path / "missing.txt"), 1)
    assert not list(cache_dir.glob("*.tmp*"))


def test_off_when_configured_none(tmp_path):
    derived_cache.configure(None)
    try:
        f = tmp_path / "in.txt"
        f.write_text("a")
        build, calls = _counting(tmp_path)
        build(str(f), 1), build(str(f), 1)
        assert len(calls) == 2
    finally:
        derived_cache._DIR.clear()
