"""Generate the bundled SYNTHETIC LLMRec sample: a P5-format beauty catalogue/sequences and Amazon-2023-format reviews.

Nothing here is real data. Planted structure, so that the reference baselines beat chance:
- P5 part: items belong to product lines; users favour 1-2 lines and buy along a line in order (the next item
  tends to be the next product of a line they bought from), with a Zipf popularity on top.
- Reviews part: rating = user bias + item quality + noise (so user/item means beat the global mean); the review
  title and text are written from templates that follow the rating.

    python -m recbench.tasks.llmrec.synth --out data/llmrec_sample
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from recbench.tasks.llmrec.candidates import freeze

LINES = {
    "nail polish": ["Lacquer", "Gel Polish", "Top Coat", "Base Coat", "Nail Art Pen"],
    "lipstick": ["Matte Lipstick", "Lip Gloss", "Lip Liner", "Lip Balm", "Liquid Lipstick"],
    "shampoo": ["Shampoo", "Conditioner", "Hair Mask", "Leave-In Spray", "Scalp Serum"],
    "moisturizer": ["Day Cream", "Night Cream", "Eye Cream", "Face Serum", "Body Lotion"],
    "perfume": ["Eau de Parfum", "Body Mist", "Roll-On Perfume", "Scented Oil", "Travel Spray"],
    "eyeshadow": ["Eyeshadow Palette", "Mascara", "Eyeliner", "Brow Pencil", "Primer"],
}
BRANDS = ["Aurora", "Belle", "Coral", "Dewy", "Elixir", "Fleur", "Glow", "Halo", "Iris", "Jade"]
SHADES = ["Ruby", "Rose", "Nude", "Berry", "Ocean", "Vanilla", "Coconut", "Lavender", "Citrus", "Midnight"]
POS = ["I love this {p}.", "This {p} works great for me.", "Really happy with this {p}.", "Great {p} for the price."]
MID = ["This {p} is okay.", "The {p} is fine but nothing special.", "Decent {p}, a bit pricey.", "The {p} does the job."]
NEG = ["This {p} did not work for me.", "Disappointed with this {p}.", "The {p} broke after a week.", "Would not buy this {p} again."]
DETAIL = ["The scent is light and pleasant.", "It lasts all day.", "Shipping was fast.", "The packaging is cute.",
          "My skin feels soft afterwards.", "The color is exactly as pictured.", "A little goes a long way."]
TITLE = {5: ["Love it!", "Works great", "Best {p} ever", "Highly recommend"], 4: ["Very good", "Nice {p}", "Pretty good {p}"],
         3: ["It's okay", "Average {p}", "Not bad"], 2: ["Not great", "Disappointing {p}"], 1: ["Terrible", "Waste of money"]}


def make_catalogue(rng: np.random.Generator, per_line: int) -> list[dict]:
    """Items of each product line in line order: (id, line, position, title)."""
    items = []
    for line, products in LINES.items():
        for k in range(per_line):
            prod = products[k % len(products)]
            title = f"{rng.choice(BRANDS)} {rng.choice(SHADES)} {prod}, {line.title()} No. {k + 1}"
            items.append({"line": line, "pos": k, "title": title})
    for i, it in enumerate(items, 1):
        it["id"] = str(i)
        it["asin"] = f"SYN{i:07d}"
    return items


def make_sequences(rng: np.random.Generator, items: list[dict], n_users: int, lo: int, hi: int) -> list[list[str]]:
    """Per user: 1-2 favourite lines; each next item continues a line (next position) or is a popular item."""
    by_line: dict[str, list[dict]] = {}
    for it in items:
        by_line.setdefault(it["line"], []).append(it)
    pop = 1.0 / np.arange(1, len(items) + 1) ** 0.8
    pop_order = rng.permutation(len(items))
    popw = np.empty(len(items))
    popw[pop_order] = pop
    popw /= popw.sum()
    lines = list(by_line)
    seqs = []
    for _ in range(n_users):
        fav = list(rng.choice(lines, size=int(rng.integers(1, 3)), replace=False))
        cursor = {ln: int(rng.integers(0, len(by_line[ln]) // 2)) for ln in fav}
        seq: list[str] = []
        for _ in range(int(rng.integers(lo, hi + 1))):
            if rng.random() < 0.8:
                ln = fav[int(rng.integers(len(fav)))]
                cursor[ln] = min(cursor[ln] + 1 + int(rng.random() < 0.2), len(by_line[ln]) - 1)
                it = by_line[ln][cursor[ln]]["id"]
            else:
                it = items[int(rng.choice(len(items), p=popw))]["id"]
            if it not in seq:
                seq.append(it)
        while len(seq) < lo:  # top up short sequences with popular unseen items
            it = items[int(rng.choice(len(items), p=popw))]["id"]
            if it not in seq:
                seq.append(it)
        seqs.append(seq)
    return seqs


def make_reviews(rng: np.random.Generator, n_users: int, n_items: int, lo: int, hi: int) -> tuple[list[dict], list[dict]]:
    """Amazon-2023-style review records and item metadata."""
    lines = list(LINES)
    meta = []
    for i in range(n_items):
        line = lines[i % len(lines)]
        prod = LINES[line][int(rng.integers(len(LINES[line])))]
        meta.append({"parent_asin": f"SYNR{i:06d}", "title": f"{rng.choice(BRANDS)} {rng.choice(SHADES)} {prod}",
                     "main_category": "All Beauty", "product": prod.lower(), "quality": float(rng.normal(0, 0.7))})
    reviews = []
    t0 = 1_600_000_000_000
    for u in range(n_users):
        uid = f"SYNUSER{u:05d}"
        bias = float(rng.normal(0.3, 0.8))
        picks = rng.choice(n_items, size=int(rng.integers(lo, hi + 1)), replace=False)
        t = t0 + int(rng.integers(0, 10**10))
        for j in picks:
            m = meta[int(j)]
            r = int(np.clip(round(3.6 + bias + m["quality"] + rng.normal(0, 0.6)), 1, 5))
            p = m["product"]
            lead = (POS if r >= 4 else MID if r == 3 else NEG)[int(rng.integers(4))].format(p=p)
            text = " ".join([lead, *rng.choice(DETAIL, size=int(rng.integers(1, 3)), replace=False)])
            title = TITLE[r][int(rng.integers(len(TITLE[r])))].format(p=p)
            t += int(rng.integers(10**8, 10**9))
            reviews.append({"rating": float(r), "title": title, "text": text, "images": [], "asin": m["parent_asin"],
                            "parent_asin": m["parent_asin"], "user_id": uid, "timestamp": t, "helpful_vote": 0,
                            "verified_purchase": True})
    return reviews, [{k: v for k, v in m.items() if k in ("parent_asin", "title", "main_category")} for m in meta]


def _write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write("".join(json.dumps(r) + "\n" for r in rows).encode())


def main(argv: list[str] | None = None) -> None:
    """Write the sample (P5 part + reviews part + frozen candidates) and print the candidate hashes."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/llmrec_sample")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--per-line", type=int, default=40)
    ap.add_argument("--review-users", type=int, default=80)
    ap.add_argument("--review-items", type=int, default=120)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    out = Path(a.out)
    p5 = out / "p5"
    p5.mkdir(parents=True, exist_ok=True)
    items = make_catalogue(rng, a.per_line)
    seqs = make_sequences(rng, items, a.users, 5, 14)
    (p5 / "sequential_data.txt").write_text("".join(f"{u} {' '.join(s)}\n" for u, s in enumerate(seqs, 1)))
    (p5 / "items.tsv").write_text("p5_item_id\tasin\ttitle\n" + "".join(f"{it['id']}\t{it['asin']}\t{it['title']}\n" for it in items))
    datamaps = {"user2id": {f"SYNU{u}": str(u) for u in range(1, len(seqs) + 1)},
                "item2id": {it["asin"]: it["id"] for it in items},
                "id2user": {str(u): f"SYNU{u}" for u in range(1, len(seqs) + 1)},
                "id2item": {it["id"]: it["asin"] for it in items}}
    (p5 / "datamaps.json").write_text(json.dumps(datamaps))
    hashes = {kind: freeze(str(p5), kind, p5 / f"candidates_{kind}.jsonl.gz")["sha256"] for kind in ("sequential", "direct")}
    rev = out / "reviews"
    rev.mkdir(parents=True, exist_ok=True)
    reviews, meta = make_reviews(rng, a.review_users, a.review_items, 5, 10)
    _write_jsonl_gz(rev / "reviews.jsonl.gz", reviews)
    _write_jsonl_gz(rev / "meta.jsonl.gz", meta)
    stats = {"synthetic": True, "generator": "recbench.tasks.llmrec.synth", "args": vars(a),
             "p5": {"users": len(seqs), "items": len(items), "interactions": sum(map(len, seqs))},
             "reviews": {"users": a.review_users, "items": a.review_items, "reviews": len(reviews)},
             "candidates_sha256": hashes}
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
