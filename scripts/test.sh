#!/usr/bin/env bash
# The test suite in two tiers (README, "Tests"); every test names its tier (pyproject.toml's markers):
#   bash scripts/test.sh          the full suite, as CI runs it (.ci/run): set up (idempotent), then every test, slow
#                                 ones included, then the fuzz suite, then the real-vLLM backend tests
#   bash scripts/test.sh --fast   the fast tier (under 3 minutes on 2 cores): the tests marked fast, in-process, no real
#                                 model, no fuzz suite, no vLLM, one worker per core; sets up only when .venv lacks a
#                                 package it needs
# Other arguments go to the main pytest run (for example -x, -k loop, or -m "not slow").
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fast" ]; then
  shift
  # setup.sh re-resolves every dependency with pip (tens of seconds even when nothing changes): only when needed
  .venv/bin/python -c "import recbench, pytest, hydra, xdist" 2>/dev/null || bash scripts/setup.sh
  # one worker per core (pytest-xdist), each test file on one worker (module fixtures are built once)
  exec .venv/bin/python -m pytest -q -n auto --dist loadfile --tier fast --ignore=tests/fuzz "$@"
fi
bash scripts/setup.sh
# headless Chromium for the report rendering test (Debian package); the test skips if it cannot be had
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: its test will skip"
fi
# pdflatex with booktabs for the LaTeX report test (Debian: texlive-latex-base has pdflatex and graphicx,
# texlive-latex-recommended booktabs); the test skips if it cannot be had
if ! command -v pdflatex >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends texlive-latex-base texlive-latex-recommended \
    >/dev/null) || echo "pdflatex not installed: the LaTeX report test will skip"
fi
.venv/bin/python -m pytest -q --ignore=tests/fuzz "$@"
# the fuzz suite calls recbench's entry point in-process, case after case: it gets an interpreter of its own, so the
# logging and stream state other tests leave behind cannot reach it (docs/fuzz.md)
.venv/bin/python -m pytest -q tests/fuzz "$@"
# the vllm / openai backends against the real vLLM CPU engine and server, in their own venv (.venv-vllm)
bash scripts/test_vllm.sh
