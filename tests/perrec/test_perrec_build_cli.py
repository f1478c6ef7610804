"""`python -m recbench.build perrec ...` end to end on MovieLens-layout CSVs made from the bundled sample, and the dispatcher."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from recbench.run.construct import bundled_data
from recbench.cli.build import main as build_main
from recbench.api.errors import ConfigError

pytestmark = pytest.mark.fast


def test_cli_builds_loadable_groups(tmp_path, capsys):
    src = Path(bundled_data("perrec_sample"))
    ml = tmp_path / "ml"
    ml.mkdir()
    pd.read_csv(src / "ratings.csv.gz").rename(columns={"user_id": "userId", "item_id": "movieId"}).to_csv(ml / "ratings.csv", index=False)
    items = pd.read_json(src / "items.jsonl", lines=True)
    items.rename(columns={"item_id": "movieId"})[["movieId", "title"]].assign(genres="x").to_csv(ml / "movies.csv", index=False)
    build_main(["perrec", "--source", "movielens", "--input", str(ml), "--out", str(tmp_path / "out"),
                "--per-size", "5", "--heldout-per-size", "2", "--window-days", "60"])
    assert "| groups easy / medium / hard | 5 / 5 / 5 |" in capsys.readouterr().out
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["config"]["window_days"] == 60 and stats["source"]["kind"] == "movielens"
    from tests.helpers import compose_cfg
    from recbench.run.evaluate import run_from_config

    cfg = compose_cfg(["task=perrec_built", f"task.data_dir={tmp_path / 'out'}", "method=bm25_history",
                       "run.progress=false", "cache.enabled=false"])
    m = run_from_config(cfg, tmp_path / "run").to_dict()
    assert m["counts"]["examples"] == 15 and m["complete"]


def test_dispatcher_rejects_unknown_builders():
    with pytest.raises(ConfigError, match="Valid choices: perrec"):
        build_main(["perec"])


@pytest.mark.full  # the module entry point in its own interpreter
def test_module_entry_help():
    out = subprocess.run([sys.executable, "-m", "recbench.build", "perrec", "--help"], capture_output=True, text=True, check=True)
    assert "--gamma" in out.stdout and "--window-days" in out.stdout and "--avg" in out.stdout
