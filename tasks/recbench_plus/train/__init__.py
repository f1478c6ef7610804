"""RecBench+ two-stage fine-tuning: leakage-free train / held-out split, SFT warm-up, RFT with GRPO."""
