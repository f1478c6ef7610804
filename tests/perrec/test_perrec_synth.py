"""The bundled SYNTHETIC PerRecBench sample is what its generator writes (recbench.tasks.perrec.build.synth with its
default arguments): every file byte for byte, stats.json apart from the output folder it names."""
from __future__ import annotations

import pytest

from recbench.tasks.perrec.build.synth import main
from tests.helpers import assert_generator_rewrites_sample

pytestmark = pytest.mark.fast


def test_the_generator_rewrites_the_bundled_sample(tmp_path):
    assert_generator_rewrites_sample(main, "perrec_sample", tmp_path / "out")
