"""LLMRec (Liu et al. 2023) on Amazon Beauty: rating, sequential, direct, explanation, summary. See docs/llmrec.md."""
