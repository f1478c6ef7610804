"""RecBench+ (Huang et al. 2025, arXiv 2503.09382): assistant queries built from a knowledge graph."""
