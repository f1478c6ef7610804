"""`predictions` backend: replays answers produced elsewhere (JSON Lines or JSON array, keyed by example id)."""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Literal

from recbench.backends.predictions_conf import PredictionsBackendConf
from recbench.backends.base import Backend
from recbench.api.types import Request, Response

log = logging.getLogger(__name__)


FORMAT_HINT = ('expected JSON Lines (one {"%s": ..., "%s": ...} object per line) '
               'or a JSON array of such objects')


def _records(path: Path, text: str, id_field: str, text_field: str) -> list[tuple[str, Any]]:
    """(where, record) pairs from a JSON array or JSON Lines text; a ValueError naming the format when neither parses."""
    hint = FORMAT_HINT % (id_field, text_field)
    body = text.lstrip("\ufeff \t\r\n")
    if body.startswith("["):
        try:
            data = json.loads(body)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); {hint}") from None
        return [(f"{path}: element {i}", rec) for i, rec in enumerate(data)]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}:{n}", json.loads(line)))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not a JSON object ({e.msg}); {hint}") from None
    return out


def read_predictions(path: str | Path, id_field: str = "id", text_field: str = "response") -> dict[str, str]:
    """{example id: answer text} from JSON Lines or a JSON array of {"id": ..., "response": ...} (ids as strings)."""
    path = Path(path)
    out: dict[str, str] = {}
    for where, rec in _records(path, path.read_text(encoding="utf-8"), id_field, text_field):
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: a prediction must be a JSON object, got {type(rec).__name__}; "
                             + FORMAT_HINT % (id_field, text_field))
        if id_field not in rec or text_field not in rec:
            raise ValueError(f"{where}: a prediction needs '{id_field}' and '{text_field}' fields, got {sorted(rec)} "
                             f"(set model.backend.id_field / model.backend.text_field)")
        key = str(rec[id_field])
        if key in out and out[key] != rec[text_field]:
            raise ValueError(f"{where}: example id {key!r} appears twice with different answers")
        out[key] = str(rec[text_field]) if rec[text_field] is not None else ""
    return out


class PredictionsBackend(Backend):
    """Answers each request with the recorded response of its example (Request.example_id); never calls a model."""

    kind = "predictions"

    def __init__(self, path: str, name: str | None = PredictionsBackendConf.name, id_field: str = "id",
                 text_field: str = "response", on_missing: Literal["error", "empty"] = "error",
                 batch_size: int = PredictionsBackendConf.batch_size):  # type: ignore[assignment]
        if not path:
            raise ValueError("the predictions backend needs a file: model.backend.path=<file.jsonl or file.json>")
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"predictions file not found: {self.path}")
        if on_missing not in ("error", "empty"):
            raise ValueError(f"on_missing must be 'error' or 'empty', got {on_missing!r}")
        self.name = name or self.path.stem
        self.on_missing = on_missing
        self.batch_size = batch_size
        self.answers = read_predictions(self.path, id_field, text_field)
        self._sha = hashlib.sha256(self.path.read_bytes()).hexdigest()
        self.missing: list[str] = []

    def identity(self) -> dict[str, Any]:
        """Kind, name and the file's content hash; keyed_by_example puts the example id into cache keys."""
        return {"kind": self.kind, "name": self.name, "file_sha256": self._sha, "keyed_by_example": True}

    def effective_params(self) -> dict[str, Any]:
        """The replayed file, its size, and how missing ids are treated."""
        return {"path": str(self.path), "answers": len(self.answers), "on_missing": self.on_missing}

    def generate(self, requests: list[Request]) -> list[Response]:
        """The recorded answer of each request's example; a missing id is an error (or an empty answer)."""
        out = []
        for r in requests:
            if r.example_id is None:
                out.append(Response(error="request carries no example_id: this method cannot be replayed from a predictions file"))
            elif r.example_id in self.answers:
                out.append(Response(text=self.answers[r.example_id], finish_reason="replayed"))
            else:
                self.missing.append(r.example_id)
                if self.on_missing == "empty":
                    out.append(Response(text="", finish_reason="missing"))
                else:
                    out.append(Response(error=f"no prediction for example id {r.example_id!r} in {self.path}"))
        return out
