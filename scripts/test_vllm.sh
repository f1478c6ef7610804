#!/usr/bin/env bash
# Set up (idempotent) the vLLM CPU venv and run the backend tests on the real engine and a real vLLM server.
# CI: bash scripts/test_vllm.sh   (install ~3.5 min cold; tests ~10 min on 2 shared cores)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_vllm.sh
export VLLM_ENABLE_V1_MULTIPROCESSING=0 HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1
# the one-time GGUF -> HF conversion (cached in ~/.cache/recbench/models; a no-op when present)
.venv-vllm/bin/python scripts/convert_smollm2_hf.py >/dev/null
exec .venv-vllm/bin/python -m pytest -q tests/backends "$@"
