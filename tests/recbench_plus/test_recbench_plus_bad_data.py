"""RecBench+ query files that cannot be scored are refused: each defect planted in a copy of the bundled sample (a
bundle folder, released JSON, queries_all-style JSON Lines) is one DataError naming the file and the line or record."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from recbench.run.construct import build_task
from recbench.api.errors import ConfigError, DataError
from recbench.tasks.recbench_plus import data as D
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast

EXPLICIT = "movie-ExplicitQuery.json"


def _load(folder: Path):
    return build_task(compose_cfg(["task=recbench_plus", "method=assistant", f"task.data.path={folder}"])).load()


def _records(d: Path, fn) -> None:
    p = d / EXPLICIT
    recs = json.loads(p.read_text())
    fn(recs)
    p.write_text(json.dumps(recs))


BUNDLE_CASES = {
    "data_idx twice": (lambda d: _records(d, lambda r: r[3].update(data_idx=r[1]["data_idx"])),
                       f"{EXPLICIT}: record 4: data_idx '1' was already given at .*{EXPLICIT}: record 2"),
    "not JSON": (lambda d: (d / EXPLICIT).write_text('[{"data_idx": 0,\n oops}]'), f"{EXPLICIT}:2: not valid JSON"),
    "an object": (lambda d: (d / EXPLICIT).write_text('{"data_idx": 0}'), f"{EXPLICIT}: expected a JSON list of query records"),
    "a list of numbers": (lambda d: (d / EXPLICIT).write_text("[1, 2]"), "a list with other values"),
    "0 bytes": (lambda d: (d / EXPLICIT).write_text(""), f"{EXPLICIT}: the file is empty"),
    "not UTF-8": (lambda d: (d / EXPLICIT).write_bytes(b"\xff" + (d / EXPLICIT).read_bytes()), f"{EXPLICIT}:1: not UTF-8 text"),
    "key twice": (lambda d: (d / EXPLICIT).write_text(
        (d / EXPLICIT).read_text().replace('"data_idx": 0', '"data_idx": 0, "data_idx": 5', 1)), "key 'data_idx' appears twice"),
    "ratings 0 bytes": (lambda d: (d / "ratings.csv").write_text(""), "ratings.csv: the file is empty"),
    "kg 0 bytes": (lambda d: (d / "kg.tsv").write_text(""), "kg.tsv: the file is empty"),
}


@pytest.mark.parametrize("case", sorted(BUNDLE_CASES))
def test_bad_bundle_is_refused_naming_the_file(bundle, case):
    fn, pattern = BUNDLE_CASES[case]
    fn(bundle)
    with pytest.raises(DataError, match=pattern):
        _load(bundle)


def test_the_clean_copy_loads(bundle):
    ids = [e.id for e in _load(bundle)]
    assert len(ids) == len(set(ids)) > 0


def test_queries_jsonl_defects_name_the_line(tmp_path):
    rows = [{"domain": "movie", "task": "movie-ExplicitQuery", "custom_id": f"q{i}", "query": "a film"} for i in range(3)]
    p = tmp_path / "queries.jsonl.gz"

    def write(rs, extra=b""):
        p.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rs).encode() + extra))

    write(rows)
    assert [e.id for e in D.load_query_records(p)] == ["q0", "q1", "q2"]
    write(rows + [rows[1]])
    with pytest.raises(DataError, match=r"queries.jsonl.gz:4: domain/task/custom_id 'movie/movie-ExplicitQuery/q1' was "
                                        r"already given at .*queries.jsonl.gz:2"):
        D.load_query_records(p)
    write([rows[0], {k: v for k, v in rows[1].items() if k != "query"}])
    with pytest.raises(DataError, match=r"queries.jsonl.gz:2: the record lacks field\(s\) \['query'\]"):
        D.load_query_records(p)
    write(rows, b"{torn")
    with pytest.raises(DataError, match=r"queries.jsonl.gz:4: not valid JSON"):
        D.load_query_records(p)
    p.write_bytes(b"plain text, not gzip")
    with pytest.raises(DataError, match="queries.jsonl.gz: cannot be read as gzip"):
        D.load_query_records(p)


def test_queries_of_two_domains_sharing_custom_ids_are_not_run_together(tmp_path):
    """The released queries_all file numbers custom_id per domain and task: run unfiltered, two queries would share
    one example id (one scored twice, or one skipped as already finished). Refused, naming the filters."""
    rows = [{"domain": dom, "task": f"{dom}-ExplicitQuery", "custom_id": str(i), "query": "q"}
            for dom in ("movie", "book") for i in range(2)]
    p = tmp_path / "queries.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["task=recbench_plus_released", "method=assistant", "task.data.kind=queries", f"task.data.path={p}"]
    with pytest.raises(ConfigError, match=r"custom_id '0' of .* is used by movie/movie-ExplicitQuery and "
                                          r"book/book-ExplicitQuery: run one domain and task at a time"):
        build_task(compose_cfg(base)).load()
    assert [e.id for e in build_task(compose_cfg([*base, "task.data.domain=book"])).load()] == ["0", "1"]


def test_released_file_with_a_repeated_data_idx(tmp_path, bundle):
    recs = json.loads((bundle / EXPLICIT).read_text())
    p = tmp_path / "ExplicitQuery.json"
    p.write_text(json.dumps(recs + [recs[0]]))
    with pytest.raises(DataError, match=rf"ExplicitQuery.json: record {len(recs) + 1}: data_idx '0' was already given"):
        D.load_released(p)
