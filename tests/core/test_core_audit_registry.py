"""The audits on the one Registry (recbench/api/registry.py through recbench/api/audits.py): a key taken twice is an
error naming both, a non-Audit or a non-Block refused at registration, and the shipped audits declared lazily, so
reading a metrics.json imports the block module of the keys it holds and no audit (nor anything of the report)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recbench.api import audits
from recbench.api.audits import Audit, Block
from recbench.api.registry import RegistryError
from recbench.audits.order import DisplayOrders

pytestmark = pytest.mark.fast


class Imposter(Audit):
    """Another audit under a shipped audit's key."""

    key = "order_audit"


class NotABlock:
    """Any class that is no Block."""


class BadBlocks(Audit):
    """An audit whose block record is no Block."""

    key = "bad_blocks"
    blocks = {"bad_blocks": NotABlock}  # type: ignore[dict-item]


def test_a_key_taken_twice_is_an_error_naming_both():
    audits.registered()
    with pytest.raises(RegistryError, match=r"audit 'order_audit' is (registered|declared) .*recbench.audits.order"):
        audits.register(Imposter())
    assert type(audits.AUDITS.get("order_audit")) is DisplayOrders  # the shipped one is still there
    audits.register(audits.AUDITS.get("order_audit"))  # the same audit again: a module imported twice, no error


def test_a_wrong_type_is_refused_at_registration():
    with pytest.raises(RegistryError, match=r"audit 'x': .* is not an Audit instance"):
        audits.AUDITS.register("x", object())  # type: ignore[arg-type]
    with pytest.raises(RegistryError, match=r"audit block 'bad_blocks': .* is not a Block class"):
        audits.register(BadBlocks())
    assert "bad_blocks" not in audits.AUDITS  # refused whole


def test_every_shipped_audit_and_block_is_declared_and_typed():
    keys = [a.key for a in audits.registered()]
    assert keys[:6] == ["order_audit", "template_audit", "seed_audit", "noise_floor", "contamination",
                        "judge_validity"]  # by rank
    types = audits.block_types()
    assert {"order_audit", "pair_order_consistency", "template_audit", "seed_audit", "noise_floor", "contamination",
            "judge_validity"} <= set(types) and all(issubclass(t, Block) for t in types.values())


def test_reading_a_metrics_json_imports_no_audit_and_no_report():
    code = ("import sys\n"
            "from recbench.store.result import split_extra\n"
            "own, blocks = split_extra({'strata': {'a': 1}, 'seed_audit': {'seeds': 2}})\n"
            "assert own == {'strata': {'a': 1}} and type(blocks['seed_audit']).__name__ == 'SeedBlock'\n"
            "print(sorted(m for m in sys.modules if m.startswith(('recbench.audits', 'recbench.report'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['recbench.audits', 'recbench.audits.seed_blocks']"


def test_every_audit_module_is_declared_in_the_table():
    """A module of recbench/audits that registers an audit has its line in the package's table (else a run whose
    config switches it on would not import it)."""
    from recbench.audits import TABLE

    shipped = {a.key for a in audits.registered() if type(a).__module__.startswith("recbench.audits.")}
    assert shipped == set(TABLE)
    assert all(audits.BLOCKS.get(k) is tp for a in audits.registered() for k, tp in a.blocks.items())


def test_a_run_imports_only_the_audits_its_config_switches_on(tmp_path):
    code = ("import sys\n"
            "from recbench.run.evaluate import run_from_config\n"
            "from tests.doubles import ScriptedBackend\n"
            "from tests.toy import toy_cfg\n"
            "from tests.toy.scripted import reverse\n"
            "for name, more in (('plain', []), ('seeds', ['audit.seeds=2', 'sampling.temperature=0.5'])):\n"
            f"    cfg = toy_cfg(['limit=3', 'cache.path={tmp_path / 'c.sqlite'}', *more])\n"
            f"    run_from_config(cfg, '{tmp_path}/' + name, backend=ScriptedBackend(reverse))\n"
            "    print(sorted(m for m in sys.modules if m.startswith('recbench.audits.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[2])).stdout.splitlines()
    plain = ["recbench.audits.order", "recbench.audits.order_blocks", "recbench.audits.variants"]
    assert out == [str(plain), str(sorted(plain + ["recbench.audits.seed_blocks", "recbench.audits.seeds"]))]
