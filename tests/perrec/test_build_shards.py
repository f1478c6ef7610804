"""Category shards: a 4-category build (generated Amazon 2023 JSONL.gz) prepared one category per job through
submitit's local executor (separate processes, as on SLURM) and merged writes exactly the single build over the
four categories with the same seed; a missing category file is refused before any job starts; a category whose
job fails is named with its file and line, the others stay prepared, and the same command finishes the build once
the file is fixed."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("submitit", reason="pip install -e '.[dev]' (submitit, through hydra-submitit-launcher)")

from recbench.tasks.perrec.build import main  # noqa: E402

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]
FILES = ("groups.jsonl", "heldout.jsonl", "items.jsonl", "ratings.csv.gz")
NAMES = ("Beauty", "Books", "Games", "Toys")
SELECT = ["--per-size", "25", "--heldout-per-size", "5", "--seed", "11"]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_perrec_build", REPO / "benchmarks" / "bench_perrec_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def categories(tmp_path_factory) -> list[str]:
    d = tmp_path_factory.mktemp("cats")
    bench = _bench()
    for k, name in enumerate(NAMES):
        bench.synthetic_amazon(d / f"{name}.jsonl.gz", 20_000, seed=k, prefix=name[:2])
    return [f"{name}={d / f'{name}.jsonl.gz'}" for name in NAMES]


def cli(out: Path, cats: list[str], *extra: str) -> None:
    main(["--source", "amazon-jsonl", *[a for c in cats for a in ("--category", c)], "--out", str(out), *SELECT,
          *extra])


def test_four_shards_through_submitit_local_merge_to_the_single_build(tmp_path, categories, capsys):
    cli(tmp_path / "single", categories)
    cli(tmp_path / "sharded", categories, "--launcher", "submitit_local")
    for name in FILES:
        assert (tmp_path / "single" / name).read_bytes() == (tmp_path / "sharded" / name).read_bytes(), name
    with __import__("gzip").open(tmp_path / "sharded" / "ratings.csv.gz", "rt") as f:  # each rating's category
        assert f.readline() == "user_id,item_id,rating,timestamp,domain\n" and f.readline().endswith(",Beauty\n")
    groups = [json.loads(x) for x in (tmp_path / "sharded" / "groups.jsonl").read_text().splitlines()]
    assert len(groups) == 75 and {g["domain"] for g in groups} == set(NAMES)
    assert all(g["query_item"].startswith(g["domain"][:2]) for g in groups)  # each group's item is its domain's
    stats = json.loads((tmp_path / "sharded" / "stats.json").read_text())
    assert set(stats["domains"]) == set(NAMES) and stats["input"]["ratings"] == sum(
        v["n_raw"] for v in stats["domains"].values())
    assert not (tmp_path / "sharded.work").exists()  # the jobs' databases are removed after the merge


def test_a_missing_category_file_is_refused_before_any_job(tmp_path, categories, capsys):
    cats = categories[:3] + [f"Toys={tmp_path / 'nope.jsonl.gz'}"]
    with pytest.raises(SystemExit) as e:
        cli(tmp_path / "out", cats, "--launcher", "submitit_local")
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and f"--category Toys={tmp_path / 'nope.jsonl.gz'}: no such file" in err[0], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.work").exists()


def test_a_failed_job_is_named_and_the_rerun_finishes(tmp_path, categories, capsys):
    cats = [c.split("=", 1) for c in categories]
    broken = tmp_path / "Games.jsonl"
    lines = [x for x in __import__("gzip").open(cats[2][1], "rt")]
    broken.write_text("".join(lines[:500]) + '{"user_id": "U1", "rating": "five"\n' + "".join(lines[500:]))
    mixed = [f"{n}={p}" for n, p in cats[:2]] + [f"Games={broken}", f"{cats[3][0]}={cats[3][1]}"]
    with pytest.raises(SystemExit):
        cli(tmp_path / "out", mixed, "--launcher", "submitit_local")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of 4 category job(s) failed" in err[0] and "category 'Games'" in err[0], err
    assert "Games.jsonl:501: " in err[0], err
    prepared = sorted(p.parent.name for p in (tmp_path / "out.work").glob("*/prepared.json"))
    assert prepared == ["000-Beauty", "001-Books", "003-Toys"] and not (tmp_path / "out").exists()
    shutil.copy(cats[2][1], tmp_path / "Games.jsonl.gz")  # the fix: the good file under the same category
    fixed = mixed[:2] + [f"Games={tmp_path / 'Games.jsonl.gz'}"] + mixed[3:]
    cli(tmp_path / "out", fixed, "--launcher", "submitit_local")
    cli(tmp_path / "single", categories)
    for name in ("groups.jsonl", "heldout.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "single" / name).read_bytes(), name
