"""The public entry points run as `python -m` runs them (runpy, in this process) on an audited toy run: recbench.audit
prints metrics.json's order-audit block, recbench.cache stats counts the run's answers, recbench.view writes the
page, recbench.compare gives the verdict, recbench.schema.read_run reads the run; recbench.build and recbench.merge
answer --help. The Recording backend keeps every request it passes on."""
from __future__ import annotations

import json
import re
import runpy
import sys

import pytest

import recbench.schema
from recbench.run.evaluate import run_from_config
from recbench.store.schema import read_run
from recbench.testing.recording import Recording
from tests.doubles import ScriptedBackend
from tests.toy import toy_cfg
from tests.toy.scripted import first_shown, oracle

pytestmark = pytest.mark.fast


def _main(module: str, *args: str) -> int:
    """`python -m <module> <args>` in this process: its exit code."""
    saved = sys.argv[:]
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=False)
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two audited toy runs (a position-bound model, the oracle) sharing one cache; the position-bound backend is
    wrapped in Recording."""
    tmp_path = tmp_path_factory.mktemp("entry")
    rec = Recording(ScriptedBackend(first_shown))
    a = run_from_config(toy_cfg(["limit=9", "audit.orders=3"], tmp_path), tmp_path / "a", backend=rec).to_dict()
    run_from_config(toy_cfg(["limit=9", "audit.orders=3"], tmp_path), tmp_path / "b", backend=ScriptedBackend(oracle, name="oracle"))
    return tmp_path, a, rec


def test_recording_keeps_every_request_it_passes_on(runs):
    tmp, a, rec = runs
    assert len(rec.requests) == rec.inner.calls == a["this_invocation"]["backend_calls"] > 9
    assert rec.identity() == rec.inner.identity() and rec.kind == "scripted"


def test_audit_cache_view_compare_and_schema_entry_points(runs, capsys):
    tmp, a, _ = runs
    capsys.readouterr()
    assert _main("recbench.audit", str(tmp / "a")) == 0
    out = json.loads(capsys.readouterr().out)
    got, want = out["order_audit"], a["extra"]["order_audit"]  # the same records, summed in another order
    assert out["examples"] == 9 and got["orders"] == want["orders"] == 3
    assert got["per_order"] == pytest.approx(want["per_order"]) and got["kendalls_w_mean"] == pytest.approx(
        want["kendalls_w_mean"]) and got["first_slot"]["counts"] == want["first_slot"]["counts"] == [27, 0, 0, 0]
    assert _main("recbench.cache", "stats", "--json", str(tmp / "cache.sqlite")) == 0
    stats = json.loads(capsys.readouterr().out)
    assert json.dumps(stats).count(str(tmp / "cache.sqlite")) >= 1
    assert a["this_invocation"]["backend_calls"] > 9 and str(a["this_invocation"]["backend_calls"]) in json.dumps(stats)
    assert _main("recbench.view", str(tmp / "a")) == 0
    page = next((tmp / "a").glob("*.html"))
    assert "easy-00" in page.read_text()
    capsys.readouterr()
    assert _main("recbench.compare", str(tmp / "a"), str(tmp / "b")) == 0
    # 9 examples of 3 listeners (the clusters): too few for a verdict (the smallest p is 2/2^3); the oracle's tau is 1
    assert re.search(r"toy_tau +│ all +│ 3 │ .*│ +1\.000 │.*│ 0\.250 │ 0\.250 │ n\.s\.", capsys.readouterr().out)
    run = recbench.schema.read_run(tmp / "a")
    assert recbench.schema.read_run is read_run and run.result.task_name == "toy" and len(run.samples()) == 9


@pytest.mark.parametrize("module", ["recbench.build", "recbench.merge"])
def test_build_and_merge_answer_help(module, capsys):
    args = ["perrec", "--help"] if module == "recbench.build" else ["--help"]
    assert _main(module, *args) == 0
    assert "usage:" in capsys.readouterr().out
