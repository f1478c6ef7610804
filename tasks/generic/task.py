"""GenericTask: a benchmark defined by YAML alone (data file + sandboxed Jinja2 prompt + parser + ground truth +
metrics from the registry). Subclass it, or any Task, and point `_target_` at your class for custom logic."""
from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path
from typing import Any, Optional

from jinja2.exceptions import SecurityError, TemplateError, UndefinedError
from omegaconf import DictConfig, OmegaConf

from recbench.api.config import YamlTaskConf, flag, list_of, one_of, text, whole, with_defaults
from recbench.api.datafiles import finite, jsonl_records, read_csv, read_json
from recbench.api.prompts import render_string, sandbox
from recbench.api.errors import ConfigError, DataError, lookup, suggest
from recbench.api.task import Method, ReferenceMethod, Settings, Task
from recbench.api import metrics as M
from recbench.api.judge_metrics import check_rubric, judge_metric_specs
from recbench.api.item_lists import ACTIVITY_LEVELS, ItemCatalogue, ItemList
from recbench.tasks.generic import parsers as P
from recbench.tasks.generic.items import ItemLists, PopularItems, RandomItems
from recbench.api.types import Example, MethodGen, Outcome, Request, file_sha256
from recbench.api.variant import PLAIN, Variant

FORMATS = ("jsonl", "json", "csv", "parquet")


class SandboxError(ConfigError):
    """A prompt template tried to reach something the sandbox forbids (Python internals)."""


def read_records(path: Path, fmt: Optional[str] = None) -> list[dict[str, Any]]:
    """Rows of a JSONL / JSON (list) / CSV / parquet file as dicts (format from the suffix unless given)."""
    fmt = fmt or {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "csv",
                  ".parquet": "parquet", ".pq": "parquet"}.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError(f"task.data.format: cannot tell the format of '{path.name}' from its suffix; "
                          f"set task.data.format to one of: {', '.join(FORMATS)}")
    lookup({f: f for f in FORMATS}, fmt, what="task.data.format")
    if fmt == "jsonl":  # DataError naming the line: empty, not UTF-8, not JSON, not an object
        return [r for _, r in jsonl_records(path)]
    if fmt == "json":
        rows = read_json(path)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ConfigError(f"task.data.path: {path} must hold a JSON list of records (objects)")
        return rows
    import pandas as pd

    if fmt == "csv":
        df = read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",", keep_default_na=False)
    else:
        try:
            df = pd.read_parquet(path)
        except ImportError as e:
            raise ConfigError(f"task.data.path: reading parquet needs pyarrow (pip install pyarrow): {e}") from e
        except (ValueError, OSError) as e:  # pyarrow's ArrowInvalid is a ValueError
            raise DataError(f"{path}: cannot be read as parquet ({str(e).strip().splitlines()[0]}). Fix the file or "
                            "set task.data.format") from None
    return df.to_dict(orient="records")


