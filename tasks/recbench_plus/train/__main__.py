"""RecBench+ fine-tuning CLI, one command per stage (key=value overrides of conf/sft|rft/recbench_plus.yaml):

    python -m recbench.tasks.recbench_plus.train split                       # sizes of the train / held-out parts
    python -m recbench.tasks.recbench_plus.train sft out=adapters/rbp_sft
    python -m recbench.tasks.recbench_plus.train rft init=adapters/rbp_sft out=adapters/rbp_sft_rft
    python -m recbench task=recbench_plus_ml100k_heldout model=smollm2 +model.backend.adapter=adapters/rbp_sft_rft
    python -m recbench.tasks.recbench_plus.train plot adapters/rbp_sft_rft/curve.csv curve.png
    python -m recbench.tasks.recbench_plus.train reward adapters=[base,adapters/rbp_sft,adapters/rbp_sft_rft] \
        samples=16 report=reward.json   # the reward each policy earns on the RFT prompts, every pair compared
"""
from __future__ import annotations

import json
import sys
from typing import Optional


def main(argv: Optional[list[str]] = None) -> None:
    """Dispatch split | sft | rft | plot | reward; a refused config or bad data is one `recbench:` line, exit 2."""
    from recbench.api.errors import ConfigError, DataError

    try:
        _main(argv)
    except (ConfigError, DataError) as e:
        print(f"recbench: {'config error' if isinstance(e, ConfigError) else 'error'}: {e}", file=sys.stderr)
        sys.exit(2)


def _main(argv: Optional[list[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("split", "sft", "rft", "plot", "reward"):
        print(__doc__)
        sys.exit(0 if argv and argv[0] in ("-h", "--help") else 2)
    from recbench.tasks.recbench_plus.train.common import stage_config

    cmd, rest = argv[0], argv[1:]
    if cmd == "plot":
        from recbench.tasks.recbench_plus.train.curve import plot_curve

        window = [int(a.split("=", 1)[1]) for a in rest[2:] if a.startswith("window=")]
        if len(rest) != 2 + len(window):
            sys.exit("usage: python -m recbench.tasks.recbench_plus.train plot CURVE.csv OUT.png [window=N]")
        print(plot_curve(rest[0], rest[1], window=window[0] if window else 1))
        return
    if cmd == "reward":
        from omegaconf import OmegaConf

        from recbench.tasks.recbench_plus.train.policy_reward import run_policy_reward

        own = OmegaConf.from_dotlist([a for a in rest if a.split("=", 1)[0] in ("adapters", "samples", "report")])
        if not own.get("adapters"):
            sys.exit("reward: give adapters=[base,<adapter folder>,...] (every pair is compared)")
        cfg = stage_config("rft", [a for a in rest if a.split("=", 1)[0] not in ("adapters", "samples", "report")])
        res = run_policy_reward(cfg, [str(a) for a in own.adapters], int(own.get("samples", 16)), own.get("report"))
        print(json.dumps({"summary": res["summary"], "comparisons": res["comparisons"]}, indent=1))
        return
    if cmd == "split":
        from recbench.tasks.recbench_plus.train.records import load_part

        cfg = stage_config("sft", rest)
        task, ex = load_part(cfg, "train")
        print(json.dumps(task.split_info))
    elif cmd == "sft":
        from recbench.tasks.recbench_plus.train.sft import run_sft

        info = run_sft(stage_config("sft", rest))
        print(json.dumps({k: info[k] for k in ("train_queries", "seconds")}),
              f"loss {info['losses'][0]:.3f} -> {info['losses'][-1]:.3f}" if info["losses"] else "")
    else:
        from recbench.tasks.recbench_plus.train.rft import run_rft

        info = run_rft(stage_config("rft", rest))
        from recbench.tasks.recbench_plus.train.curve import blocks, thirds

        r = info["rewards"]
        c = info["config"]
        per_epoch = max(1, -(-info["train_queries"] // (int(c["prompts_per_step"]) * int(c["grad_accum"]))))  # steps
        print(json.dumps({k: info[k] for k in ("train_queries", "seconds", "init")}),
              f"reward {r[0]:.3f} -> {r[-1]:.3f}" if r else "", json.dumps(thirds(r)) if len(r) >= 3 else "",
              f"per epoch ({per_epoch} steps): {[round(x, 3) for x in blocks(r, per_epoch)]}" if r else "")


if __name__ == "__main__":
    main()
