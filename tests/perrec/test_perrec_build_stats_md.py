"""docs/perrec.md's statistics tables are the builder's own `--stats-md` output, and within one difficulty every group
comes from a different (item, window) block (the paper's per-level files)."""
from __future__ import annotations

from pathlib import Path

import pytest

from recbench.tasks.perrec.build import BuildConfig, main
from recbench.tasks.perrec.build.pandas_engine import build_groups
from recbench.tasks.perrec.build.readers import read_source
from recbench.tasks.perrec.build.stats import windows_in_several_difficulties

pytestmark = pytest.mark.fast

DOC = Path(__file__).resolve().parents[2] / "docs" / "perrec.md"
COMMANDS = {
    "ml-latest-small": ["--source", "movielens", "--input", "{d}/ml-latest-small"],
    "amazon2023_all_beauty": ["--source", "amazon-csv", "--input", "{d}/amazon2023_all_beauty/All_Beauty.5core.csv.gz",
                              "--meta", "{d}/amazon2023_all_beauty/filterd_meta_items.csv", "--gamma", "5",
                              "--window-days", "365", "--per-size", "50", "--heldout-per-size", "10"],
}


def doc_table(name: str) -> list[str]:
    """The table rows under <!-- stats:name --> in docs/perrec.md."""
    text = DOC.read_text()
    block = text[text.index(f"<!-- stats:{name} -->"):].splitlines()[1:]
    return [ln for ln in block[: next(i for i, ln in enumerate(block) if not ln.startswith("|"))]]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_docs_statistics_table_is_the_commands_output(name, shared_data, capsys):
    main([a.format(d=shared_data) for a in COMMANDS[name]] + ["--stats-md"])
    printed = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("|")]
    not_timing = lambda rows: [r for r in rows if not r.startswith("| build seconds")]  # noqa: E731
    assert not_timing(printed) == not_timing(doc_table(name))


def test_stats_md_without_out_writes_nothing(shared_data, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main([a.format(d=shared_data) for a in COMMANDS["ml-latest-small"]] + ["--stats-md"])
    assert "| candidate co-rating windows | 6541 |" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_within_a_difficulty_each_group_has_its_own_window(shared_data):
    ratings, _ = read_source("movielens", str(shared_data / "ml-latest-small"))
    built = build_groups(ratings, BuildConfig())
    per_size = built["windows"]["test"]
    for size, ks in per_size.items():
        assert len(ks) == len(set(ks)), size  # one group per (item, window) inside a difficulty
    # windows shared across difficulties: their groups' users overlap, as the statistics row says
    shared = windows_in_several_difficulties(per_size)
    assert shared == 23
    assert windows_in_several_difficulties({2: [1, 2, 3], 3: [3, 4], 4: [3, 5, 2]}) == 2  # windows 2 and 3
    both = [set(per_size[2]) & set(per_size[3]), set(per_size[2]) & set(per_size[4]), set(per_size[3]) & set(per_size[4])]
    assert len(set().union(*both)) == shared
