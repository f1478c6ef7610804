"""Build PerRecBench groups from raw ratings (Amazon Reviews 2023 JSONL(.gz)/CSV/parquet, MovieLens CSV).

    python -m recbench.build perrec --source movielens --input ../shared/data/ml-latest-small --out built/ml
    python -m recbench.build perrec --source amazon-csv --input All_Beauty.5core.csv.gz --meta meta.jsonl --out built/beauty --gamma 10
    python -m recbench.build perrec --source amazon-jsonl --category Beauty=Beauty.jsonl.gz --category Toys=Toys.jsonl.gz --out built/two
        [--launcher submitit_local]   # one domain per category; with a launcher, one job per category

Engines: `duckdb` (default; out of core, memory set by --memory-limit) and `pandas` (in memory); on the same input and
seed they write the same groups (docs/perrec.md, "Building at scale").

Selection (Tan et al. 2025, PerRecBench): for every query item, the raters who rated it within one co-rating
window of `window_days` (tumbling windows anchored at the item's first eligible rating), who are ACTIVE (more
than `gamma` ratings strictly before their own rating of the item), and whose relative ratings (rating minus the
user's average over the history strictly before the query; `--avg whole` reproduces the released data's
whole-history average) differ pairwise by more than `lam`. Groups of 2/3/4 users = easy/medium/hard, `per_size`
each, sampled with `seed`. Each difficulty is its own test set (as in the released per-level files
item2group_avg_diff_sample-{easy,medium,hard}.json): within a difficulty every group comes from a different
(item, window); one window may give groups of several difficulties, which then share users; a held-out split (`heldout_per_size` per size) drawn from a seeded share of the query
items (`heldout_item_fraction`) disjoint from the test groups' items feeds few-shot prompts and fine-tuning. Output layout: see docs/perrec.md ("recbench group format").

The package, one module per job: `cli` (the command line and `build()`), `config` (BuildConfig), `checks` (every
refusal before or while reading), `readers` (the pandas engine's inputs), `pandas_engine` and `duckdb_engine` + `sql`
(the two engines), `select` (the seeded draws both share), `merge` (a duckdb build's selection over its prepared
categories), `shards` (one category per submitit job), `member_ratings`, `stats`, `write` and `run` (statistics, then
the files through a staging folder); `synth` writes the bundled SYNTHETIC sample (data/perrec_sample), its groups
selected by `groups`."""
from recbench.tasks.perrec.build.cli import build, main
from recbench.tasks.perrec.build.config import BuildConfig

__all__ = ["BuildConfig", "build", "main"]
