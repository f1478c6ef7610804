"""The RecBench+ task: assistant queries (released files, a bundled sample, or built from ratings + a KG), scored with
the official RecBench+ metrics, CMR, and a stricter catalogue-resolved variant."""
from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any, Callable, Optional

from omegaconf import DictConfig

from recbench.api.datafiles import numeric_columns, read_csv, require_columns
from recbench.api.item_lists import ACTIVITY_LEVELS, ItemCatalogue, ItemList
from recbench.api.metrics import MetricSpec
from recbench.kg.graph import KnowledgeGraph, display_title, split_year
from recbench.api.errors import ConfigError
from recbench.api.task import Task, to_plain
from recbench.tasks.recbench_plus import data as D
from recbench.tasks.recbench_plus import metrics as M
from recbench.tasks.recbench_plus import settings
from recbench.tasks.recbench_plus.methods import AssistantMethod
from recbench.tasks.recbench_plus.reference import BM25Items, PopularMatch
from recbench.tasks.recbench_plus.users import AGE_GROUPS, USER_GROUPS, user_groups
from recbench.api.types import Example, Outcome

log = logging.getLogger(__name__)


class RecBenchPlusTask(Task):
    """RecBench+ (Huang et al. 2025): explicit / implicit / misinformed / interest / demographics queries."""

    name = "recbench_plus"
    methods = {"assistant": AssistantMethod, "assistant_history": AssistantMethod,
               PopularMatch.name: PopularMatch, BM25Items.name: BM25Items}  # the last two: reference rows, no model
    breakdown_by = ("query_type", "condition_num", "group_type", *USER_GROUPS)
    breakdown_order = {"query_type": tuple(D.QUERY_TYPES), "activity": ACTIVITY_LEVELS, "age": AGE_GROUPS}
    #: the source user's activity level and, where the data has a users table, gender, age group and occupation
    fairness_by = USER_GROUPS
    user_by = "user"  # a user asks several queries: fairness gaps average them into one unit
    list_k = 10  # the list metrics' cut-off (answers are open-length lists)
    headline_metric = "recall"
    settings_rules = settings.TASK  # valid values of the task keys, checked before anything is loaded
    conf_defaults = True  # a hand-built config gets the keys it leaves out from conf/task/<name>.yaml
    #: what score() returns per query
    metric_specs = (
        MetricSpec("recall",
                   meaning="share of the query's ground-truth titles the answer names (official RecBench+ fuzzy "
                           "matching)",
                   doc="official recall of the ground-truth titles"),
        MetricSpec("precision",
                   meaning="share of the answer's titles that are ground-truth titles (official RecBench+ matching)",
                   doc="official precision"),
        MetricSpec("ndcg",
                   meaning="NDCG of the answer's titles against the query's ground-truth titles (official RecBench+ "
                           "matching, binary relevance, ideal = all ground-truth titles first)",
                   doc="official NDCG"),
        MetricSpec("ftr",
                   meaning="format-error rate: share of answers not in the asked [SEP]-separated title format",
                   higher_is_better=False, binary=True, doc="format-error rate (official)"),
        MetricSpec("cmr",
                   meaning="condition match rate: share of recommended items found in the KG that meet the query's "
                           "conditions",
                   why_n="defined on condition queries only (explicit, implicit, misinformed), and only where at "
                         "least one recommended title is found in the KG; interest and demographics queries have "
                         "none",
                   doc="condition match rate of recommended items found in the KG"),
        MetricSpec("kg_existence",
                   meaning="share of recommended titles found in the knowledge graph",
                   why_n="defined on condition queries only (explicit, implicit, misinformed); interest and "
                         "demographics queries have none",
                   doc="share of recommended items found in the KG"),
        MetricSpec("strict_recall",
                   meaning="recall of the answer's titles resolved to catalogue items (exact, then close match), by "
                           "item id; unresolved and repeated titles count as misses",
                   doc="recall of catalogue-resolved titles"),
        MetricSpec("strict_precision",
                   meaning="precision of the answer's titles resolved to catalogue items (exact, then close match), by "
                           "item id; unresolved and repeated titles count as misses",
                   doc="precision of catalogue-resolved titles"),
        MetricSpec("strict_ndcg",
                   meaning="NDCG of the answer's titles resolved to catalogue items (exact, then close match), by "
                           "item id; unresolved and repeated titles count as misses",
                   doc="NDCG of catalogue-resolved titles"),
        MetricSpec("n_recommended",
                   meaning="number of titles in the answer",
                   higher_is_better=None, doc="titles in the answer (a count: no direction)"),
    )

    def __init__(self, cfg: DictConfig):
        super().__init__(cfg)
        self.name = str(self.cfg.name)
        self.kg: Optional[KnowledgeGraph] = None
        self.histories: dict[str, list[str]] = {}
        self._resolver: Optional[M.CatalogueResolver] = None
        self._title_index: dict[str, str] = {}
        self._titles: list[tuple[str, str]] = []
        self._gt_resolved: dict[str, list[str]] = {}

    # ---- data -------------------------------------------------------------------------------
    def load(self) -> list[Example]:
        """Examples of the configured data kind (bundle | build | released | queries), interleaved by query type."""
        d = self.cfg.data
        kind = d.kind
        types = list(self.cfg.types or D.QUERY_TYPES)
        domain = str(self.cfg.domain)
        if kind == "bundle":
            folder = Path(d.path)
            self._set_kg(D.read_bundle_kg(folder, domain))
            ratings = read_csv(folder / "ratings.csv", dtype={"user_id": str, "item_id": str})
            require_columns(ratings, ["user_id", "item_id", "rating", "timestamp"], folder / "ratings.csv")
            numeric_columns(ratings, ["rating", "timestamp"], folder / "ratings.csv", convert=False)
            self.histories = D.histories_from_ratings(ratings)
            examples = D.bundle_examples(folder, types, domain, self.kg)
            D.check_conditions(self.kg, examples, folder, domain)
        elif kind == "build":
            examples = self._build(d, types)
        elif kind == "released":
            if not d.get("path"):
                raise ConfigError("task.data.path is required: a released RecBench+ JSON file (or a list of files)")
            paths = [d.path] if isinstance(d.path, str) else list(d.path)
            if d.get("catalogue"):
                from recbench.kg.loaders import load_movielens_dat

                self._set_kg(load_movielens_dat(d.catalogue))
            examples = []
            prefix = str(d.get("id_prefix") or "")
            for p in paths:
                loaded = D.load_released(p, d.get("query_type"), d.get("domain") or None, id_prefix=prefix)
                if self.kg is not None:  # ground-truth ids checked against task.data.catalogue
                    D.check_subset_ids(loaded, self.kg, p, d.catalogue, id_prefix=prefix)
                examples += loaded
            examples = [e for e in examples if e.meta["query_type"] in types]
        elif kind == "queries":
            examples = D.load_query_records(d.path, d.get("domain") or None, d.get("query_type") or None)
            D.check_query_ids(examples, d.path)
        else:
            raise ConfigError(f"Unknown task.data.kind '{kind}'. Valid choices: bundle, build, released, queries")
        if not examples:
            raise ConfigError(f"task {self.name}: no queries loaded from {to_plain(d)}")
        self.strata = user_groups(examples, self.histories, self._users_table(d))
        return D.interleave(examples)

    def _users_table(self, d: DictConfig) -> Any:
        """The users' table (user_id, age, gender, occupation) where the data has one, else None."""
        from recbench.kg.loaders import read_atomic

        folder = Path(str(d.get("path") or ""))
        if d.kind == "bundle" and (folder / "users.csv").is_file():
            return read_csv(folder / "users.csv", dtype=str)
        if d.kind == "build" and (folder / "ml-100k.user").is_file():
            return read_atomic(folder / "ml-100k.user").astype(str)
        return None

    # ---- list metrics (api/item_lists.py) -----------------------------------------------------------
    def item_catalogue(self) -> Optional[ItemCatalogue]:
        """The KG's items, popularity from the loaded users' ratings (what the reference rows rank by), genres as
        categories; None without a catalogue (released files without task.data.catalogue)."""
        if self.kg is None:
            return None
        if getattr(self, "_catalogue", None) is None:
            kg = self.kg
            items = kg.items()
            self._catalogue = ItemCatalogue.of(items, self.histories.values(), k=self.list_k,
                                               categories={i: kg.targets(i, "Genre") for i in items})
        return self._catalogue

    def item_list(self, example: Example, outcome: Outcome) -> Optional[ItemList]:
        """The answer's titles resolved to catalogue items (a reference row: its item ids), the source user's
        history."""
        if self._resolver is None:
            return None
        ids = outcome.details.get("item_ids")
        if ids is None:
            text = outcome.prediction if isinstance(outcome.prediction, str) else ""
            titles = outcome.details.get("titles")
            if titles is None:
                titles = [t.strip() for t in text.split(M.SEP) if t.strip()]
            ids = [self._resolver(t) for t in titles if str(t).strip()]
        hist = self.histories.get(str(example.data.get("source_user") or ""), [])
        return ItemList(tuple(None if i is None else str(i) for i in ids), tuple(hist))

    def run_facts(self, records: Any) -> dict[str, Any]:
        """How the users were grouped (activity-level cuts, the age groups)."""
        return {"strata": getattr(self, "strata", {})}

    def _build(self, d: DictConfig, types: list[str]) -> list[Example]:
        from recbench.kg.conditions import ExtractionConfig
        from recbench.kg.loaders import load_ml100k, read_atomic
        from recbench.kg.queries import BuildConfig, QueryBuilder

        folder = Path(d.path)
        if not folder.is_dir():
            raise ConfigError(f"task.data.path '{folder}' is not a folder (set RECBENCH_SHARED_DATA or task.data.path)")
        self._set_kg(load_ml100k(folder))
        inter = read_atomic(folder / "ml-100k.inter").rename(columns={"rating": "rating"})
        self.histories = D.histories_from_ratings(inter)
        users = read_atomic(folder / "ml-100k.user")
        b = to_plain(d.build)
        ext = ExtractionConfig(**b.pop("extraction", {}))
        builder = QueryBuilder(self.kg, self.histories, BuildConfig(extraction=ext, **b), users=users)
        built = builder.build(types)
        examples: list[Example] = []
        for t, recs in built.items():
            examples += D.released_examples(recs, t, self.kg.domain, id_prefix=f"{t}:")
        self.built = built
        return examples

    def _set_kg(self, kg: KnowledgeGraph) -> None:
        self.kg = kg
        self._resolver = M.CatalogueResolver(kg, cutoff=float(self.cfg.strict.cutoff))
        self._titles = []
        for iid, dd in kg.iter_items():
            for t in (str(dd["title"]), display_title(str(dd["title"]))):
                self._title_index.setdefault(t, iid)
                self._titles.append((t, iid))

    def has_histories(self) -> bool:
        """True when user histories are known (bundle / build data)."""
        return bool(self.histories)

    def history_titles(self, example: Example, n: int, exclude_ground_truth: bool = True) -> list[str]:
        """The source user's last n history titles (ground-truth items left out unless asked otherwise)."""
        assert self.kg is not None
        hist = self.histories.get(example.data.get("source_user", ""), [])
        gt = {str(g) for g in example.data.get("gt_ids", [])} if exclude_ground_truth else set()
        if exclude_ground_truth:
            gt |= {str(i) for i in self._gt_item_ids(example)}
        keep = [i for i in hist if i not in gt]
        return [self.kg.display(i) for i in keep[-n:]] if n else []

    # ---- scoring ----------------------------------------------------------------------------
    def threshold(self, domain: str) -> float:
        """Official fuzzy-match threshold (0.8 for both domains unless configured, see metrics module)."""
        t = self.cfg.match_threshold
        if t is None:
            return 0.8
        return float(t[domain]) if isinstance(t, (dict, DictConfig)) else float(t)

    def _official_name2id(self, domain: str) -> Optional[Callable[[str], Any]]:
        """The official title -> KG id lookup: exact title (year stripped), else the first title containing it."""
        if self.kg is None:
            return None

        def movie(name: str) -> Any:
            name = re.sub(r"\s\(\d{4}\)$", "", name).strip().replace('"', "'")
            hit = self._title_index.get(name)
            if hit is None:
                hit = next((iid for t, iid in self._titles if name in t), None)
            return None if hit is None else _as_id(hit)

        def book(name: str) -> Any:
            name = re.sub(r"\s\(\d{4}\)$", "", name)
            if name in self._title_index:
                return name
            if len(name.split()) >= 5:
                return next((t for t, _ in self._titles if name in t), None)
            return None

        return movie if domain == "movie" else book

    def _gt_item_ids(self, example: Example) -> list[str]:
        """Catalogue ids of the ground truth (given ids, else titles resolved; unresolved kept as 'title:...')."""
        if example.data.get("gt_ids"):
            return [str(i) for i in example.data["gt_ids"]]
        if example.id not in self._gt_resolved:
            res = []
            for t in example.data.get("gt_titles", []):
                i = self._resolver(t) if self._resolver else None
                res.append(i if i is not None else f"title:{t}")
            self._gt_resolved[example.id] = res
        return self._gt_resolved[example.id]

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """Official ftr/recall/precision/ndcg (+cmr, kg_existence on condition queries) and strict_* metrics."""
        text = outcome.prediction if isinstance(outcome.prediction, str) else ""
        domain = example.meta.get("domain", "movie")
        k = int(outcome.details.get("k", 0) or 0)
        gt_titles = example.data.get("gt_titles", [])
        nan = math.nan
        if not gt_titles:  # queries without ground truth (queries_all records): only the format is scorable
            return {"ftr": float(M.ftr(text)), "recall": nan, "precision": nan, "ndcg": nan}
        conds = [tuple(c) for c in example.data.get("conditions", [])]
        is_cond = bool(example.data.get("condition")) and self.kg is not None
        kg_has_relations = self.kg is not None and conds and {r for r, _ in conds} <= set(self.kg.relations())
        check = (lambda i: self.kg.satisfies(str(i), conds)) if (is_cond and kg_has_relations) else None
        off = M.official_scores(text, gt_titles, domain=domain, k=k, threshold=self.threshold(domain),
                                gt_ids=example.data.get("gt_ids") or None,
                                name2id=self._official_name2id(domain) if is_cond else None, check=check)
        out: dict[str, float] = {"ftr": float(off["ftr"]), "recall": float(off["recall"]),
                                 "precision": float(off["precision"]), "ndcg": float(off["ndcg"])}
        if is_cond:  # CMR: -1 (no recommended item found in the KG) is undefined, as in the official averages
            out["cmr"] = float(off["cmr"]) if off.get("cmr", -1) != -1 else nan
        if "kg_existence" in off:
            out["kg_existence"] = float(off["kg_existence"])
        if self._resolver is not None and self.cfg.strict.enabled:
            titles = outcome.details.get("titles")
            if titles is None:
                titles = [t.strip() for t in text.split(M.SEP) if t.strip()]
            strict = M.strict_scores(titles, self._gt_item_ids(example), self._resolver, k=k)
            out.update({m: v for m, v in strict.items() if m not in M.LIST_ERRORS})  # the core's invalid_rate, ...
        return out

    def truth(self, example: Example) -> dict[str, Any]:
        """The relevant items (titles as released, and their catalogue ids when given) and the query's conditions."""
        return {"titles": list(example.data.get("gt_titles", [])), "ids": list(example.data.get("gt_ids", [])),
                "conditions": [list(c) for c in example.data.get("conditions", [])]}

    def identity(self) -> dict[str, Any]:
        """Task name, data source and types."""
        return {"name": self.name, "data": to_plain(self.cfg.data),
                "types": list(self.cfg.types or D.QUERY_TYPES)}


def _as_id(item: str) -> Any:
    return int(item) if str(item).isdigit() else item


__all__ = ["RecBenchPlusTask", "split_year"]
