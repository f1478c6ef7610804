"""`python -m recbench.merge SHARD_DIR... [--out DIR]`: join the shard dirs of a run (run.shard=I run.shards=N) into
the run dir of the same command without shards, and the sweep callback that does it when the shards were launched
as one multirun (`-m 'run.shard=range(N)' run.shards=N`, e.g. a SLURM job array through hydra/launcher=slurm)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

from recbench.cli.exits import (
    EXIT_CANNOT_RUN,
    _user_errors,
    exit_code,
    worst_code,
)
from recbench.store.redact import redact_text
from recbench.store.schema import RunResult

try:  # the callback needs hydra; the CLI's import does not
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover - hydra is a core dependency
    Callback = object  # type: ignore[misc,assignment]


def _merged_line(result: RunResult, n: int, cache: Optional[dict[str, Any]]) -> str:
    c = result.counts
    line = f"recbench: merged {n} shard(s), {c.examples} example(s), into {result.run_dir}"
    if cache is not None:
        added = sum(r["added"] for r in cache["sources"])
        line += f"; {len(cache['sources'])} shard cache(s) merged into {cache['dest']} (+{added} rows)"
    if not result.complete:
        line += (f"; incomplete: {c.backend_errors} example(s) abandoned after backend errors (rerun the shards' "
                 "commands, then merge again)")
    return line


def _merge_one(dirs: list[Path], out: Optional[str], cache: Optional[str], brief: bool,
               merge_caches: bool) -> tuple[int, Optional[str]]:
    """Merge one run's shards and print its summary: (exit code, the refusal's message or None)."""
    from recbench.cli.summary import print_summary
    from recbench.run.merge import merge_shards

    try:
        merged = merge_shards(dirs, out=out, cache=cache, merge_caches=merge_caches)
    except _user_errors() as e:
        msg = redact_text(str(e))
        print(f"recbench: cannot merge: {msg}", file=sys.stderr)
        return EXIT_CANNOT_RUN, msg
    print_summary(merged.result, brief=brief)
    for w in merged.warnings:
        print(f"recbench: warning: {w}", file=sys.stderr)
    print(_merged_line(merged.result, len(dirs), merged.cache), file=sys.stderr)
    return exit_code(merged.result), None


def merge_groups(paths: list[str], out: Optional[str] = None, cache: Optional[str] = None,
                 merge_caches: bool = True) -> int:
    """Merge every group of shard dirs found under `paths` (grouped by the run dir they merge into), print one
    summary per merged run and one `recbench:` line per refused group; the worst exit code (0, 2 refused, 3
    incomplete)."""
    from recbench.store.shards import (
        SHARD_FILE,
        ShardError,
        find_shard_dirs,
        group_by_merged_dir,
    )

    try:
        dirs = find_shard_dirs(paths)
        if not dirs:
            raise ShardError(f"no shard dir (a folder with shard.json) in {', '.join(paths)}: shards are runs made "
                             "with run.shard=I run.shards=N")
        named = all((Path(x) / SHARD_FILE).is_file() for x in paths)  # shard dirs named by hand: one run
        groups = {None: dirs} if named else group_by_merged_dir(dirs)
        if out is not None and len(groups) > 1:
            raise ShardError(f"the shard dirs belong to {len(groups)} different runs; --out takes the shards of one "
                             "run (leave --out out to merge each run into its own dir)")
    except _user_errors() as e:
        print(f"recbench: cannot merge: {redact_text(str(e))}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    return worst_code([_merge_one(group, out, cache, False, merge_caches)[0] for group in groups.values()])


def main(argv: Optional[list[str]] = None) -> int:
    """CLI: merge shard dirs (or folders holding them) into the unsharded run dir; exit 0, 2 (refused) or 3
    (merged, but some examples were abandoned after backend errors)."""
    ap = argparse.ArgumentParser(
        prog="python -m recbench.merge",
        description="Join the shard dirs of one run (run.shard=I run.shards=N) into one run dir: checks that they "
                    "share config, code and data, refuses gaps and overlaps, merges samples, prompts, errors and "
                    "the shards' response caches, and aggregates metrics.json as the unsharded run would.")
    ap.add_argument("paths", nargs="+", metavar="SHARD_DIR", help="shard run dirs, or folders searched for them "
                    "(a sweep dir: each run's shards are merged into that run's dir)")
    ap.add_argument("--out", help="the merged run dir (default: the shard dirs' folder and name without "
                    "run.shard/run.shards, the run dir of the same command without shards)")
    ap.add_argument("--cache", help="merge the shards' response caches into this file (default: the cache.path the "
                    "shards were seeded from, else $RECBENCH_CACHE_DIR/responses.sqlite)")
    ap.add_argument("--no-cache-merge", action="store_true", help="leave the shards' response caches where they are")
    args = ap.parse_args(argv)
    return merge_groups(args.paths, out=args.out, cache=args.cache, merge_caches=not args.no_cache_merge)


class MergeShardsCallback(Callback):  # type: ignore[misc]
    """When a multirun ends, merge the shards it holds: every group of shard dirs under the sweep dir into the run dir
    of the same overrides without run.shard / run.shards (recbench.run.merge). A refused group prints its one line
    and leaves job_failed.json in that run dir, so the sweep's exit code says so (2); runs before the report, which
    then shows the merged run."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        """Merge every run's shards under the sweep dir (nothing when the sweep holds no shard)."""
        from recbench.store.shards import find_shard_dirs, group_by_merged_dir

        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not self.enabled or not sweep_dir.is_dir():
            return
        try:
            groups = group_by_merged_dir(find_shard_dirs([sweep_dir]))
        except Exception as e:  # noqa: BLE001 - a callback must not turn a finished sweep into a traceback
            print(f"recbench: cannot merge the shards under {sweep_dir}: {e}", file=sys.stderr)
            return
        for out, dirs in groups.items():
            if out is None:  # shard dirs named by hand (hydra.run.dir): merged with python -m recbench.merge --out
                continue
            try:
                code, msg = _merge_one(dirs, str(out), None, True, True)
            except Exception as e:  # noqa: BLE001 - one run's failure spares the others and the report
                code, msg = EXIT_CANNOT_RUN, f"{type(e).__name__}: {e}"
                print(f"recbench: cannot merge the shards of {out}: {msg}", file=sys.stderr)
            if code == EXIT_CANNOT_RUN:  # the sweep's exit code and its table name the refused merge
                from recbench.cli.sweep import write_job_failed

                write_job_failed(out, RuntimeError(f"{msg} (merge by hand: python -m recbench.merge {out.parent})"),
                                 EXIT_CANNOT_RUN, [])
