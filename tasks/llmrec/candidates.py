"""Frozen candidate lists (1 held-out positive + N sampled negatives): sampled ONCE with a seed, hashed, reused.

The sampler is keyed by BLAKE2b(seed, task, user, draw) so it does not depend on any library's RNG stream:
freezing again on any machine gives the byte-identical file and the same content hash. Runs never sample;
they load the file and refuse it when its hash or its positives disagree with the recorded ones. A task whose file
is missing freezes it on first use (`ensure_frozen`, with a progress bar) and then checks the recorded hash.

    python -m recbench.tasks.llmrec.candidates --data ../shared/data/beauty_p5 --kind direct --out FILE
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Optional

from recbench.api.datafiles import read_bytes
from recbench.api.errors import DataError
from recbench.tasks.llmrec.data import P5Data, load_p5

FORMAT_VERSION = 1


def _draw(seed: int, kind: str, user: str, k: int, n: int) -> int:
    """Deterministic index in [0, n) for the k-th draw of a user."""
    d = hashlib.blake2b(f"{seed}|{kind}|{user}|{k}".encode(), digest_size=8).digest()
    return int.from_bytes(d, "big") % n


def sample_candidates(data: P5Data, kind: str, seed: int, n_negatives: int, progress: bool = False) -> list[dict]:
    """Per user: the test target plus n_negatives items the user never interacted with, in a seeded shuffled order."""
    from tqdm.auto import tqdm

    items = data.items
    n = len(items)
    out = []
    users = tqdm(data.sequences.items(), total=len(data.sequences), desc=f"freezing {kind} candidates",
                 unit="user", disable=not progress, mininterval=1.0)
    for user, seq in users:
        seen = set(seq)
        if n - len(seen) < n_negatives:
            raise ValueError(f"user {user}: only {n - len(seen)} items left to sample {n_negatives} negatives from")
        negs: list[str] = []
        chosen: set[str] = set()
        k = 0
        while len(negs) < n_negatives:
            it = items[_draw(seed, kind, user, k, n)]
            k += 1
            if it not in seen and it not in chosen:
                chosen.add(it)
                negs.append(it)
        cands = negs + [seq[-1]]
        # seeded Fisher-Yates shuffle so the positive's position carries no signal
        for i in range(len(cands) - 1, 0, -1):
            j = _draw(seed, kind + "#shuffle", user, i, i + 1)
            cands[i], cands[j] = cands[j], cands[i]
        out.append({"user_id": user, "target": seq[-1], "candidates": cands})
    return out


def content_bytes(records: list[dict]) -> bytes:
    """Canonical serialisation of candidate records (one JSON object per line): what the hash covers."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()


def freeze(data_dir: str | P5Data, kind: str, out: str | Path, seed: int = 2023, n_negatives: int = 99,
           progress: bool = False) -> dict:
    """Sample candidates once and write FILE (gzip, mtime 0) + FILE.manifest.json; returns the manifest.

    Both files are written under temporary names and renamed into place (manifest first), so a reader never sees a
    half-written file, and two processes freezing the same file at once leave one identical result.
    """
    data = data_dir if isinstance(data_dir, P5Data) else load_p5(str(data_dir))
    records = sample_candidates(data, kind, seed, n_negatives, progress=progress)
    raw = content_bytes(records)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    manifest = {"format_version": FORMAT_VERSION, "kind": kind, "seed": seed, "n_negatives": n_negatives,
                "users": len(records), "sha256": hashlib.sha256(raw).hexdigest(),
                "source_sha256": data.source_sha256, "sampler": "blake2b(seed|kind|user|draw) mod n_items"}
    tmp = f".tmp{os.getpid()}"
    man_p = Path(str(out) + ".manifest.json")
    Path(str(man_p) + tmp).write_text(json.dumps(manifest, indent=2) + "\n")
    with open(str(out) + tmp, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw)
    os.replace(str(man_p) + tmp, man_p)
    os.replace(str(out) + tmp, out)
    return manifest


