"""The fuzz suite's case table (docs/fuzz.md is generated from it): bad inputs over data files, config values, server
behaviour and run-store damage. Each case says how the defect is planted, the exit code `python -m recbench` must
give and a substring of its one `recbench:` line; a refused input (exit 2) must leave every file as it was, and a case
where the run goes on states the documented recovery in `check`."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from tests.fuzz import plant as P

DATA, CONFIG, SERVER, STORE = "data files", "config values", "server behaviour", "run-store damage"
CATEGORIES = (DATA, CONFIG, SERVER, STORE)


@dataclass(frozen=True)
class Case:
    """One bad input: how it is planted, what recbench must answer."""

    id: str
    category: str
    defect: str  # what is wrong, in words (the doc's table)
    args: tuple[str, ...]  # the command's overrides ({data}, {url}, {tmp} filled in per case)
    exit: int
    message: str  # a substring of the one `recbench:` line (exit != 0), or of stderr (exit 0, "" = none asked)
    data: Optional[str] = None  # bundled data set copied to <case>/data first ('perrec_released': built from it)
    plant: Optional[Callable[[Any], None]] = None  # edits the copy, the run dir or the cache before the run
    first: bool = False  # a clean run of the same command first (run-store damage is planted in its run dir)
    server: Optional[str] = None  # stub OpenAI server: ok, flaky, auth, garbage, down, or a fault on every attempt
    env: tuple[tuple[str, str], ...] = ()
    check: Optional[Callable[[Any, Any], None]] = None  # the documented recovery, for runs that go on
    fails_mid_run: bool = False  # exit 2 from a failure during the run (a full disk), not a refused input
    may_add: tuple[str, ...] = ()  # paths a refused run may still create (the derived-data cache of clean files)
    xfail: str = ""  # a known defect left open, with the reason (the case still runs and is reported)

    @property
    def refused(self) -> bool:
        """A refused input (exit 2 before the run): nothing may have been written or changed."""
        return self.exit == 2 and not self.fails_mid_run


# ---- commands ------------------------------------------------------------------------------------------------------
QUIET = ("run.progress=false",)
PERREC = ("task=perrec", "method=bm25_history", "limit=6", "task.data_dir={data}", *QUIET)
RELEASED = ("task=perrec_released", "method=bm25_history", "limit=6", "task.data_dir={data}", *QUIET)
RATING = ("task=llmrec_rating", "method=global_mean", "limit=6", "task.data_dir={data}", *QUIET)
SEQ = ("task=llmrec_sequential", "method=popularity", "limit=6", "task.data_dir={data}",
       "task.candidates.path={data}/candidates_sequential.jsonl.gz", *QUIET)
RBP = ("task=recbench_plus", "method=popular_match", "limit=5", "task.data.path={data}", *QUIET)
QUERIES = ("task=recbench_plus_released", "method=assistant", "model=smollm2-openai", "model.backend.base_url={url}",
           "task.data.kind=queries", "task.data.path={data}/queries.jsonl", *QUIET)
YESNO = ("task=generic_yesno", "method=random", "task.data.path={data}/yesno.jsonl", *QUIET)
RATING_CSV = ("task=generic_rating_csv", "method=random", "task.data.path={data}/r.csv", *QUIET)
BASE = ("task=perrec", "method=bm25_history", "limit=3", *QUIET)
MODEL = ("task=perrec", "method=listwise", "model=smollm2-openai", "model.backend.base_url={url}", "limit=3", *QUIET)
# a stub server: fast retries so that a failing server costs well under a second per case
STUB = ("task=perrec", "method=listwise", "model=smollm2-openai", "model.backend.base_url={url}", "limit=4",
        "model.backend.max_retries=1", "model.backend.backoff_initial_s=0.01", "model.backend.backoff_max_s=0.02",
        "model.backend.timeout_s=0.5", "model.backend.down_after_s=0.5", *QUIET)


def _with(base: tuple[str, ...], *extra: str) -> tuple[str, ...]:
    """base with `extra` overrides (an extra key replaces the base's)."""
    keys = {e.split("=", 1)[0] for e in extra}
    return (*[a for a in base if a.split("=", 1)[0] not in keys], *extra)


def _queries(rows: list[dict], tail: str = "") -> Callable[[Any], None]:
    def plant(ctx: Any) -> None:
        ctx.data.mkdir(exist_ok=True)
        (ctx.data / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return plant


_Q = [{"domain": "movie", "task": "movie-ExplicitQuery", "custom_id": f"q{i}", "query": "a film with Olga"}
      for i in range(3)]


MYTASK = ("hydra.searchpath=[file://{tmp}/conf]", "task=mytask", "method=random", *QUIET)


def _my_task(edit: Callable[[str], str | bytes]) -> Callable[[Any], None]:
    """<case>/conf/task/mytask.yaml: the bundled generic_yesno task under the user's own name, edited."""
    def plant(ctx: Any) -> None:
        from importlib import resources

        text = resources.files("recbench.conf").joinpath("task", "generic_yesno.yaml").read_text()
        out = edit(text.replace("name: generic_yesno", "name: mytask"))
        (ctx.tmp / "conf" / "task").mkdir(parents=True)
        (ctx.tmp / "conf" / "task" / "mytask.yaml").write_bytes(out.encode() if isinstance(out, str) else out)
    return plant


def _rating_csv(cell: str) -> Callable[[Any], None]:
    return P.write("r.csv", f"id,history,item,rating\n1,a,b,4\n2,a,c,{cell}\n3,b,c,2\n")


def _dup_member(r: dict) -> None:
    r["users"].append(dict(r["users"][0]))


# ---- data files ------------------------------------------------------------------------------------------------------
def _perrec(id_: str, defect: str, plant: Callable, message: str) -> Case:
    return Case(f"perrec-{id_}", DATA, f"PerRecBench {defect}", PERREC, 2, message, data="perrec_sample", plant=plant)


G = "groups.jsonl"
DATA_CASES = [
    _perrec("nan-rating", "groups.jsonl: a member's rating is NaN", P.record(G, 2, lambda r: r["users"][0].update(
        rating=math.nan)), "groups.jsonl:2: member u0215: field 'rating' = NaN is not a finite number"),
    _perrec("null-rating", "groups.jsonl: a member's rating is null", P.record(G, 2, lambda r: r["users"][1].update(
        rating=None)), "groups.jsonl:2: member u0113: field 'rating' = null"),
    _perrec("text-rating", "groups.jsonl: a member's rating is text", P.record(G, 3, lambda r: r["users"][0].update(
        rating="five")), "groups.jsonl:3: member u0152: field 'rating' = \"five\" is not a finite number"),
    _perrec("inf-rating", "groups.jsonl: a member's rating is Infinity", P.record(G, 2, lambda r: r["users"][0].update(
        rating=math.inf)), "field 'rating' = Infinity"),
    _perrec("user-twice", "groups.jsonl: one user twice in a group", P.record(G, 2, _dup_member),
            "groups.jsonl:2: member 3: user 'u0215' was already given at"),
    _perrec("one-member", "groups.jsonl: a group of one user", P.record(G, 2, lambda r: r.update(users=r["users"][:1])),
            "groups.jsonl:2: field 'users' must list at least 2 members to rank (got 1)"),
    _perrec("members-text", "groups.jsonl: 'users' is a string", P.record(G, 2, lambda r: r.update(users="u1,u2")),
            "must list at least 2 members to rank (got str)"),
    _perrec("member-no-id", "groups.jsonl: a member without user_id", P.record(G, 2, lambda r: r["users"][1].pop(
        "user_id")), "groups.jsonl:2: member 2 is not an object with a 'user_id'"),
    _perrec("no-users", "groups.jsonl: a group without 'users'", P.record(G, 3, lambda r: r.pop("users")),
            "groups.jsonl:3: the group has no field 'users'"),
    _perrec("group-id-twice", "groups.jsonl: one group_id twice", P.record(G, 2, lambda r: r.update(
        group_id="easy-0000")), "groups.jsonl:2: group_id 'easy-0000' was already given at"),
    _perrec("unknown-item", "groups.jsonl: a query item not in items.jsonl", P.record(G, 2, lambda r: r.update(
        query_item="no-such-item")), "groups.jsonl:2: query_item no-such-item not in"),
    _perrec("text-timestamp", "groups.jsonl: a group timestamp is text", P.record(G, 2, lambda r: r.update(
        timestamp="soon")), "groups.jsonl:2: field 'timestamp' = \"soon\""),
    _perrec("empty", "groups.jsonl is 0 bytes", P.write(G, ""), "groups.jsonl: the file is empty (0 bytes)"),
    _perrec("blank", "groups.jsonl holds only blank lines", P.write(G, "\n\n\n"),
            "groups.jsonl: the file holds no records (only blank lines)"),
    _perrec("not-utf8", "groups.jsonl: a byte that is not UTF-8", P.replace(G, b"easy-0002", b"easy-\xff002"),
            "groups.jsonl:3: not UTF-8 text (byte 0xff"),
    _perrec("torn", "groups.jsonl: the last line cut mid-record", P.lines(G, lambda ls: ls[:5] + [ls[5][:40]]),
            "groups.jsonl:6: not valid JSON"),
    _perrec("garbage-line", "groups.jsonl: a line that is not JSON",
            P.lines(G, lambda ls: ls[:3] + ["{not json"] + ls[3:]), "groups.jsonl:4: not valid JSON"),
    _perrec("line-a-list", "groups.jsonl: a line that is a JSON list", P.lines(G, lambda ls: ["[1, 2]"] + ls),
            "groups.jsonl:1: expected a JSON object, got list"),
    _perrec("items-missing", "items.jsonl deleted", P.delete("items.jsonl"),
            "PerRecBench data file missing: "),
    _perrec("items-empty", "items.jsonl is 0 bytes", P.write("items.jsonl", ""), "items.jsonl: the file is empty"),
    _perrec("items-not-utf8", "items.jsonl: a byte that is not UTF-8", P.replace("items.jsonl", b'"i0001"',
                                                                                 b'"i0\xff01"'),
            "items.jsonl:2: not UTF-8 text"),
    _perrec("ratings-not-gzip", "ratings.csv.gz holds plain CSV", P.ungzip("ratings.csv.gz"),
            "ratings.csv.gz: cannot be read as gzip"),
    _perrec("ratings-empty", "ratings.csv.gz is 0 bytes", P.write("ratings.csv.gz", b""),
            "ratings.csv.gz: the file is empty (0 bytes)"),
    _perrec("ratings-cut", "ratings.csv.gz cut short", P.cut("ratings.csv.gz", 200),
            "the gzip stream is damaged or cut short"),
    _perrec("ratings-text", "ratings.csv.gz: a rating 'five'", P.csv_cell("ratings.csv.gz", 6, 2, "five", gz=True),
            "ratings.csv.gz:6: column 'rating' is 'five', not a finite number"),
    _perrec("ratings-blank", "ratings.csv.gz: an empty rating cell", P.csv_cell("ratings.csv.gz", 9, 2, "", gz=True),
            "ratings.csv.gz:9: column 'rating' is empty"),
    _perrec("ratings-nan", "ratings.csv.gz: a rating NaN", P.csv_cell("ratings.csv.gz", 4, 2, "NaN", gz=True),
            "ratings.csv.gz:4: column 'rating' is "),
    _perrec("ratings-timestamp", "ratings.csv.gz: a timestamp 'later'", P.csv_cell("ratings.csv.gz", 3, 3, "later",
                                                                                   gz=True),
            "ratings.csv.gz:3: column 'timestamp' is 'later'"),
    _perrec("ratings-no-column", "ratings.csv.gz: the rating column missing",
            P.lines("ratings.csv.gz", lambda ls: [",".join(x.split(",")[:2] + x.split(",")[3:]) for x in ls], gz=True),
            "ratings.csv.gz: missing field(s) ['rating']"),
    Case("perrec-no-folder", DATA, "PerRecBench task.data_dir names no folder",
         _with(PERREC, "task.data_dir={tmp}/nowhere"), 2, "nowhere/items.jsonl. Fix: set task.data_dir"),
    Case("released-nan", DATA, "released PerRecBench: a relative rating NaN", RELEASED, 2,
         "record 'i0000' group 0 member 1: field 'relative_rating' = NaN", data="perrec_released",
         plant=P.json_doc("item2group_avg_diff_sample-easy.json",
                          lambda g: g["i0000"][0][1].update(relative_rating=math.nan))),
    Case("released-user-twice", DATA, "released PerRecBench: one user twice in a group", RELEASED, 2,
         "record 'i0000' group 0 member 2: user 'u0192' was already given at", data="perrec_released",
         plant=P.json_doc("item2group_avg_diff_sample-easy.json",
                          lambda g: g["i0000"][0].append(dict(g["i0000"][0][0])))),
    Case("released-key-twice", DATA, "released PerRecBench: an item key twice in one JSON object", RELEASED, 2,
         "key 'i0002' appears twice in one JSON object", data="perrec_released",
         plant=P.replace("item2group_avg_diff_sample-easy.json", b'{"i0000":', b'{"i0002": [], "i0000":')),
    Case("released-empty", DATA, "released PerRecBench: a group file of 0 bytes", RELEASED, 2,
         "hard.json: the file is empty", data="perrec_released",
         plant=P.write("item2group_avg_diff_sample-hard.json", "")),
    Case("released-history-nan", DATA, "released PerRecBench: a history rating NaN", RELEASED, 2,
         "userid2history.json: record 'u0000' entry 0: field 'rating' = NaN", data="perrec_released",
         plant=P.replace("userid2history.json", b'"rating": 5.0', b'"rating": NaN')),
    # LLMRec reviews (rating, explanation, summary)
    *[Case(f"reviews-{i}", DATA, f"LLMRec reviews.jsonl.gz: {d}", RATING, 2, m, data="llmrec_sample/reviews", plant=p)
      for i, d, p, m in [
          ("text-rating", "a rating 'five'",
           P.record("reviews.jsonl.gz", 4, lambda r: r.update(rating="five"), gz=True),
           "reviews.jsonl.gz:4: field 'rating' = \"five\" is not a finite number"),
          ("nan-rating", "a rating NaN", P.record("reviews.jsonl.gz", 2, lambda r: r.update(rating=math.nan), gz=True),
           "reviews.jsonl.gz:2: field 'rating' = NaN"),
          ("null-rating", "a rating null", P.record("reviews.jsonl.gz", 5, lambda r: r.update(rating=None), gz=True),
           "reviews.jsonl.gz:5: field 'rating' = null"),
          ("text-timestamp", "a timestamp 'later'", P.record("reviews.jsonl.gz", 3, lambda r: r.update(
              timestamp="later"), gz=True), "reviews.jsonl.gz:3: field 'timestamp' = \"later\""),
          ("no-text", "a review without 'text'", P.record("reviews.jsonl.gz", 6, lambda r: r.pop("text"), gz=True),
           "reviews.jsonl.gz:6: the review lacks field(s) ['text']"),
          ("not-gzip", "plain JSON Lines under the .gz name", P.ungzip("reviews.jsonl.gz"),
           "reviews.jsonl.gz: cannot be read as gzip"),
          ("empty", "0 bytes", P.write("reviews.jsonl.gz", b""), "reviews.jsonl.gz: the file is empty (0 bytes)"),
          ("bad-json", "a line that is not JSON", P.lines("reviews.jsonl.gz", lambda ls: ['{"oops'] + ls, gz=True),
           "reviews.jsonl.gz:1: not valid JSON"),
          ("meta-not-utf8", "meta.jsonl.gz: a byte that is not UTF-8",
           P.replace("meta.jsonl.gz", b"{", b"\xff{", gz=True),
           "meta.jsonl.gz:1: not UTF-8 text"),
      ]],
    # LLMRec P5 (sequential, direct) and the frozen candidates
    *[Case(f"p5-{i}", DATA, f"LLMRec P5: {d}", SEQ, 2, m, data="llmrec_sample/p5", plant=p) for i, d, p, m in [
        ("user-twice", "sequential_data.txt: a user twice", P.lines("sequential_data.txt", lambda ls: ls + ["7 1 2 3"]),
         "sequential_data.txt:301: user '7' was already given at "),
        ("empty", "sequential_data.txt is 0 bytes", P.write("sequential_data.txt", ""),
         "sequential_data.txt: the file is empty"),
        ("not-utf8", "sequential_data.txt: a byte that is not UTF-8",
         P.replace("sequential_data.txt", b"\n", b"\n\xfe"),
         "sequential_data.txt:2: not UTF-8 text"),
        ("one-item", "sequential_data.txt: a user with one item", P.write("sequential_data.txt", "1 5\n"),
         "sequential_data.txt:1: user 1 has 1 item(s)"),
        ("titles-empty", "items.tsv is 0 bytes", P.write("items.tsv", ""), "items.tsv: the file is empty"),
        ("candidates-changed", "candidates file edited (sha256 differs from the pinned one)",
         P.lines("candidates_sequential.jsonl.gz", lambda ls: ls[:-1], gz=True),
         "candidates_sequential.jsonl.gz: content sha256"),
        ("candidates-not-gzip", "candidates file holds plain JSON Lines", P.ungzip("candidates_sequential.jsonl.gz"),
         "candidates_sequential.jsonl.gz: cannot be read as gzip"),
    ]],
    # RecBench+ bundle and queries
    *[Case(f"rbp-{i}", DATA, f"RecBench+ {d}", RBP, 2, m, data="recbench_plus_sample", plant=p) for i, d, p, m in [
        ("idx-twice", "movie-ExplicitQuery.json: one data_idx twice",
         P.json_doc("movie-ExplicitQuery.json", lambda r: r[3].update(data_idx=r[1]["data_idx"])),
         "movie-ExplicitQuery.json: record 4: data_idx '1' was already given at"),
        ("not-json", "movie-ExplicitQuery.json is not JSON",
         P.write("movie-ExplicitQuery.json", '[{"data_idx": 0,\n oops}]'),
         "movie-ExplicitQuery.json:2: not valid JSON"),
        ("an-object", "movie-ExplicitQuery.json is an object, not a list",
         P.write("movie-ExplicitQuery.json", '{"data_idx": 0}'), "expected a JSON list of query records"),
        ("numbers", "movie-ExplicitQuery.json is a list of numbers", P.write("movie-ExplicitQuery.json", "[1, 2]"),
         "a list with other values"),
        ("empty", "movie-ExplicitQuery.json is 0 bytes", P.write("movie-ExplicitQuery.json", ""),
         "movie-ExplicitQuery.json: the file is empty"),
        ("not-utf8", "movie-ExplicitQuery.json: a byte that is not UTF-8",
         P.replace("movie-ExplicitQuery.json", b"[", b"\xff["), "movie-ExplicitQuery.json:1: not UTF-8 text"),
        ("key-twice", "movie-ExplicitQuery.json: a key twice in one record",
         P.replace("movie-ExplicitQuery.json", b'"data_idx": 0', b'"data_idx": 0, "data_idx": 5'),
         "key 'data_idx' appears twice"),
        ("ratings-empty", "ratings.csv is 0 bytes", P.write("ratings.csv", ""), "ratings.csv: the file is empty"),
        ("kg-empty", "kg.tsv is 0 bytes", P.write("kg.tsv", ""), "kg.tsv: the file is empty"),
        ("kg-short-line", "kg.tsv: a fact without its target (was dropped silently)",
         P.lines("kg.tsv", lambda ls: ls[:2] + [ls[2].rsplit("\t", 1)[0]] + ls[3:]),
         "kg.tsv:3: a fact needs an item_id, a relation and a target"),
        ("ratings-text", "ratings.csv: a rating 'five' (was accepted)", P.csv_cell("ratings.csv", 3, 2, "five"),
         "ratings.csv:3: column 'rating' is 'five', not a finite number"),
        ("items-none", "items.csv: a header and no items (was an empty catalogue)",
         P.write("items.csv", "item_id,title,year\n"), "items.csv: a header but no items"),
        ("item-twice", "items.csv: one item_id twice, with two titles (was accepted)",
         P.lines("items.csv", lambda ls: ls[:2] + [ls[1].split(",")[0] + ",Another Title,1999"] + ls[2:]),
         "items.csv:3: item_id '1' was already given at"),
    ]],
    *[Case(f"queries-{i}", DATA, f"RecBench+ queries JSON Lines: {d}", QUERIES, 2, m, plant=p) for i, d, p, m in [
        ("id-twice", "one custom_id twice", _queries(_Q + [_Q[1]]),
         "queries.jsonl:4: domain/task/custom_id 'movie/movie-ExplicitQuery/q1' was already given at"),
        ("no-query", "a record without 'query'", _queries([_Q[0], {k: v for k, v in _Q[1].items() if k != "query"}]),
         "queries.jsonl:2: the record lacks field(s) ['query']"),
        ("torn", "the last line cut mid-record", _queries(_Q, '{"domain": "mo'), "queries.jsonl:4: not valid JSON"),
        ("ids-across-domains", "custom_ids shared by two domains, run unfiltered",
         _queries([{**q, "domain": d, "task": f"{d}-ExplicitQuery"} for d in ("movie", "book") for q in _Q]),
         "run one domain and task at a time"),
    ]],
    # generic YAML-defined tasks
    *[Case(f"generic-{i}", DATA, f"generic task yesno.jsonl: {d}", YESNO, 2, m, data="generic_sample", plant=p)
      for i, d, p, m in [
          ("null-label", "a label null", P.record("yesno.jsonl", 3, lambda r: r.update(label=None)),
           "yesno.jsonl: record 3 (id u03): the ground truth 'label' is missing or empty"),
          ("empty-label", "a label ''", P.record("yesno.jsonl", 5, lambda r: r.update(label="")),
           "record 5 (id u05): the ground truth 'label' is missing or empty"),
          ("nan-label", "a label NaN", P.record("yesno.jsonl", 2, lambda r: r.update(label=math.nan)),
           "record 2 (id u02): the ground truth 'label' is missing or empty"),
          ("id-twice", "one id twice", P.record("yesno.jsonl", 4, lambda r: r.update(id="u01")),
           "id 'u01' is given twice in"),
          ("bad-json", "a line that is not JSON", P.lines("yesno.jsonl", lambda ls: ls[:2] + ["{oops"] + ls[2:]),
           "yesno.jsonl:3: not valid JSON"),
          ("line-a-string", "a line that is a JSON string",
           P.lines("yesno.jsonl", lambda ls: ls[:2] + ['"text"'] + ls[2:]),
           "yesno.jsonl:3: expected a JSON object, got str"),
          ("not-utf8", "a byte that is not UTF-8", P.replace("yesno.jsonl", b"Interstellar", b"Inter\xffstellar"),
           "yesno.jsonl:1: not UTF-8 text"),
          ("empty", "0 bytes", P.write("yesno.jsonl", ""), "yesno.jsonl: the file is empty"),
          ("no-truth-field", "no record has the ground-truth field",
           P.lines("yesno.jsonl", lambda ls: [json.dumps({k: v for k, v in json.loads(x).items() if k != "label"})
                                              for x in ls]), "task.ground_truth 'label' is not a field of yesno.jsonl"),
      ]],
    *[Case(f"generic-yaml-{i}", DATA, f"a task YAML of the user's own (hydra.searchpath): {d}", MYTASK, 2, m,
           plant=_my_task(edit)) for i, d, edit, m in [
        ("syntax", "not valid YAML (was a traceback)", lambda t: t + "metrics: [accuracy\n",
         "conf/task/mytask.yaml:32: not valid YAML (expected ',' or ']'"),
        ("not-utf8", "a byte that is not UTF-8 (was a traceback)", lambda t: t.encode() + b"x: \xff\n",
         "a config file holds a byte that is not UTF-8 (0xff"),
        ("unknown-metric", "metrics: [acuracy]", lambda t: t.replace("metrics: [accuracy]", "metrics: [acuracy]"),
         "Unknown metric in task.metrics: 'acuracy'"),
        ("max-tokens-text", "max_tokens: four", lambda t: t.replace("max_tokens: 4", "max_tokens: four"),
         "task.max_tokens=four: must be a whole number >= 1, or null"),
        ("parser-typo", "parser kind 'choise'", lambda t: t.replace("kind: choice", "kind: choise"),
         "Unknown task.parser.kind: 'choise'. Did you mean 'choice'?"),
    ]],
    Case("generic-csv-text-rating", DATA, "generic rating CSV: a rating 'five' where the parser reads numbers",
         RATING_CSV, 2, "r.csv: record 2 (id 2): field 'rating' = \"five\" is not a finite number",
         data="generic_sample", plant=_rating_csv("five")),
    Case("generic-csv-blank-rating", DATA, "generic rating CSV: an empty rating cell", RATING_CSV, 2,
         "r.csv: record 2 (id 2): the ground truth 'rating' is missing or empty", data="generic_sample",
         plant=_rating_csv("")),
    Case("generic-parquet-broken", DATA, "generic task: a .parquet file that is not parquet",
         _with(YESNO, "task.data.path={data}/rows.parquet"), 2, "rows.parquet: cannot be read as parquet",
         data="generic_sample", plant=P.write("rows.parquet", "not parquet")),
]


# ---- config values -----------------------------------------------------------------------------------------------
def _cfg(id_: str, defect: str, args: tuple[str, ...], message: str, **kw: Any) -> Case:
    return Case(f"config-{id_}", CONFIG, defect, args, 2, message, **kw)


LISTWISE = MODEL
CONFIG_CASES = [
    _cfg("temperature", "sampling.temperature=-1", _with(BASE, "sampling.temperature=-1"),
         "sampling.temperature=-1.0: must be a finite number >= 0"),
    _cfg("temperature-inf", "sampling.temperature=inf (was accepted)", _with(BASE, "sampling.temperature=inf"),
         "sampling.temperature=inf: must be a finite number >= 0"),
    _cfg("top-p-zero", "sampling.top_p=0", _with(BASE, "sampling.top_p=0"), "sampling.top_p=0.0: must be in (0, 1]"),
    _cfg("top-p-big", "sampling.top_p=1.5", _with(BASE, "sampling.top_p=1.5"), "sampling.top_p=1.5: must be in (0, 1]"),
    _cfg("limit-zero", "limit=0", _with(BASE, "limit=0"), "limit=0: must be >= 1"),
    _cfg("limit-text", "limit=abc (not a number)", _with(BASE, "limit=abc"), "(full_key: limit)"),
    _cfg("seed-text", "seed=abc (not a number)", _with(BASE, "seed=abc"), "(full_key: seed)"),
    _cfg("chunk-zero", "run.chunk_size=0", _with(BASE, "run.chunk_size=0"), "run.chunk_size=0: must be >= 1"),
    _cfg("bootstrap-zero", "run.bootstrap_resamples=0", _with(BASE, "run.bootstrap_resamples=0"),
         "run.bootstrap_resamples=0: must be >= 1"),
    _cfg("ci-level", "run.ci_level=2", _with(BASE, "run.ci_level=2"), "run.ci_level=2.0: must be in (0, 1)"),
    _cfg("limit-strategy", "run.limit_strategy=bogus", _with(BASE, "run.limit_strategy=bogus"),
         "run.limit_strategy=bogus: must be one of first, stratified, random"),
    _cfg("progress-text", "run.progress=maybe (not a boolean)", _with(BASE, "run.progress=maybe"),
         "(full_key: run.progress)"),
    _cfg("cache-enabled-text", "cache.enabled=maybe (not a boolean)", _with(BASE, "cache.enabled=maybe"),
         "(full_key: cache.enabled)"),
    _cfg("mode", "mode=bogus (neither run nor plan; left a run dir of Hydra's files)", _with(BASE, "mode=bogus"),
         "Unknown mode: 'bogus'"),
    _cfg("plan-power", "plan.power=2", _with(BASE, "plan.power=2"), "plan.power=2.0: must be in (0, 1)"),
    _cfg("plan-effect", "plan.effect=-1 with mode=plan (was accepted)", _with(BASE, "mode=plan", "plan.effect=-1"),
         "plan.effect=-1"),
    _cfg("report-rate", "report.max_parse_failure_rate=0", _with(BASE, "report.max_parse_failure_rate=0"),
         "report.max_parse_failure_rate=0.0: must be in (0, 1]"),
    _cfg("audit-orders", "audit.orders=-1", _with(LISTWISE, "audit.orders=-1"),
         "audit.orders=-1: must be 0 (off) or >= 2"),
    _cfg("method-typo", "method=bm25_histroy", _with(BASE, "method=bm25_histroy"), "Did you mean 'bm25_history'"),
    _cfg("task-typo", "task=perec", _with(BASE, "task=perec"), "Did you mean 'perrec'"),
    _cfg("model-typo", "model=smollm3", _with(LISTWISE, "model=smollm3"),
         "Unknown model 'smollm3'. Did you mean 'smollm2'?"),
    _cfg("unknown-key", "run.chunksize=4 (no such key)", _with(BASE, "run.chunksize=4"), "Did you mean 'chunk_size'"),
    _cfg("method-of-other-task", "method=popular_match with task=perrec", _with(BASE, "method=popular_match"),
         "Unknown method for task 'perrec': 'popular_match'"),
    # task names and run-dir escapes
    _cfg("task-name-escape", "task.name=../../x (run dir outside the runs dir)", _with(BASE, "task.name=../../x"),
         "task.name=../../x: must be a plain name"),
    _cfg("method-name-escape", "method.name=../x", _with(BASE, "method.name=../x"),
         "method.name=../x: must be a plain"),
    _cfg("model-name-escape", "model.name=a/b", _with(LISTWISE, "model.name=a/b"), "model.name=a/b: must be a plain"),
    # PerRecBench task and method keys
    _cfg("perrec-history-max", "task.history_max=0", _with(BASE, "task.history_max=0"),
         "task.history_max=0: must be a whole number >= 1"),
    _cfg("perrec-retrieval-k", "task.retrieval_k=0", _with(BASE, "task.retrieval_k=0"), "task.retrieval_k=0"),
    _cfg("perrec-format", "task.format=relased", _with(BASE, "task.format=relased"), "Did you mean 'released'?"),
    _cfg("perrec-difficulty", "task.difficulties=[extreme]", _with(BASE, "task.difficulties=[extreme]"),
         "task.difficulties: 'extreme' is not a difficulty", may_add=("cache",)),
    _cfg("perrec-legacy-tau", "task.legacy_tau=2 (not a boolean)", _with(BASE, "task.legacy_tau=2"),
         "task.legacy_tau=2: must be true or false"),
    _cfg("perrec-profile", "task.profile=maybe", _with(BASE, "task.profile=maybe"), "task.profile=maybe"),
    _cfg("perrec-max-tokens", "method.max_tokens=0 (listwise)", _with(LISTWISE, "method.max_tokens=0"),
         "method.max_tokens=0: must be a whole number >= 1"),
    _cfg("perrec-max-tokens-text", "method.max_tokens=abc (listwise; was a traceback)",
         _with(LISTWISE, "method.max_tokens=abc"), "method.max_tokens=abc: must be a whole number >= 1"),
    _cfg("perrec-samples", "method.samples=0 (listwise_sc)", _with(LISTWISE, "method=listwise_sc", "method.samples=0"),
         "method.samples=0: must be a whole number >= 1"),
    _cfg("perrec-shots", "method.shots=-1 (listwise_fewshot)", _with(LISTWISE, "method=listwise_fewshot",
                                                                    "method.shots=-1"), "method.shots=-1"),
    _cfg("perrec-sc-temperature", "method.temperature=-0.5 (listwise_sc)",
         _with(LISTWISE, "method=listwise_sc", "method.temperature=-0.5"), "method.temperature=-0.5"),
    _cfg("perrec-random-seed", "method.seed=abc (random)", _with(BASE, "method=random", "method.seed=abc"),
         "method.seed=abc"),
    # model.backend
    _cfg("backend-batch-size", "model.backend.batch_size=0 (hf)", _with(BASE, "method=listwise", "model=smollm2",
                                                                       "model.backend.batch_size=0"),
         "model.backend.batch_size=0: must be >= 1"),
    _cfg("backend-concurrency", "model.backend.concurrency=0", _with(LISTWISE, "model.backend.concurrency=0"),
         "model.backend.concurrency=0: must be >= 1"),
    _cfg("backend-timeout-text", "model.backend.timeout_s=soon", _with(LISTWISE, "model.backend.timeout_s=soon"),
         "(full_key: model.backend.timeout_s)"),
    _cfg("backend-retries", "model.backend.max_retries=-1", _with(LISTWISE, "model.backend.max_retries=-1"),
         "model.backend.max_retries=-1: must be >= 0"),
    _cfg("backend-down-after", "model.backend.down_after_s=0", _with(LISTWISE, "model.backend.down_after_s=0"),
         "model.backend.down_after_s=0.0: must be > 0"),
    _cfg("backend-key-env-unset", "model.backend.api_key_env names an unset variable",
         _with(LISTWISE, "model.backend.api_key_env=RECBENCH_FUZZ_UNSET_KEY"), "RECBENCH_FUZZ_UNSET_KEY"),
    _cfg("backend-hosted-no-key", "model=gpt4o without OPENAI_API_KEY", _with(LISTWISE, "model=gpt4o"),
         "OPENAI_API_KEY"),
    _cfg("backend-url-userinfo-and-key", "a base URL with user info and an api_key_env (was found after the run dir "
         "and cache were written)",
         _with(LISTWISE, 'model.backend.base_url="http://u:pw-secret1@127.0.0.1:9/v1"',
               "model.backend.api_key_env=HOME"),
         "user info"),
    _cfg("backend-url-scheme", "model.backend.base_url=ftp://127.0.0.1/v1 (not http; was found after the run dir was "
         "written)",
         _with(LISTWISE, "model.backend.base_url=ftp://127.0.0.1/v1"), "model.backend.base_url"),
    # RecBench+
    _cfg("rbp-domain", "task.domain=music", _with(RBP, "task.data.path=x", "task.domain=music"),
         "task.domain=music: must be one of movie, book"),
    _cfg("rbp-types", "task.types=[bogus]", _with(RBP, "task.data.path=x", "task.types=[bogus]"),
         "task.types=[bogus]: must be a list of at least 1 element(s), each one of explicit"),
    _cfg("rbp-threshold", "task.match_threshold=2", _with(RBP, "task.data.path=x", "task.match_threshold=2"),
         "task.match_threshold=2"),
    _cfg("rbp-cutoff", "task.strict.cutoff=0", _with(RBP, "task.data.path=x", "task.strict.cutoff=0"),
         "task.strict.cutoff=0"),
    _cfg("rbp-kind", "task.data.kind=bogus", _with(RBP, "task.data.path=x", "task.data.kind=bogus"),
         "task.data.kind=bogus"),
    _cfg("rbp-assistant-k", "method.k=-1 (assistant)", _with(RBP, "task.data.path=x", "method=assistant",
                                                            "model=smollm2-openai", "method.k=-1"), "method.k=-1"),
    _cfg("rbp-popular-n", "method.n=0 (popular_match; was exit 0 with empty answers)", _with(RBP, "task.data.path=x",
                                                                                         "method.n=0"),
         "method.n=0: must be a whole number >= 1"),
    _cfg("rbp-popular-n-negative", "method.n=-2 (popular_match; was exit 0, recall 1.000 from 236 titles per answer)",
         _with(RBP, "task.data.path=x", "method.n=-2"), "method.n=-2: must be a whole number >= 1"),
    _cfg("rbp-bm25-n", "method.n=many (bm25_items; was a traceback)",
         _with(RBP, "task.data.path=x", "method=bm25_items", "method.n=many"),
         "method.n=many"),
    # LLMRec
    _cfg("llmrec-history-max", "task.history_max=-1 (rating)", _with(RATING, "task.data_dir=x", "task.history_max=-1"),
         "task.history_max=-1"),
    _cfg("llmrec-fallback", "task.fallback_rating=7 (rating)", _with(RATING, "task.data_dir=x",
                                                                    "task.fallback_rating=7"),
         "task.fallback_rating=7"),
    _cfg("llmrec-ks", "task.ks=[0] (sequential)", _with(SEQ, "task.data_dir=x", "task.ks=[0]"), "task.ks=[0]"),
    _cfg("llmrec-fuzzy", "task.fuzzy_cutoff=0 (sequential)", _with(SEQ, "task.data_dir=x", "task.fuzzy_cutoff=0"),
         "task.fuzzy_cutoff=0"),
    _cfg("llmrec-reference", "task.reference=bogus (explanation)",
         ("task=llmrec_explanation", "method=zero_shot", "model=smollm2-openai", "task.reference=bogus", *QUIET),
         "task.reference=bogus"),
    _cfg("llmrec-lead-words", "method.words=0 (summary lead)", ("task=llmrec_summary", "method=lead", "method.words=0",
                                                                *QUIET), "method.words=0"),
    _cfg("llmrec-recency", "method.recency_decay=0 (popularity)", _with(SEQ, "task.data_dir=x",
                                                                       "method.recency_decay=0"),
         "method.recency_decay=0"),
    _cfg("llmrec-factors", "method.factors=0 (mf)", _with(SEQ, "task.data_dir=x", "method=mf", "method.factors=0"),
         "method.factors=0"),
    # generic
    _cfg("generic-constrained", "task.constrained=maybe", _with(YESNO, "task.constrained=maybe"),
         "task.constrained=maybe", data="generic_sample"),
    _cfg("generic-max-tokens", "task.max_tokens=0", _with(YESNO, "task.max_tokens=0"), "task.max_tokens=0",
         data="generic_sample"),
    _cfg("generic-format", "task.data.format=xml", _with(YESNO, "task.data.format=xml"), "task.data.format=xml",
         data="generic_sample"),
    _cfg("generic-parser", "task.parser.kind=bogus", _with(YESNO, "task.parser.kind=bogus"),
         "Unknown task.parser.kind: 'bogus'",
         data="generic_sample"),
    _cfg("generic-metric", "task.metrics=[nosuchmetric]", _with(YESNO, "task.metrics=[nosuchmetric]"),
         "Unknown metric in task.metrics: 'nosuchmetric'",
         data="generic_sample"),
    _cfg("generic-truth-field", "task.ground_truth=labl (no such field)", _with(YESNO, "task.ground_truth=labl"),
         "Did you mean 'label'?", data="generic_sample"),
    _cfg("generic-breakdown", "task.breakdown_by=[genr] (no such field)", _with(YESNO, "task.breakdown_by=[genr]"),
         "task.breakdown_by 'genr' is not a field of yesno.jsonl. Did you mean 'genre'?", data="generic_sample"),
    _cfg("generic-include", "an inline template with {% include %}",
         _with(YESNO, "task.prompt.template='{{% include \"/etc/hostname\" %}}'"),
         "cannot include, import or extend another template", data="generic_sample"),
    _cfg("generic-random-seed", "method.seed=abc (generic random; was accepted)", _with(YESNO, "method.seed=abc"),
         "method.seed=abc: must be a whole number", data="generic_sample"),
    _cfg("generic-constrained-method", "method.constrained=maybe (generic zero_shot; was accepted)",
         _with(YESNO, "method=zero_shot", "model=smollm2-openai", "method.constrained=maybe"),
         "method.constrained=maybe: must be true or false", data="generic_sample"),
    _cfg("generic-no-path", "task.data.path names no file", _with(YESNO, "task.data.path={tmp}/nothing.jsonl"),
         "task.data.path: no such file"),
]


# ---- server behaviour ------------------------------------------------------------------------------------------------
def _abandoned(n: int = 4, needle: str = "") -> Callable[[Any, Any], None]:
    """Exit 3 as documented: every example abandoned into errors.jsonl, no metrics for them, nothing cached."""
    def check(ctx: Any, r: Any) -> None:
        """metrics.json complete=false with 0 examples; every example in errors.jsonl naming the fault; nothing
        cached (the next run asks again)."""
        run = ctx.run_dir()
        m = json.loads((run / "metrics.json").read_text())
        c = m["counts"]
        assert m["complete"] is False and c["examples"] == 0 and c["backend_errors"] == n, c
        errors = [json.loads(x) for x in (run / "errors.jsonl").read_text().splitlines()]
        assert len(errors) == n and all(needle in e["error"] for e in errors), errors[:1]
        assert P.cache_rows(ctx) == 0  # no answer was kept: the next run asks again
    return check


def _nothing_scored(ctx: Any, r: Any) -> None:
    """A dead server: exit 2 and no metrics.json, no errors.jsonl (nothing abandoned), no *.tmp."""
    files = [f.name for f in ctx.runs.rglob("*") if f.is_file()]
    assert "metrics.json" not in files and "errors.jsonl" not in files, files
    assert not [f for f in files if f.endswith(".tmp")]


def _refused(status: int) -> Callable[[Any, Any], None]:
    """A server refusing every request with `status`."""
    def check(ctx: Any, r: Any) -> None:
        """stopped after max_consecutive_failures refusals: no metrics.json, no *.tmp, nothing cached; the few
        requests refused before that are abandoned into errors.jsonl (the next run retries them)"""
        files = [f for f in ctx.runs.rglob("*") if f.is_file()]
        assert not [f for f in files if f.name == "metrics.json" or f.name.endswith(".tmp")], files
        errors = [json.loads(x) for f in files if f.name == "errors.jsonl" for x in f.read_text().splitlines()]
        assert len(errors) < 5 and all(f"HTTP {status}" in e["error"] for e in errors), errors
        assert P.cache_rows(ctx) == 0
    return check


_key_refused = _refused(401)


def _retried_and_cached(ctx: Any, r: Any) -> None:
    """Every null answer retried: the run completes, each request asked twice, only real answers cached."""
    m = json.loads((ctx.run_dir() / "metrics.json").read_text())
    assert m["complete"] and m["counts"]["examples"] == 4 and m["counts"]["backend_errors"] == 0, m["counts"]
    assert set(ctx.stub.attempts.values()) == {2} and P.cache_rows(ctx) == len(ctx.stub.attempts)


def _same_as_healthy(ctx: Any, r: Any) -> None:
    """The flaky run's predictions equal those of a healthy server (no cache) in one invocation."""
    from recbench.testing.openai_stub import StubServer

    flaky = ctx.run_dir()
    m = json.loads((flaky / "metrics.json").read_text())
    assert m["complete"] and m["counts"]["backend_errors"] == 0 and sum(ctx.stub.faults.values()) > 0
    with StubServer() as healthy:
        args = [a.replace(ctx.url, healthy.base_url) for a in ctx.expand(STUB)] + ["cache.enabled=false"]
        assert ctx.invoke(args).code == 0
    (ok,) = [p.parent for p in ctx.runs.rglob("metrics.json") if p.parent != flaky]

    def preds(d: Path) -> dict:
        return {x["id"]: (x["prediction"], x["metrics"]) for x in map(json.loads, (d / "samples.jsonl").read_text()
                                                                      .splitlines())}
    assert preds(flaky) == preds(ok) and len(preds(ok)) == 4


def _parse_failures(ctx: Any, r: Any) -> None:
    """Answers no parser reads are counted as parse failures and score ptc 0, never silently a ranking."""
    m = json.loads((ctx.run_dir() / "metrics.json").read_text())
    assert m["complete"] and m["counts"]["parse_failed"] == 4 and m["metrics"]["ptc"]["mean"] == 0, m["counts"]


def _key_not_leaked(ctx: Any, r: Any) -> None:
    """stopped as for any refused key, and the key a 401 echoes back reaches neither the terminal nor a file"""
    _key_refused(ctx, r)
    key = "sk-fuzz-secret-4711"
    assert key not in r.out + r.err
    leaks = [str(f) for f in ctx.tmp.rglob("*") if f.is_file() and key.encode() in f.read_bytes()]
    assert not leaks, leaks


_ABANDONED = "incomplete: 4 example(s) abandoned after backend errors"
SERVER_CASES = [
    Case("server-refused", SERVER, "nothing listens at the base URL (connection refused)", STUB, 2, "server down",
         server="down", check=_nothing_scored, fails_mid_run=True),
    Case("server-reset", SERVER, "every connection dropped without an answer", STUB, 2, "server down", server="reset",
         check=_nothing_scored, fails_mid_run=True),
    Case("server-500", SERVER, "HTTP 500 on every attempt", STUB, 3, _ABANDONED, server="500",
         check=_abandoned(needle="HTTP 500")),
    Case("server-429", SERVER, "HTTP 429 with Retry-After on every attempt", STUB, 3, _ABANDONED, server="429",
         check=_abandoned(needle="HTTP 429")),
    Case("server-null", SERVER, "200 with message.content null on every attempt", STUB, 3, _ABANDONED, server="null",
         check=_abandoned(needle="null answer")),
    Case("server-empty", SERVER, "200 with message.content '' on every attempt", STUB, 3, _ABANDONED, server="empty",
         check=_abandoned(needle="empty answer")),
    Case("server-no-choices", SERVER, "200 with \"choices\": [] on every attempt", STUB, 3, _ABANDONED,
         server="nochoices", check=_abandoned(needle="no choices")),
    Case("server-bad-json", SERVER, "200 with a JSON body cut in half on every attempt", STUB, 3, _ABANDONED,
         server="truncated", check=_abandoned()),
    Case("server-slow", SERVER, "every answer slower than model.backend.timeout_s", STUB, 3, _ABANDONED,
         server="slow", check=_abandoned(needle="timed out")),
    Case("server-401", SERVER, "HTTP 401 on every request: the server wants another API key (was exit 3, 'the same "
         "command retries them')", _with(STUB, "model.backend.api_key_env=FUZZ_KEY", "limit=8"), 2,
         "refused 5 requests in a row (HTTP 401", server="auth", env=(("FUZZ_KEY", "sk-fuzz-wrong-key"),),
         check=_refused(401), fails_mid_run=True),
    Case("server-401-echo", SERVER, "HTTP 401 on every request, its message echoing the key sent", _with(
        STUB, "model.backend.api_key_env=FUZZ_KEY", "limit=8"), 2, "check the key in $FUZZ_KEY", server="401echo",
         env=(("FUZZ_KEY", "sk-fuzz-secret-4711"),), check=_key_not_leaked, fails_mid_run=True),
    Case("server-404-model", SERVER, "HTTP 404 on every request: the server does not serve model.backend.model "
         "(was exit 3, 'the same command retries them')", _with(STUB, "limit=8"), 2,
         "refused 5 requests in a row (HTTP 404: The model `smollm2` does not exist.); check model.backend.model",
         server="404model", check=_refused(404), fails_mid_run=True),
    Case("server-null-once", SERVER, "200 with message.content null on each request's first attempt", STUB, 0, "",
         server="null-once", check=_retried_and_cached),
    Case("server-flaky", SERVER, "30% faults of every retryable kind (500, 429, slow, cut JSON, dropped, null, empty, "
         "no choices)", _with(STUB, "model.backend.max_retries=4"), 0, "", server="flaky", check=_same_as_healthy),
    Case("server-garbage", SERVER, "answers that are no ranking at all", STUB, 0, "", server="garbage",
         check=_parse_failures),
]


# ---- run-store damage ----------------------------------------------------------------------------------------------
STORE_RUN = ("task=perrec", "method=bm25_history", "limit=6", *QUIET)
STORE_MODEL = ("task=perrec", "method=listwise", "model=smollm2-openai", "model.backend.base_url={url}", "limit=6",
               *QUIET)


def _store(id_: str, defect: str, exit: int, message: str, plant: Callable, check: Optional[Callable] = None,
           args: tuple[str, ...] = STORE_RUN, server: Optional[str] = None, **kw: Any) -> Case:
    return Case(f"store-{id_}", STORE, defect, args, exit, message, plant=plant, first=True, check=check, server=server,
                **kw)


def _complete(n: int = 6) -> Callable[[Any, Any], None]:
    """The run went on and finished: every example once, metrics.json complete, no *.tmp."""
    def check(ctx: Any, r: Any) -> None:
        """recovered: metrics.json complete over every example, each example once, no *.tmp"""
        run = ctx.run_dir()
        m = json.loads((run / "metrics.json").read_text())
        recs = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
        assert m["complete"] and m["counts"]["examples"] == n and m["metrics"]["ptc"]["n"] == n, m["counts"]
        assert len({x["id"] for x in recs}) == n
        assert not list(ctx.tmp.rglob("*.tmp"))
    return check


def _torn_saved(name: str, torn_bytes: bytes) -> Callable[[Any, Any], None]:
    """The run went on: the torn tail was moved aside into <name>.torn-*, every example finished once."""
    def check(ctx: Any, r: Any) -> None:
        """recovered: the torn bytes kept in <file>.torn-*, metrics.json complete, each example once"""
        _complete()(ctx, r)
        torn = list(ctx.run_dir().glob(f"{name}.torn-*"))
        assert len(torn) == 1 and torn[0].read_bytes() == torn_bytes, torn
    return check


def _no_metrics_no_tmp(ctx: Any, r: Any) -> None:
    """A failure during the run: no metrics.json and no *.tmp (nor its link) left; the finished samples kept."""
    run = ctx.run_dir()
    assert not (run / "metrics.json").exists() and not [p for p in ctx.tmp.rglob("*.tmp*") if p.is_symlink() or
                                                        p.name.endswith(".tmp")]
    assert len((run / "samples.jsonl").read_text().splitlines()) == 6


def _prompts_restored(ctx: Any, r: Any) -> None:
    """prompts.jsonl rebuilt from the response cache, every answer a cache hit (no request reached the server)."""
    run = ctx.run_dir()
    assert (run / "prompts.jsonl").read_bytes() == ctx.saved["prompts"]
    m = json.loads((run / "metrics.json").read_text())
    assert m["complete"] and m["this_invocation"]["backend_calls"] == 0 and ctx.stub.received == ctx.saved["received"]


def _config_back(ctx: Any, r: Any) -> None:
    """the rerun wrote config.yaml again (it is part of a finished run's state) and finished"""
    _complete()(ctx, r)
    assert (ctx.run_dir() / "config.yaml").read_text().startswith("task:")


def _unfinish(ctx: Any) -> None:
    """Delete metrics.json: the rerun cannot reuse the finished run, it opens the cache and re-aggregates."""
    (ctx.run_dir() / "metrics.json").unlink()


def _save_prompts_then_delete(ctx: Any) -> None:
    run = ctx.run_dir()
    ctx.saved = {"prompts": (run / "prompts.jsonl").read_bytes(), "received": ctx.stub.received}
    (run / "prompts.jsonl").unlink()


def _lock_held_elsewhere(ctx: Any) -> None:
    """The run dir's lock taken by another process (it lives until the case ends), its owner file naming it."""
    import subprocess
    import sys

    run = ctx.run_dir()
    code = ("import sys, time; from filelock import FileLock; l = FileLock(sys.argv[1], timeout=0); l.acquire(); "
            "print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run / ".recbench.lock")], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    (run / ".recbench.lock.owner").write_text(json.dumps({"pid": 4242, "host": "node7"}))
    ctx.cleanup.append(proc.kill)


STORE_CASES = [
    _store("samples-torn", "samples.jsonl: the last record cut mid-write (a kill)", 0, "",
           P.run_file("samples.jsonl", P.append_bytes(b'{"id": "easy-00')),
           _torn_saved("samples.jsonl", b'{"id": "easy-00')),
    _store("samples-garbage", "samples.jsonl: a line that is not JSON", 2, "samples.jsonl:3: ",
           P.run_file("samples.jsonl", P.insert_line(3, b"{oops"))),
    _store("samples-not-utf8", "samples.jsonl: a line that is not UTF-8", 2, "not UTF-8 text",
           P.run_file("samples.jsonl", P.append_bytes(b'{"id": "x\xff\xfe"}\n'))),
    _store("samples-list", "samples.jsonl: a line that is a JSON list", 2, "a JSON list, not a record",
           P.run_file("samples.jsonl", P.append_bytes(b"[1, 2, 3]\n"))),
    _store("samples-bad-calls", "samples.jsonl: a record whose 'calls' is a number", 2, "'calls' is a int, not a list",
           P.run_file("samples.jsonl", P.append_bytes(b'{"id": "x", "calls": 5}\n'))),
    _store("samples-twice", "samples.jsonl: every record appended twice (two writers)", 0, "",
           P.run_file("samples.jsonl", lambda p: p.write_bytes(p.read_bytes() * 2)), _complete()),
    _store("samples-emptied", "samples.jsonl truncated to 0 bytes", 0, "",
           P.run_file("samples.jsonl", lambda p: p.write_bytes(b"")), _complete()),
    _store("samples-deleted", "samples.jsonl deleted", 0, "", P.run_file("samples.jsonl", lambda p: p.unlink()),
           _complete()),
    _store("metrics-garbage", "metrics.json holds half a file", 0, "",
           P.run_file("metrics.json", lambda p: p.write_text("{ half a file")), _complete()),
    _store("metrics-deleted", "metrics.json deleted", 0, "", P.run_file("metrics.json", lambda p: p.unlink()),
           _complete()),
    _store("metrics-version", "metrics.json with schema_version 99", 0, "",
           P.run_file("metrics.json", lambda p: p.write_text(p.read_text().replace('"schema_version": 2',
                                                                                 '"schema_version": 99'))),
           _complete()),
    _store("finished-garbage", ".finished.json (the reuse marker) is garbage", 0, "",
           P.run_file(".finished.json", lambda p: p.write_text("garbage")), _complete()),
    _store("config-deleted", "config.yaml deleted (a finished rerun left it missing)", 0, "",
           P.run_file("config.yaml", lambda p: p.unlink()), _config_back),
    _store("errors-garbage", "errors.jsonl (a write-only log of abandoned examples) holds a line that is not JSON", 0,
           "", P.run_file("errors.jsonl", lambda p: p.write_text("{oops\n")), _complete()),
    _store("locked", "the run dir locked by another live process", 2, "run dir in use by pid 4242 (host node7)",
           _lock_held_elsewhere),
    _store("cache-garbage", "responses.sqlite is not a database (metrics.json deleted so the run opens it)", 2,
           "responses.sqlite is unreadable (DatabaseError: file is not a database): move it aside",
           P.all_of(_unfinish, P.cache_file(lambda p: p.write_bytes(b"this is not a database" * 200)))),
    _store("cache-a-folder", "responses.sqlite is a folder (metrics.json deleted so the run opens it)", 2,
           "responses.sqlite is unreadable (OperationalError: unable to open database file): move it aside",
           P.all_of(_unfinish, P.cache_file(lambda p: (p.unlink(missing_ok=True), p.mkdir())))),
    _store("metrics-disk-full", "a full disk when metrics.json is written (its temp file is /dev/full)", 2,
           "disk full: cannot write",
           P.run_file("metrics.json", lambda p: (p.unlink(), p.with_name("metrics.json.tmp").symlink_to("/dev/full"))),
           _no_metrics_no_tmp, fails_mid_run=True),
    Case("store-runs-dir-a-file", STORE, "RECBENCH_RUNS_DIR names a file (no run dir can be made; was a Hydra "
         "traceback)", STORE_RUN, 2, "is a file, not a folder",
         plant=lambda ctx: (ctx.tmp / "runs-file").write_text("a file"),
         env=(("RECBENCH_RUNS_DIR", "{tmp}/runs-file"),)),
    _store("run-dir-a-file", "a file stands at the run dir's own path", 2, "run dir",
           lambda ctx: (lambda d: (__import__("shutil").rmtree(d), d.write_text("a file")))(ctx.run_dir()),
           xfail="Hydra creates the run dir before any recbench code runs: its FileExistsError is a Hydra traceback, "
                 "exit 1 (the runs dir itself is checked first, so only a file at the run dir's exact path gets here)"),
    _store("prompts-deleted", "prompts.jsonl deleted (model run)", 0, "", _save_prompts_then_delete, _prompts_restored,
           args=STORE_MODEL, server="ok"),
    _store("prompts-torn", "prompts.jsonl: the last line cut mid-write (model run)", 0, "",
           P.run_file("prompts.jsonl", P.append_bytes(b'{"key": "abc", "mess')), args=STORE_MODEL, server="ok",
           check=_torn_saved("prompts.jsonl", b'{"key": "abc", "mess')),
    _store("cache-damaged-mid-run", "responses.sqlite damaged so that the run finds it at its first stored answer", 2,
           "move it aside",
           P.all_of(P.run_file("samples.jsonl", lambda p: p.write_bytes(b"")), P.cache_file(P.corrupt_table_leaves)),
           args=STORE_MODEL, server="ok"),
]

CASES: list[Case] = [*DATA_CASES, *CONFIG_CASES, *SERVER_CASES, *STORE_CASES]
