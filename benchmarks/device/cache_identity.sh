#!/bin/bash
# The device class in the cache identity, on a GPU machine (docs/backends.md, "The device in the cache identity"):
# a device=cuda run, then device=cpu of the same model and dtype (must call the model: 0 cache hits), then each again
# (each served from its own device's answers). Prepare here, run there:
#   python benchmarks/device/make_tiny_model.py .gpu/tiny
#   copy hydra, omegaconf, antlr4 from .venv's site-packages into .gpu/site; cp312 wheels the GPU image lacks
#   (rapidfuzz) into .gpu/whl; then on the GPU machine, carrying .gpu: bash benchmarks/device/cache_identity.sh
cd "$(dirname "$0")/../.."
if ls .gpu/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl || exit 1
fi
[ -e recbench/conf ] || ln -s ../conf recbench/conf; [ -e recbench/data ] || ln -s ../data recbench/data
export PYTHONPATH=$PWD/.gpu/site:/tmp/site:$PWD RECBENCH_CACHE_DIR=/tmp/gpuchk/cache PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpuchk/logs}; mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import torch,transformers;print('torch',torch.__version__,'cuda',torch.cuda.is_available(),'transformers',transformers.__version__)"
run() { python3 -m recbench task=perrec model=smollm2 method=listwise limit=24 model.backend.model=$PWD/.gpu/tiny \
  model.backend.package=null model.backend.gguf_file=null model.name=tiny-random model.backend.name=tiny-random \
  model.backend.device=$1 model.backend.dtype=float32 run.progress=false; echo "exit $?"; }
for step in cuda cpu cuda_again cpu_again; do
  echo "=== $step $(date -u +%T)"; RECBENCH_RUNS_DIR=/tmp/gpuchk/runs-$step run ${step%_again} > "$OUT/$step.log" 2>&1
  grep -E "ready in|this run:|exit|Error|error" "$OUT/$step.log" | head -8
done
python3 - <<'PY'
import glob, json
runs = {}
for f in sorted(glob.glob('/tmp/gpuchk/runs-*/**/samples.jsonl', recursive=True)):
    rows = [json.loads(line) for line in open(f)]
    calls = {r['id']: c for r in rows for c in r.get('calls', [])}
    step = f.split('/runs-')[1].split('/')[0]
    runs[step] = {k: c['response'] for k, c in calls.items()}
    print(step, 'samples', len(rows), 'calls cached:', sum(bool(c.get('cached')) for c in calls.values()))
if 'cuda' in runs and 'cpu' in runs:
    same = sum(runs['cuda'][k] == runs['cpu'].get(k) for k in runs['cuda'])
    print('same answer text on cuda and cpu:', same, 'of', len(runs['cuda']))
PY
