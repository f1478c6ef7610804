"""`predictions` backend: replays answers produced elsewhere, from a JSONL file keyed by example id (no model call)."""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Literal

from recbench.backends.base import Backend
from recbench.types import Request, Response

log = logging.getLogger(__name__)


def read_predictions(path: str | Path, id_field: str = "id", text_field: str = "response") -> dict[str, str]:
    """{example id: answer text} from a JSONL file of {"id": ..., "response": ...} lines (ids compared as strings)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            if id_field not in rec or text_field not in rec:
                raise ValueError(f"{path}:{n}: a prediction line needs '{id_field}' and '{text_field}' fields, got {sorted(rec)}")
            key = str(rec[id_field])
            if key in out and out[key] != rec[text_field]:
                raise ValueError(f"{path}:{n}: example id {key!r} appears twice with different answers")
            out[key] = str(rec[text_field]) if rec[text_field] is not None else ""
    return out


class PredictionsBackend(Backend):
    """Answers each request with the recorded response of its example (Request.example_id); never calls a model."""

    kind = "predictions"

    def __init__(self, path: str, name: str | None = None, id_field: str = "id", text_field: str = "response",
                 on_missing: Literal["error", "empty"] = "error", batch_size: int = 256):
        if not path:
            raise ValueError("the predictions backend needs a file: model.backend.path=<file.jsonl>")
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
