"""Alias kept for old commands: the core measurements now live in benchmarks/bench_engine.py.

    python benchmarks/bench_core.py [--quick]   ==   python benchmarks/bench_engine.py --only replay,hf [--quick]

(the cache replay of 600 groups x 3 methods, and the hf eval loop vs raw batched generate on the same prompts)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import main  # noqa: E402

if __name__ == "__main__":
    main(["--only", "replay,hf", *sys.argv[1:]])
