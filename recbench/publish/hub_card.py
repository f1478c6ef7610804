"""The Hub cards of an export, written and checked with huggingface_hub's own card and metadata parsers: the dataset
card (`README.md`) declaring the results and each run's details as configs, and per model a model card whose
`model-index` block holds its eval results (`model_cards/<model>.md`, the block to paste into the model's card).
`push` uploads the folder as a dataset repo when a token is set."""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Optional

from recbench.publish.hub import RESULTS, ExportedRun

#: the task type every recbench eval result declares in a model-index block
TASK_TYPE = "recommendation"


class HubRefused(RuntimeError):
    """An export the Hub's parsers do not read back as written, or a push that cannot happen (one line)."""


def dataset_card(runs: list[ExportedRun], rows: list[dict[str, Any]], title: str, repo: str = "REPO") -> Any:
    """The dataset card: configs `results` (every run's metrics with CIs) and `details_<run id>` (its samples)."""
    from huggingface_hub import DatasetCard, DatasetCardData

    configs = [{"config_name": "results", "data_files": [{"split": "latest", "path": RESULTS}]}]
    configs += [{"config_name": f"details_{e.id}", "data_files": [{"split": "latest", "path": e.details}]}
                for e in runs]
    data = DatasetCardData(pretty_name=title, configs=configs, tags=["recbench", "evaluation", "recommendation"])
    lines = [f"# {title}", "", "Evaluation results written by recbench (`python -m recbench.export`).", "",
             "- `results`: one row per run, slice, value and metric: mean, 95% bootstrap CI (`ci_low`, `ci_high`), n, "
             "direction.", "- `details_<run id>`: one row per example of that run: prediction, truth, parse status, "
             "the per-example metrics (`metric.<name>`).", "", "| run id | task | model | method | headline |",
             "|---|---|---|---|---|"]
    for e in runs:
        r = e.run.result
        head = next((x for x in rows if x["run_id"] == e.id and x["slice"] == "all" and x["metric"] == r.headline_metric),
                    None)
        shown = f"{r.headline_metric} {head['mean']:.3f}" if head and head["mean"] is not None else "—"
        lines.append(f"| {e.id} | {r.task_name} | {r.model} | {r.method} | {shown} |")
    lines += ["", "```python", "from datasets import load_dataset", "", f'results = load_dataset("{repo}", "results")',
              "```", ""]
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines))


def model_name(e: ExportedRun) -> str:
    """The system a model-index block is about: the model, or the method of a model-free run."""
    return e.model if e.model != "none" else f"{e.run.result.method} (model-free)"


def eval_results(runs: list[ExportedRun], rows: list[dict[str, Any]], dataset_id: str) -> dict[str, list[Any]]:
    """Per system, huggingface_hub EvalResults: each run's overall metrics (metric config = the method)."""
    from huggingface_hub import EvalResult

    by: dict[str, list[Any]] = {}
    for e in runs:
        for x in rows:
            if x["run_id"] != e.id or x["slice"] != "all" or x["mean"] is None or not math.isfinite(x["mean"]):
                continue
            by.setdefault(model_name(e), []).append(EvalResult(
                task_type=TASK_TYPE, task_name=x["task"], dataset_type=dataset_id, dataset_name=x["task"],
                dataset_config="results", dataset_split="latest", metric_type=x["metric"], metric_value=x["mean"],
                metric_name=f"{x['metric']} ({x['method']}, {x['variant']})", metric_config=x["method"]))
    return by


def model_cards(results: dict[str, list[Any]]) -> dict[str, Any]:
    """A model card per system holding only its model-index block (and a line saying where it came from)."""
    from huggingface_hub import ModelCard, ModelCardData

    cards = {}
    for name, evals in results.items():
        data = ModelCardData(model_name=name, eval_results=evals)
        cards[name] = ModelCard(f"---\n{data.to_yaml()}\n---\n\n# {name}\n\nEval results from recbench: paste the "
                                "model-index block above into the model's card.\n")
    return cards


def card_file(name: str) -> str:
    """The file name of a system's model card."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") + ".md"


def validate(out: Path, runs: list[ExportedRun], results: dict[str, list[Any]]) -> None:
    """Read the written cards back with huggingface_hub's parsers: every config's files exist, every model-index
    parses into the same eval results (task, dataset, metric, value). HubRefused naming what differs."""
    from huggingface_hub import DatasetCard, ModelCard

    card = DatasetCard.load(out / "README.md")
    configs = {c["config_name"]: c for c in (card.data.to_dict().get("configs") or [])}
    if set(configs) != {"results", *(f"details_{e.id}" for e in runs)}:
        raise HubRefused(f"{out / 'README.md'}: the configs read back are {sorted(configs)}")
    for c in configs.values():
        for f in c["data_files"]:
            if not (out / f["path"]).is_file():
                raise HubRefused(f"{out / 'README.md'}: config {c['config_name']} names {f['path']}, which is missing")
    for name, evals in results.items():
        back = ModelCard.load(out / "model_cards" / card_file(name)).data.eval_results or []
        want = {(e.task_type, e.dataset_type, e.metric_type, e.metric_config, e.metric_value) for e in evals}
        got = {(e.task_type, e.dataset_type, e.metric_type, e.metric_config, e.metric_value) for e in back}
        if want != got:
            raise HubRefused(f"model_cards/{card_file(name)}: the model-index reads back differently "
                             f"({len(got)} of {len(want)} results)")


def token() -> Optional[str]:
    """The Hugging Face token: $HF_TOKEN, else the one `hf auth login` saved (None when neither)."""
    from huggingface_hub import get_token

    return os.environ.get("HF_TOKEN") or get_token()


def push(out: Path, repo: str, private: bool = False) -> str:
    """Upload the folder as the dataset repo `repo` (made when missing); its URL. HubRefused without a token."""
    tok = token()
    if not tok:
        raise HubRefused(f"--push {repo} needs a Hugging Face token (set HF_TOKEN or run `hf auth login`); "
                         f"nothing pushed, the export is in {out}")
    from huggingface_hub import HfApi

    api = HfApi(token=tok)
    try:
        api.create_repo(repo, repo_type="dataset", exist_ok=True, private=private)
        info = api.upload_folder(folder_path=str(out), repo_id=repo, repo_type="dataset",
                                 commit_message="recbench export")
    except Exception as e:  # noqa: BLE001 - network, auth, a repo name the Hub refuses: one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise HubRefused(f"push to {repo} failed ({type(e).__name__}: {first}); the export is in {out}") from None
    return str(getattr(info, "commit_url", "") or f"https://huggingface.co/datasets/{repo}")
