"""Prints REFERENCE for tests/stats/test_stats_batching.py from the code checked out (see that file's docstring)."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.stats.test_stats_batching import compare_outputs, outputs  # noqa: E402

out = outputs()
with tempfile.TemporaryDirectory() as tmp:
    out.update(compare_outputs(Path(tmp)))
for k, v in out.items():
    print(f"    {k!r}: {v!r},")
