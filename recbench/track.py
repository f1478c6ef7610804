"""Public entry point `python -m recbench.track RUN_DIR... --uri URI`: the CLI is recbench/cli/track.py, the trackers
recbench/publish/."""
from recbench.cli.track import main

if __name__ == "__main__":
    raise SystemExit(main())
