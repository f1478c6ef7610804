"""What an audit may ask of a method, as one declared value: `Variant` (display order, prompt template, sampling seed).

`Method.run(example, variant)` (api/task.py) receives a Variant; `Variant()` is the plain run. A method declares
which fields it honours in `Method.variants` (its class, or a property where it depends on the task): `order` (show
the items in the k-th seeded display order and say what was shown: `Outcome.display`), `template` (ask with the
k-th paraphrase of the prompt: `variant_files` / `variant_name` name the files). The `seed` field needs nothing of
the method: `ask` shifts every request's sampling seed for it, so every method that asks a model honours it.

What each variant answered is kept typed on the sample record (`SampleRecord.variants`, one `VariantAnswer` each),
so an audit reads the answers of the variants it asked (and of any combined with them) from one declared slot.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

#: the variant fields an audit may vary
FIELDS = ("order", "template", "seed")
#: a sampling-seed variant s > 0 shifts every request's seed by s * SEED_STRIDE (methods use small offsets of their
#: own, e.g. one per self-consistency sample, so the shifted seeds never meet the run's own)
SEED_STRIDE = 1_000_003


@dataclass(frozen=True)
class Variant:
    """One way of asking an example: `order` None = the method's own order, nothing reported; k = display order k (0 =
    the usual order, reported in Outcome.display); `template` k = the k-th paraphrase (0 = the method's template);
    `seed` s = every request's sampling seed shifted by s * SEED_STRIDE (0 = the run's own seeds)."""

    order: Optional[int] = None
    template: int = 0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The samples.jsonl form: only the fields that differ from the plain run."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v != getattr(PLAIN, k)}

    @staticmethod
    def from_dict(d: Any) -> "Variant":
        """From its samples.jsonl form (unknown keys ignored)."""
        d = d if isinstance(d, dict) else {}
        return Variant(order=None if d.get("order") is None else int(d["order"]), template=int(d.get("template") or 0),
                       seed=int(d.get("seed") or 0))


#: the plain run
PLAIN = Variant()


@dataclass
class VariantAnswer:
    """What one variant of an example answered (SampleRecord.variants): the variant, the prediction, its parse status
    and metrics, what was shown and ranked (order variants), the prompt file (template variants)."""

    variant: Variant
    prediction: Any = None
    parse_status: str = "ok"
    metrics: dict[str, Optional[float]] = field(default_factory=dict)
    shown: Optional[list[str]] = None
    ranked: Optional[list[str]] = None
    template_file: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        """The samples.jsonl form (optional fields only when set)."""
        out: dict[str, Any] = {"variant": self.variant.to_dict(), "prediction": self.prediction,
                               "parse_status": self.parse_status, "metrics": self.metrics}
        for k in ("shown", "ranked", "template_file"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "VariantAnswer":
        """From one samples.jsonl `variants` entry."""
        return VariantAnswer(Variant.from_dict(d.get("variant")), d.get("prediction"), d.get("parse_status", "ok"),
                             d.get("metrics") or {}, d.get("shown"), d.get("ranked"), d.get("template_file"))


def answers_of(variants: list[VariantAnswer], **fixed: Any) -> list[VariantAnswer]:
    """The answers whose variant has the `fixed` field values (e.g. template=0, seed=0: the order audit's own)."""
    return [a for a in variants if all(getattr(a.variant, k) == v for k, v in fixed.items())]


# ---- prompt template variants ---------------------------------------------------------------------------------
def variant_name(name: str, k: int) -> str:
    """The file of template variant k: `listwise.j2` -> `listwise_t1.j2` (k = 0: the name itself; a path keeps its
    folder)."""
    if not k:
        return name
    p = Path(name)
    return str(p.with_name(f"{p.stem}_t{int(k)}{p.suffix}")) if p.parent != Path(".") else f"{p.stem}_t{int(k)}{p.suffix}"


def variant_files(package: str, name: str) -> list[str]:
    """The template and its paraphrases that exist (package templates/ or beside a path): [name, name_t1, ...]."""
    from recbench.api.prompts import template_path  # jinja2, only when templates are asked for

    out = [name]
    while template_path(package, variant_name(name, len(out))).is_file():
        out.append(variant_name(name, len(out)))
    return out


def reseeded_sampling(sampling: Any, seed: int) -> Any:
    """SamplingParams with the seed shifted for sampling-seed variant `seed` (0: unchanged)."""
    return sampling if not seed else dataclasses.replace(sampling, seed=int(sampling.seed) + int(seed) * SEED_STRIDE)