def check_truth(value: Any, where: str, field: str, numeric: bool) -> None:
    """Refuse a ground truth that cannot be scored: missing, null, NaN or empty; not a finite number where the
    parser reads numbers (DataError naming the record)."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        raise DataError(f"{where}: the ground truth '{field}' is missing or empty; an example without it cannot be "
                        "scored. Fix the record or remove it")
    if numeric:
        finite(value, where, field)


class GenericTask(Task):
    """A config-only benchmark; see conf/task/generic_yesno.yaml and docs/new_benchmark.md."""

    name = "generic"
    #: valid values of the optional keys (docs/new_benchmark.md), checked before anything is loaded
    settings_rules = {"constrained": flag(), "max_tokens": whole(1, null=True), "headline_metric": text(null=True),
                      "breakdown_by": list_of(text(), min_len=0, null=True), "ground_truth": text(),
                      "data.format": one_of(*FORMATS, null=True), "data.id_field": text(null=True),
                      "prompt.system": text(null=True), "prompt.template": text(null=True),
                      "prompt.template_file": text(null=True), "items.catalogue": text(null=True),
                      "items.history": text(null=True), "items.candidates": text(null=True),
                      "items.user": text(null=True), "items.k": whole(1)}
    #: a subclass may add a metric in score() without declaring it: recorded with direction 'unknown' (a warning)
    undeclared_metrics = "unknown"

    def __init__(self, cfg: DictConfig):
        super().__init__(cfg)
        self.cfg = Settings.of(with_defaults(cfg, YamlTaskConf))  # the keys a task YAML leaves out: YamlTaskConf's
        self.name = str(cfg.get("name") or "generic")
        self.parser_cfg = cfg.get("parser") or {}
        self.parse = P.build(self.parser_cfg)
        specs = list(cfg.get("metrics") or [])
        if not specs:
            raise ConfigError(f"task.metrics: name at least one metric. Valid choices: {', '.join(sorted(M.selectable()))}")
        self.metrics = [M.resolve(OmegaConf.to_container(s) if isinstance(s, DictConfig) else s) for s in specs]
        self.breakdown_by = tuple(cfg.get("breakdown_by") or ())
        head = cfg.get("headline_metric") or self.metrics[0].name
        names = [m.name for m in self.metrics]
        if head not in names:
            raise ConfigError(f"task.headline_metric '{head}' is not among task.metrics.{suggest(head, names)} "
                              f"Valid choices: {', '.join(names)}")
        self.headline_metric = head
        if not cfg.get("ground_truth"):
            raise ConfigError("task.ground_truth is required: the data field holding the correct answer")
        self.template = self._template_source()
        self._data_path()  # fail on a bad data path before any model is loaded
        conf = self.cfg["items"]  # (cfg.items is the dict method)
        self.items = ItemLists(conf, read_records) if conf.catalogue else None
        if self.items is not None:  # item lists: users grouped by activity, the fairness gaps between the groups
            self.breakdown_by = (*self.breakdown_by, "activity")
            self.fairness_by, self.user_by = ("activity",), "user"
            self.breakdown_order = {"activity": ACTIVITY_LEVELS}

    # ---- config --------------------------------------------------------------------------------------
    def _template_source(self) -> str:
        p = self.cfg.get("prompt") or {}
        if p.get("template_file"):
            path = Path(str(p.template_file))
            if not path.is_file():
                raise ConfigError(f"task.prompt.template_file: no such file: {path}")
            return path.read_text(encoding="utf-8")
        if p.get("template"):
            return str(p.template)
        raise ConfigError("task.prompt.template (inline Jinja2) or task.prompt.template_file is required")

    def _data_path(self) -> Path:
        d = self.cfg.get("data") or {}
        if not d.get("path"):
            raise ConfigError("task.data.path is required: a JSONL, JSON, CSV or parquet file")
        path = Path(str(d.path)).expanduser()
        if not path.is_file():
            raise ConfigError(f"task.data.path: no such file: {path}")
        return path

    # ---- Task API ------------------------------------------------------------------------------------
    def load(self) -> list[Example]:
        """One Example per data row (id from task.data.id_field, else the row number); the prompt is checked
        against the first row so template errors surface before any model call."""
        path = self._data_path()
        rows = read_records(path, (self.cfg.data.format or None))
        if not rows:
            raise ConfigError(f"task.data.path: {path} holds no records")
        gt = str(self.cfg.ground_truth)
        fields = list(rows[0])
        if gt not in rows[0]:
            raise ConfigError(f"task.ground_truth '{gt}' is not a field of {path.name}.{suggest(gt, fields)} "
                              f"Fields: {', '.join(fields)}")
        for key in self.cfg.breakdown_by or ():
            if key not in rows[0]:
                raise ConfigError(f"task.breakdown_by '{key}' is not a field of {path.name}.{suggest(key, fields)} "
                                  f"Fields: {', '.join(fields)}")
        id_field = self.cfg.data.id_field
        numeric = self.parser_cfg.get("kind") == "number"  # a number answer is scored against a number
        out = []
        for i, row in enumerate(rows):
            ex_id = str(row[id_field]) if id_field and id_field in row else str(i)
            check_truth(row.get(gt), f"{path}: record {i + 1} (id {ex_id})", gt, numeric)
            out.append(Example(id=ex_id, data=row, meta={k: row[k] for k in self.cfg.breakdown_by or ()}))
        ids = [e.id for e in out]
        if len(set(ids)) != len(out):
            dup = next(x for k, x in enumerate(ids) if x in ids[:k])
            raise ConfigError(f"task.data.id_field '{id_field}': id '{dup}' is given twice in {path} (records "
                              f"{ids.index(dup) + 1} and {ids.index(dup, ids.index(dup) + 1) + 1}); ids must be unique")
        self.prompt(out[0])
        if self.items is not None:
            self.strata = {"activity": self.items.label(out)}
            self._examples = out
        return out

    # ---- item lists (task.items): the list metrics' hooks ----------------------------------------------
    def item_catalogue(self) -> Optional[ItemCatalogue]:
        """task.items.catalogue with popularity from every loaded row's history; None without task.items."""
        return None if self.items is None else self.items.catalogue(getattr(self, "_examples", None) or self.load())

    def item_list(self, example: Example, outcome: Outcome) -> Optional[ItemList]:
        """The answer's items resolved against the catalogue (by id, else exact title)."""
        return None if self.items is None else self.items.item_list(example, outcome)

    def run_facts(self, records: Any) -> dict[str, Any]:
        """How users were grouped by activity (task.items)."""
        return {"strata": self.strata} if getattr(self, "strata", None) else {}

    def prompt(self, example: Example) -> str:
        """The user message: the template rendered in the sandbox with the row's fields (and `row`)."""
        try:
            return render_string(self.template, row=example.data, **example.data)
        except SecurityError as e:
            raise SandboxError(f"task.prompt.template: the sandbox refused it: {e}") from e
        except UndefinedError as e:
            raise ConfigError(f"task.prompt.template: {e} (fields of the data: {', '.join(example.data)})") from e
        except TemplateError as e:
            raise ConfigError(f"task.prompt.template: {type(e).__name__}: {e}") from e

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System message (task.prompt.system, optional) + the rendered user prompt."""
        system = self.cfg.prompt.system
        msgs = [{"role": "system", "content": str(system)}] if system else []
        return msgs + [{"role": "user", "content": self.prompt(example)}]

    def truth(self, example: Example) -> Any:
        """The ground-truth value of an example."""
        return example.data[str(self.cfg.ground_truth)]

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """Every configured metric; a failed parse takes the metric's failure value (0, or NaN where undefined)."""
        out: dict[str, float] = {}
        for m in self.metrics:
            fail = math.nan if m.spec.on_failure is None else m.spec.on_failure
            if outcome.parse_status == "failed" or outcome.prediction is None:
                out[m.record_name] = fail
                continue
            try:
                out[m.record_name] = m(outcome.prediction, self.truth(example))
            except (TypeError, ValueError):
                out[m.record_name] = fail
        return out

    def declared_metrics(self) -> dict[str, M.MetricSpec]:
        """The metrics task.metrics names, by output name (a corpus one, e.g. rmse, is computed from its per-example
        value over the run), and the judged metrics of task.judge_rubric."""
        judged = judge_metric_specs(self.rubric()) if self.rubric() else ()
        return {**{m.name: m.spec for m in self.metrics}, **{s.name: s for s in judged}}

    def rubric(self) -> dict[str, str]:
        """task.judge_rubric (aspect -> definition), {} when the YAML declares none."""
        return check_rubric(self.cfg.judge_rubric or {}, "task.judge_rubric")

    def judge_context(self, example: Example) -> str:
        """task.judge_context rendered with the row's fields, else the prompt the model was asked."""
        source = self.cfg.judge_context
        return render_string(str(source), row=example.data, **example.data) if source else self.prompt(example)

    def identity(self) -> dict[str, Any]:
        """Task name, data file and its hash, template hash, parser, ground truth and metrics."""
        path = self._data_path()
        return {"name": self.name, "benchmark": "generic", "data": str(path),
                "data_sha256": file_sha256(path)[:16],
                "template_sha256": hashlib.sha256(self.template.encode()).hexdigest()[:16],
                "parser": OmegaConf.to_container(self.parser_cfg) if isinstance(self.parser_cfg, DictConfig)
                else dict(self.parser_cfg), "ground_truth": str(self.cfg.ground_truth),
                "metrics": [m.name for m in self.metrics]}


