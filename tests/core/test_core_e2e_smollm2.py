"""End to end with the real SmolLM2: the CLI runs PerRecBench listwise, writes the run dir, and reruns for free."""
import json
import os
import subprocess
import sys

import pytest

from recbench.api.types import Constraint, Request, SamplingParams

pytestmark = pytest.mark.slow


def test_cli_listwise_smollm2_then_free_rerun(tmp_path):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs"), "RECBENCH_CACHE_DIR": str(tmp_path / "cache")}
    args = [sys.executable, "-m", "recbench", "task=perrec", "model=smollm2", "method=listwise", "limit=4",
            "task.difficulties=[hard]", "run.progress=false"]
    r1 = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert r1.returncode == 0, r1.stderr[-3000:]
    run_dir = next((tmp_path / "runs" / "perrec" / "smollm2" / "listwise").iterdir())
    m1 = json.loads((run_dir / "metrics.json").read_text())
    assert m1["counts"]["examples"] == 4 and m1["this_invocation"]["backend_calls"] == 4
    assert m1["counts"]["parsed"] + m1["counts"]["parse_failed"] == 4
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and all(s["calls"][0]["response"] for s in samples)  # real model text recorded
    assert all(s["parse_status"] in ("ok", "repaired", "failed") for s in samples)
    assert (run_dir / "config.yaml").exists() and "ptc" in r1.stdout
    r2 = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert r2.returncode == 0, r2.stderr[-3000:]
    m2 = json.loads((run_dir / "metrics.json").read_text())
    assert m2["this_invocation"]["backend_calls"] == 0 and m2["metrics"] == m1["metrics"]


def test_hf_backend_greedy_batch_equals_single_and_choice_constraint(smollm2):
    msgs = [[{"role": "user", "content": f"Name one fruit that is {c}. Answer with one word."}]
            for c in ("red", "yellow", "green")]
    sp = SamplingParams(max_tokens=12)
    batched = smollm2.generate([Request.chat(m, sp) for m in msgs])
    single = [smollm2.generate([Request.chat(m, sp)])[0] for m in msgs]
    assert [r.text for r in batched] == [r.text for r in single]  # left padding does not change greedy answers
    assert all(r.ok and r.completion_tokens > 0 and r.prompt_tokens > 10 for r in batched)
    choice = Constraint(kind="choice", choices=("[User A]", "[User B]"))
    res = smollm2.generate([Request.chat(msgs[0], sp, constraint=choice)])[0]
    assert res.text in choice.choices and len(res.logprobs) == 2
    ident = smollm2.identity()
    assert ident["weights"].startswith("sha256:") and ident["chat_template"]
