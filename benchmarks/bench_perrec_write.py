"""Benchmark: the gzip level of a PerRecBench build's ratings.csv.gz (build/member_ratings.GZIP_LEVEL).

    python benchmarks/bench_perrec_write.py /tmp/scalebench/built/ml-25M [--mb 100] [--levels 9,6,1]

Takes the build's ratings.csv.gz, decompressed (its first --mb MB of CSV text, whole lines), and compresses that same
text at each level in the same run: seconds (wall and CPU), MB/s, compressed size and its ratio to level 9, and whether
the text decompresses identically. Level 9 is what pandas' to_csv(compression="gzip") wrote before. Appends to
benchmarks/results/bench_perrec_write.json with the load average.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import time
import zlib
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "bench_perrec_write.json"


def sample_text(built: Path, mb: float) -> bytes:
    """The first `mb` MB of the decompressed ratings.csv.gz, cut at a line end."""
    with gzip.open(built / "ratings.csv.gz", "rb") as f:
        text = f.read(int(mb * 1e6))
    return text[:text.rfind(b"\n") + 1]


def measure(text: bytes, level: int) -> dict:
    """Compress `text` at `level` (gzip wrapper, as build/member_ratings.gzip_file); seconds, size, round trip."""
    t, c = time.perf_counter(), time.process_time()
    z = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = b"".join(z.compress(text[i:i + (1 << 22)]) for i in range(0, len(text), 1 << 22)) + z.flush()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"level": level, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "mb_per_s": round(len(text) / 1e6 / cpu, 1),
            "gz_mb": round(len(out) / 1e6, 2), "identical": zlib.decompress(out, 31) == text}


def main() -> None:
    """Measure each level on one build's text, print rows, append them to the results file."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("built", help="a build folder holding ratings.csv.gz")
    ap.add_argument("--mb", type=float, default=100.0, help="MB of CSV text to compress (from the file's start)")
    ap.add_argument("--levels", default="9,6,1")
    a = ap.parse_args()
    text = sample_text(Path(a.built), a.mb)
    load0 = os.getloadavg()
    rows = [measure(text, int(lv)) for lv in a.levels.split(",")]
    base = next((r for r in rows if r["level"] == 9), rows[0])
    for r in rows:
        r["size_vs_first"] = round(r["gz_mb"] / base["gz_mb"], 3)
        r["cpu_vs_first"] = round(r["cpu_s"] / base["cpu_s"], 3)
        print(f"level {r['level']}: {r['cpu_s']:.1f} s cpu ({r['wall_s']:.1f} s wall), {r['mb_per_s']} MB/s, "
              f"{r['gz_mb']} MB ({r['size_vs_first']:.3f} x level {base['level']}), identical={r['identical']}")
    rec = {"built": a.built, "text_mb": round(len(text) / 1e6, 1), "rows": rows, "time": time.strftime("%Y-%m-%dT%H:%MZ",
           time.gmtime()), "load": [round(x, 2) for x in load0] + [round(x, 2) for x in os.getloadavg()][:1],
           "command": f"python benchmarks/bench_perrec_write.py {a.built} --mb {a.mb:g} --levels {a.levels}"}
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps([*old, rec], indent=1) + "\n")
    print(f"appended to {RESULTS} (load {rec['load']})")


if __name__ == "__main__":
    main()
