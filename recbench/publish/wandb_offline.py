"""An offline W&B run read back without an account or a server: the records of its `run-<id>.wandb` file (a
LevelDB-style log of protobuf records, W&B's own format) as config, summary, logged history keys and exit code."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Iterator

_BLOCK = 32768  # the log's block size
_HEADER = 7  # ':W&B', a 2-byte magic and a version byte at the start; each record: crc (4), length (2), type (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _chunks(data: bytes) -> Iterator[bytes]:
    """The records' payloads, pieces of one record joined."""
    pos, buf = _HEADER, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            buf = chunk
        elif kind == _MIDDLE:
            buf += chunk
        elif kind == _LAST:
            yield buf + chunk
            buf = b""
        elif kind == 0 and length == 0:  # zero padding up to the block's end
            pos += left - 7


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def read_offline_run(path: str | Path) -> dict[str, Any]:
    """{config, summary, history_keys, exit_code} of an offline run's .wandb file (exit_code None while it runs)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run file")
    out: dict[str, Any] = {"config": {}, "summary": {}, "history_keys": set(), "exit_code": None}
    for chunk in _chunks(data):
        rec = pb.Record()
        rec.ParseFromString(chunk)
        kind = rec.WhichOneof("record_type")
        if kind in ("run", "config"):  # the config given to init comes with the run record, updates after it
            cfg = rec.run.config if kind == "run" else rec.config
            out["config"].update({_key(u): json.loads(u.value_json) for u in cfg.update})
        elif kind == "summary":
            out["summary"].update({_key(u): json.loads(u.value_json) for u in rec.summary.update})
        elif kind == "history":
            out["history_keys"].update(_key(i) for i in rec.history.item)
        elif kind == "exit":
            out["exit_code"] = rec.exit.exit_code
    return out
