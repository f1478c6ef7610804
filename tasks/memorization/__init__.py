"""The memorization probe: does a model recall the catalogues the benchmarks are built on (Di Palma et al. 2025)?"""