def ensure_frozen(path: str | Path, expected_sha256: Optional[str], data: P5Data, kind: str, seed: int = 2023,
                  n_negatives: int = 99, progress: bool = True) -> bool:
    """Freeze the candidate file on first use when it is missing (deterministic: it must reproduce expected_sha256).

    Returns True when it froze the file. A file that exists is left alone (load_candidates checks it). A fresh
    freeze whose hash differs from the recorded one is removed again, with an error naming the likely cause.
    """
    p = Path(path)
    if p.exists():
        return False
    print(f"recbench: {p} is missing; freezing {kind} candidates once ({len(data.sequences)} users, seed {seed}, "
          f"{n_negatives} negatives each)", file=sys.stderr)
    man = freeze(data, kind, p, seed, n_negatives, progress=progress)
    if expected_sha256 and man["sha256"] != expected_sha256:
        p.unlink(missing_ok=True)
        Path(str(p) + ".manifest.json").unlink(missing_ok=True)
        raise CandidateFileError(
            f"freezing {p} from {data.source_sha256[:12]}... gave sha256 {man['sha256']}, not the recorded "
            f"{expected_sha256}: the data folder is not the one the task was recorded for (or seed/negatives differ). "
            "Fix: point task.data_dir at the recorded data, or set task.candidates.sha256=null to accept new candidates")
    print(f"recbench: froze {p} (sha256 {man['sha256'][:16]}..., matches the recorded hash)", file=sys.stderr)
    return True


class CandidateFileError(DataError):
    """A candidate file that is missing, altered, or drawn from other data (a user error: one line, exit 2)."""


def load_candidates(path: str | Path, expected_sha256: Optional[str], data: P5Data) -> dict[str, dict]:
    """user_id -> {target, candidates}, after checking the content hash and that every positive is the user's test item
    (candidate ids are the catalogue's own strings, data.titles' keys)."""
    p = Path(path)
    if not p.exists():
        raise CandidateFileError(
            f"frozen candidate file {p} does not exist. Freeze it once with `python -m recbench.tasks.llmrec.candidates "
            f"--data <data_dir> --kind <sequential|direct> --out {p}` (the recorded hash then checks it)")
    raw = read_bytes(p)  # DataError for an empty, non-gzip or cut-short file
    digest = hashlib.sha256(raw).hexdigest()
    if expected_sha256 and digest != expected_sha256:
        raise CandidateFileError(f"{p}: content sha256 {digest} != recorded {expected_sha256}; the frozen candidates "
                                 "were changed or resampled. Restore the file (or record the new hash on purpose).")
    man_p = Path(str(p) + ".manifest.json")
    if man_p.exists():
        man = json.loads(man_p.read_text())
        if man.get("sha256") != digest:
            raise CandidateFileError(f"{p}: content hash {digest} differs from its manifest's {man.get('sha256')}")
        if man.get("source_sha256") and man["source_sha256"] != data.source_sha256:
            raise CandidateFileError(f"{p} was frozen from other data (source sha256 {man['source_sha256']}, "
                                     f"data has {data.source_sha256})")
    out: dict[str, dict] = {}
    # the catalogue's own id strings: 100,000 users x 100 candidates share them instead of holding 10 M copies
    canon = {i: i for i in data.titles}
    for no, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise CandidateFileError(f"{p}:{no}: not valid JSON ({e.msg}). Restore the file or freeze it again") from None
        seq = data.sequences.get(r["user_id"])
        if seq is None or seq[-1] != r["target"] or r["target"] not in r["candidates"]:
            raise CandidateFileError(f"{p}: user {r['user_id']}: positive {r['target']} is not the user's test item")
        r["candidates"] = [canon.get(i, i) for i in r["candidates"]]
        out[r["user_id"]] = r
    return out


def main(argv: Optional[list[str]] = None) -> None:
    """CLI: freeze a candidate file and print its manifest (hash to record in conf/task/llmrec_*.yaml)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="P5-format folder (sequential_data.txt, *items.tsv)")
    ap.add_argument("--kind", required=True, choices=["sequential", "direct"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=2023)
    ap.add_argument("--negatives", type=int, default=99)
    a = ap.parse_args(argv)
    print(json.dumps(freeze(a.data, a.kind, a.out, a.seed, a.negatives), indent=2))


if __name__ == "__main__":
    main()
