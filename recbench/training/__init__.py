"""Shared fine-tuning helpers (LoRA base loading, adapter configs) used by the tasks' training recipes."""
