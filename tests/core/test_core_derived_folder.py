"""Folder entries of the derived-data cache (the hf backend's converted GGUF weights): built once, found by a later
call, keyed by the input bytes; a torn entry (truncated file, no manifest, a crashed build's leftovers) is rebuilt,
a failed build leaves nothing behind, and `cache.derived_dir=null` turns it off."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.store import derived_cache
from recbench.store.derived_cache import MANIFEST, discard, folder_complete, folder_entry

pytestmark = pytest.mark.fast


@pytest.fixture()
def cache_dir(tmp_path):
    derived_cache.configure(tmp_path / "derived")
    yield tmp_path / "derived"
    derived_cache._DIR.clear()


def _builder(calls: list):
    def build(out: Path) -> None:
        calls.append(out)
        (out / "weights.bin").write_bytes(b"w" * 1000)
        (out / "sub").mkdir()
        (out / "sub" / "config.json").write_text('{"a": 1}')

    return build


def _entry(tmp_path: Path, calls: list, content: bytes = b"gguf bytes"):
    src = tmp_path / "model.gguf"
    if not src.exists() or src.read_bytes() != content:
        src.write_bytes(content)
    return folder_entry("hf-model-float32", ("float32", "5.0"), [src], (__file__,), _builder(calls))


def test_built_once_then_found_and_other_bytes_make_another_entry(tmp_path, cache_dir):
    calls: list = []
    first = _entry(tmp_path, calls)
    assert first is not None and first.parent == cache_dir and first.name.startswith("hf-model-float32-")
    assert len(calls) == 1 and calls[0] != first  # written under a temporary name, then renamed
    assert json.loads((first / MANIFEST).read_text())["files"] == {"sub/config.json": 8, "weights.bin": 1000}
    assert _entry(tmp_path, calls) == first and len(calls) == 1
    other = _entry(tmp_path, calls, b"other bytes")  # the GGUF changed: a new key
    assert other != first and len(calls) == 2 and folder_complete(first) and folder_complete(other)
    assert not list(cache_dir.glob("*.tmp*"))


@pytest.mark.parametrize("damage", ["truncate", "no_manifest", "bad_manifest", "missing_file"])
def test_a_torn_entry_is_rebuilt(tmp_path, cache_dir, caplog, damage):
    calls: list = []
    entry = _entry(tmp_path, calls)
    if damage == "truncate":
        (entry / "weights.bin").write_bytes(b"w" * 10)
    elif damage == "no_manifest":
        (entry / MANIFEST).unlink()
    elif damage == "bad_manifest":
        (entry / MANIFEST).write_text('{"files": ')
    else:
        (entry / "sub" / "config.json").unlink()
    assert not folder_complete(entry)
    assert _entry(tmp_path, calls) == entry and len(calls) == 2
    assert folder_complete(entry) and (entry / "weights.bin").stat().st_size == 1000
    assert "incomplete: rebuilt" in caplog.text


def test_a_crashed_builds_leftovers_are_removed(tmp_path, cache_dir):
    calls: list = []
    entry = _entry(tmp_path, calls)
    discard(entry)
    assert not entry.exists()
    leftover = cache_dir / f"{entry.name}.tmp123"
    leftover.mkdir()
    (leftover / "weights.bin").write_bytes(b"half")
    assert _entry(tmp_path, calls) == entry and len(calls) == 2 and not leftover.exists()


def test_a_failed_build_leaves_nothing(tmp_path, cache_dir, caplog):
    src = tmp_path / "model.gguf"
    src.write_bytes(b"x")

    def disk_full(out: Path) -> None:
        (out / "weights.bin").write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    def broken(out: Path) -> None:
        (out / "weights.bin").write_bytes(b"partial")
        raise ValueError("conversion mismatch")

    assert folder_entry("k", (), [src], (__file__,), disk_full) is None  # the caller falls back to the GGUF
    assert "not written" in caplog.text
    with pytest.raises(ValueError, match="conversion mismatch"):
        folder_entry("k", (), [src], (__file__,), broken)
    assert [p.name for p in cache_dir.iterdir() if not p.name.endswith(".lock")] == []


def test_off_when_configured_none(tmp_path):
    derived_cache.configure(None)
    try:
        calls: list = []
        assert _entry(tmp_path, calls) is None and calls == []
    finally:
        derived_cache._DIR.clear()
