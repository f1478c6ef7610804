"""recbench: evaluate LLMs on personalized-recommendation benchmarks through one Hydra-configured loop."""
__version__ = "0.1.0"
