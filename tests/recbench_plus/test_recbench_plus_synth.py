"""The bundled SYNTHETIC RecBench+ sample is what its generator writes (recbench.tasks.recbench_plus.synth with its default
arguments): every file byte for byte, stats.json apart from the output folder it names."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data
from recbench.tasks.recbench_plus.synth import main

pytestmark = pytest.mark.fast


def test_the_generator_rewrites_the_bundled_sample(tmp_path):
    bundled = Path(bundled_data("recbench_plus_sample"))
    main(["--out", str(tmp_path / "out")])
    written = {str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file()}
    shipped = {str(p.relative_to(bundled)) for p in bundled.rglob("*") if p.is_file() and p.name != "README.md"}
    assert written == shipped
    for rel in sorted(written - {"stats.json"}):
        assert (tmp_path / "out" / rel).read_bytes() == (bundled / rel).read_bytes(), rel
    if "stats.json" in written:
        new, old = json.loads((tmp_path / "out" / "stats.json").read_text()), json.loads((bundled / "stats.json").read_text())
        strip = lambda d: {k: ({kk: vv for kk, vv in v.items() if kk != "out"} if isinstance(v, dict) else v)  # noqa: E731
                           for k, v in d.items()}
        assert strip(new) == strip(old)
