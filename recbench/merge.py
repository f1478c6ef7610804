"""Public entry point `python -m recbench.merge SHARD_DIR... [--out DIR]`: the CLI is recbench/cli/merge.py, the merge
recbench/run/merge.py, the shard files recbench/store/shards.py."""
from recbench.cli.merge import main

if __name__ == "__main__":
    raise SystemExit(main())
