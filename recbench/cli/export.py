"""`python -m recbench.export RUN_DIR... --hub OUT [--push REPO]`: run and sweep dirs as a Hugging Face Hub dataset
folder (results and per-sample details as parquet, the dataset card declaring them as configs, a model card with a
model-index block per model), checked with huggingface_hub's own parsers; --push uploads it when a token is set
(recbench/publish/hub.py, hub_card.py; docs/results_elsewhere.md)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from recbench.store.schema import SchemaError


def main(argv: Optional[list[str]] = None) -> int:
    """CLI: 0 written (and pushed), 2 with one `recbench:` line (no run dirs, a run dir it cannot read, no token)."""
    ap = argparse.ArgumentParser(prog="python -m recbench.export", description=__doc__)
    ap.add_argument("dirs", nargs="+", help="run dirs and/or sweep dirs (searched for metrics.json)")
    ap.add_argument("--hub", required=True, metavar="OUT", help="the dataset folder to write")
    ap.add_argument("--push", metavar="REPO", help="upload OUT as this dataset repo (needs HF_TOKEN or hf auth login)")
    ap.add_argument("--private", action="store_true", help="with --push: make the repo private")
    ap.add_argument("--title", default="recbench results", help="the dataset card's title")
    a = ap.parse_args(argv)
    try:
        import huggingface_hub  # noqa: F401 - the card parsers
    except ImportError:
        print("recbench: export needs huggingface_hub: pip install 'recbench[hub]'", file=sys.stderr)
        return 2
    from recbench.publish.hub import collect, write_tables
    from recbench.publish.hub_card import (HubRefused, card_file, dataset_card, eval_results, model_cards, push,
                                           validate)

    out = Path(a.hub)
    try:
        runs = [e for e in collect(a.dirs) if e.run.result is not None]
        if not runs:
            raise SchemaError(f"no run dirs (folders with a metrics.json) under {', '.join(a.dirs)}")
        out.mkdir(parents=True, exist_ok=True)
        rows = write_tables(runs, out)
        dataset_card(runs, rows, a.title, a.push or "REPO").save(out / "README.md")
        results = eval_results(runs, rows, a.push or "recbench")
        (out / "model_cards").mkdir(exist_ok=True)
        for name, card in model_cards(results).items():
            card.save(out / "model_cards" / card_file(name))
        validate(out, runs, results)
        print(f"hub export: {len(runs)} runs, {len(rows)} result rows -> {out} (README.md, {len(runs)} details "
              f"configs, {len(results)} model card(s); read back with huggingface_hub's parsers)")
        if a.push:
            print(f"pushed: {push(out, a.push, a.private)}")
    except (SchemaError, HubRefused, OSError) as e:
        print(f"recbench: {e}", file=sys.stderr)
        return 2
    return 0
