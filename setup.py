"""Installs the top-level folders tasks/ (the benchmarks), kg/ (knowledge graphs), conf/ (Hydra configs) and data/
(bundled samples) as recbench.tasks / recbench.kg / recbench.conf / recbench.data."""
from setuptools import find_namespace_packages, setup

ROOTS = {"recbench": "recbench", "recbench.tasks": "tasks", "recbench.kg": "kg", "recbench.conf": "conf",
         "recbench.data": "data"}

packages = []
for prefix, folder in ROOTS.items():
    packages.append(prefix)
    packages += [f"{prefix}.{p}" for p in find_namespace_packages(folder, exclude=["*__pycache__*"])
                 if f"{prefix}.{p}" not in ROOTS]

setup(packages=packages, package_dir=ROOTS)
