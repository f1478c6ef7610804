#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, slow tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# headless Chromium for the report rendering test (Debian package); the test skips if it cannot be had
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: its test will skip"
fi
exec .venv/bin/python -m pytest -q "$@"