class ZeroShot(Method[GenericTask]):
    """One prompt per example (the task's template); the answer goes through the task's parser."""

    name = "zero_shot"
    settings_rules = {"max_tokens": whole(1, null=True), "constrained": flag(), "seed": whole(null=True)}

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Yield one request; parse the answer into an Outcome."""
        task = self.task
        max_tokens = self.cfg.max_tokens or task.cfg.max_tokens or YamlTaskConf.max_tokens  # task's null: the default
        constraint = P.constraint(task.parser_cfg) if task.cfg.constrained else None
        req = Request.chat(task.messages(example), self.sampling(int(max_tokens)), constraint=constraint,
                           example_id=example.id)
        resp = (yield [req])[0]
        p = task.parse(resp.text)
        return Outcome(p.value, p.status, {"answer": resp.text}, notes=[p.note])


class RandomChoice(ReferenceMethod[GenericTask]):
    """Reference row: a uniformly random choice per example (seeded by `seed` and the id). Needs no model."""

    name = "random"
    settings_rules = {"seed": whole(null=True)}

    def predict(self, example: Example) -> Outcome:
        """Pick one of task.parser.choices at random."""
        task = self.task
        if task.parser_cfg.get("kind") != "choice":
            raise ConfigError("method=random needs task.parser.kind=choice (it draws one of task.parser.choices)")
        rng = random.Random(f"{self.seed}:{example.id}")
        return Outcome(rng.choice([str(c) for c in task.parser_cfg.get("choices")]), "ok", {})


GenericTask.methods = {m.name: m for m in (ZeroShot, RandomChoice, PopularItems, RandomItems)}


def check_template(source: str, **variables: Any) -> str:
    """Render a template in the sandbox (what `task.prompt.template` goes through); SandboxError if refused."""
    try:
        return sandbox().from_string(source).render(**variables)
    except SecurityError as e:
        raise SandboxError(f"template refused by the sandbox: {e}") from e
