"""Model-free PerRecBench runs made in-process for the publish tests: a sweep-like folder of three methods."""
from __future__ import annotations

from pathlib import Path

from recbench.run.evaluate import run_from_config
from tests.helpers import compose_cfg

METHODS = ("bm25_history", "random", "user_avg")


def model_free_sweep(root: Path, limit: int = 8, methods: tuple[str, ...] = METHODS) -> Path:
    """root/sweep/perrec/none/<method>/limit=<limit> for each method (a multirun.yaml marks the sweep dir)."""
    sweep = root / "sweep"
    for m in methods:
        cfg = compose_cfg([f"method={m}", f"limit={limit}", f"cache.path={root / 'cache.sqlite'}", "run.progress=false"])
        run_from_config(cfg, sweep / "perrec" / "none" / m / f"limit={limit}")
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task: [task=perrec, 'method=" + ",".join(methods)
                                         + f"', limit={limit}]\n", encoding="utf-8")
    return sweep
