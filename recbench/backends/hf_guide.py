"""JSON-schema guided decoding for the `hf` backend: transformers' `prefix_allowed_tokens_fn` from lm-format-enforcer's
token enforcer, so a constrained answer (a judge's verdict, a constrained ranking) is always JSON of its schema.

lm-format-enforcer's own transformers module imports names transformers 5 no longer has, so the two small pieces it
holds (the tokenizer's token list, the prefix function) are written here against its core classes."""
from __future__ import annotations

import functools
import json
from typing import Any, Iterable


def tokenizer_data(tokenizer: Any, eos_ids: Iterable[int]) -> Any:
    """lm-format-enforcer's view of a tokenizer: each regular token's text (with its leading space when it starts a
    word), the decoder and the end-of-sequence ids (built once per backend: one pass over the vocabulary)."""
    from lmformatenforcer import TokenEnforcerTokenizerData

    token_0 = tokenizer.encode("0", add_special_tokens=False)[-1]
    special = set(tokenizer.all_special_ids)
    regular = []
    for idx in range(len(tokenizer)):
        if idx in special:
            continue
        after_0 = tokenizer.decode([token_0, idx])[1:]  # a word-start token shows its space after a "0"
        regular.append((idx, after_0, len(after_0) > len(tokenizer.decode([idx]))))
    decode = functools.partial(_decode, tokenizer)
    return TokenEnforcerTokenizerData(regular, decode, sorted(eos_ids), False, len(tokenizer))


def _decode(tokenizer: Any, tokens: list[int]) -> str:
    return tokenizer.decode(tokens).rstrip("\ufffd")  # an incomplete multi-byte character is not text yet


def json_guide(data: Any, schema: str) -> Any:
    """prefix_allowed_tokens_fn(batch_id, ids) keeping each row's continuation inside the JSON schema."""
    from lmformatenforcer import JsonSchemaParser, TokenEnforcer

    enforcer = TokenEnforcer(data, JsonSchemaParser(json.loads(schema)))

    def allowed(batch_id: int, ids: Any) -> list[int]:
        return enforcer.get_allowed_tokens(ids.tolist()).allowed_tokens

    return allowed
