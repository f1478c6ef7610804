#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, slow tests included, then the real-vLLM backend tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# headless Chromium for the report rendering test (Debian package); the test skips if it cannot be had
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: its test will skip"
fi
.venv/bin/python -m pytest -q --ignore=tests/fuzz "$@"
# the fuzz suite calls recbench's entry point in-process, case after case: it gets an interpreter of its own, so the
# logging and stream state other tests leave behind cannot reach it (docs/fuzz.md)
.venv/bin/python -m pytest -q tests/fuzz "$@"
# the vllm / openai backends against the real vLLM CPU engine and server, in their own venv (.venv-vllm)
bash scripts/test_vllm.sh
