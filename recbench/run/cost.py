"""Run cost from token counts and an optional price table in the model config (model.price)."""
from __future__ import annotations

from typing import Any, Mapping, Optional


def run_cost(price: Optional[Mapping[str, Any]], prompt_tokens: int, completion_tokens: int) -> Optional[dict[str, Any]]:
    """Cost block for metrics.json from `price` {prompt_per_1m, completion_per_1m, currency}; None without a price."""
    if not price:
        return None
    p_in = float(price.get("prompt_per_1m", 0.0) or 0.0)
    p_out = float(price.get("completion_per_1m", 0.0) or 0.0)
    prompt_cost = prompt_tokens * p_in / 1e6
    completion_cost = completion_tokens * p_out / 1e6
    return {
        "currency": str(price.get("currency", "USD")),
        "prompt_per_1m": p_in,
        "completion_per_1m": p_out,
        "prompt_tokens": int(prompt_tokens),
        "completion_tokens": int(completion_tokens),
        "prompt_cost": round(prompt_cost, 6),
        "completion_cost": round(completion_cost, 6),
        "total": round(prompt_cost + completion_cost, 6),
        "source": str(price.get("source", "")),
    }
