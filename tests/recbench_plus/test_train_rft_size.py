"""RFT whose training queries cannot fill one optimizer step (prompts_per_step x grad_accum prompts) is refused before
any model is loaded or file written: one `recbench:` line, exit 2 (it used to train 0 steps, write an adapter and
exit 0)."""
from __future__ import annotations

import pytest

from recbench.api.types import Example

pytestmark = pytest.mark.fast


@pytest.fixture()
def train():
    """The training CLI and its rft module: imported by the tests, not at collection (rft imports transformers, seconds
    of CPU in every pytest-xdist worker that collects this file)."""
    from recbench.tasks.recbench_plus.train import __main__ as cli
    from recbench.tasks.recbench_plus.train import rft

    return cli, rft


def _fake_part(n: int):
    def load_part(cfg, part="train"):
        return object(), [Example(id=str(i), data={}) for i in range(n)][: int(cfg.max_queries or n)]
    return load_part


def _no_model(cfg):
    raise AssertionError("the policy model was loaded before the refusal")


@pytest.mark.parametrize("queries,pps,accum", [(8, 4, 4), (1, 1, 2), (15, 4, 4)])
def test_too_few_queries_for_one_step_are_refused_before_training(tmp_path, monkeypatch, capsys, queries, pps, accum,
                                                                  train):
    cli, rft = train
    monkeypatch.setattr(rft, "load_part", _fake_part(100))
    monkeypatch.setattr(rft, "policy", _no_model)
    out = tmp_path / "adapter"
    with pytest.raises(SystemExit) as e:
        cli.main(["rft", f"max_queries={queries}", f"prompts_per_step={pps}", f"grad_accum={accum}", f"out={out}"])
    assert e.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith(f"recbench: config error: rft: {queries} training queries "
                                               f"(max_queries={queries}) cannot fill one optimizer step")
    assert f"= {pps * accum} prompts, so GRPO would train 0 steps. Fix: max_queries>={pps * accum}" in err[0]
    assert not out.exists()


def test_exactly_one_step_of_queries_passes_the_check(tmp_path, monkeypatch, train):
    cli, rft = train
    monkeypatch.setattr(rft, "load_part", _fake_part(100))
    monkeypatch.setattr(rft, "policy", _no_model)
    with pytest.raises(AssertionError, match="policy model was loaded"):  # got past the check, to the model
        cli.main(["rft", "max_queries=16", "prompts_per_step=4", "grad_accum=4", f"out={tmp_path / 'a'}"])
