"""Per-request cost of OpenAI-compatible HTTP clients, one run, same prompts, same stub server (its own process).

    python benchmarks/bench_openai_client.py [--n 120] [--concurrency 32] [--latency 0.2] [--reps 3] [--stub-engine asyncio]

Clients, each keeping `concurrency` requests in flight over keep-alive connections:
  sdk        the `openai` SDK's AsyncOpenAI (what the backend used before)
  httpx      a raw httpx.AsyncClient (HTTP/1.1, connection limits = concurrency)
  aiohttp    a raw aiohttp.ClientSession (TCPConnector limit = concurrency), if aiohttp is installed
  urllib     stdlib urllib in `concurrency` threads (the issue's reference point)
  backend    recbench's OpenAIBackend.generate (the transport it picks, retries, parsing, accounting)
Each line: wall seconds (best of reps), client CPU seconds, and ideal = n x latency / concurrency.
Results also go to benchmarks/results/bench_openai_client.json.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from recbench.testing.openai_stub import ENGINES, start_stub_process  # noqa: E402

HEADERS = {"Authorization": "Bearer EMPTY", "Content-Type": "application/json"}


def _bodies(n: int) -> list[dict[str, Any]]:
    return [{"model": "stub", "messages": [{"role": "user", "content": f"User A:\n- Average rating: {i % 5}.0\n"
                                                                      f"User B:\n- Average rating: 2.5\nprompt {i}"}],
             "temperature": 0.0, "max_tokens": 16} for i in range(n)]


async def _sdk(url: str, bodies: list[dict], c: int) -> list[str]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="EMPTY", base_url=url, max_retries=0)
    sem = asyncio.Semaphore(c)

    async def one(b: dict) -> str:
        async with sem:
            r = await client.chat.completions.create(**b)
            return r.choices[0].message.content or ""

    try:
        return list(await asyncio.gather(*(one(b) for b in bodies)))
    finally:
        await client.close()


async def _httpx(url: str, bodies: list[dict], c: int) -> list[str]:
    import httpx

    client = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=c, max_keepalive_connections=c))
    sem = asyncio.Semaphore(c)

    async def one(b: dict) -> str:
        async with sem:
            r = await client.post(url + "/chat/completions", content=json.dumps(b).encode(), headers=HEADERS)
            return json.loads(r.content)["choices"][0]["message"]["content"]

    try:
        return list(await asyncio.gather(*(one(b) for b in bodies)))
    finally:
        await client.aclose()


async def _aiohttp(url: str, bodies: list[dict], c: int) -> list[str]:
    import aiohttp

    sem = asyncio.Semaphore(c)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as s:
        async def one(b: dict) -> str:
            async with sem:
                async with s.post(url + "/chat/completions", data=json.dumps(b).encode(), headers=HEADERS) as r:
                    return json.loads(await r.read())["choices"][0]["message"]["content"]

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def _urllib(url: str, bodies: list[dict], c: int) -> list[str]:
    def one(b: dict) -> str:
        req = urllib.request.Request(url + "/chat/completions", data=json.dumps(b).encode(), headers=HEADERS)
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["choices"][0]["message"]["content"]

    with ThreadPoolExecutor(c) as ex:
        return list(ex.map(one, bodies))


def _backend(url: str, bodies: list[dict], c: int) -> list[str]:
    from recbench.backends.openai import OpenAIBackend
    from recbench.api.types import Request, SamplingParams

    b = OpenAIBackend(model="stub", base_url=url, concurrency=c)
    try:
        reqs = [Request.chat(x["messages"], SamplingParams(max_tokens=16)) for x in bodies]
        return [r.text for r in b.generate(reqs)]
    finally:
        b.close()


def clients() -> dict[str, Callable[[str, list[dict], int], list[str]]]:
    """name -> run(url, bodies, concurrency) for every client installed here."""
    out: dict[str, Callable] = {"sdk": lambda u, b, c: asyncio.run(_sdk(u, b, c)),
                                "httpx": lambda u, b, c: asyncio.run(_httpx(u, b, c))}
    try:
        import aiohttp  # noqa: F401

        out["aiohttp"] = lambda u, b, c: asyncio.run(_aiohttp(u, b, c))
    except ImportError:
        pass
    out["urllib"] = _urllib
    out["backend"] = _backend
    return out


def measure(n: int = 120, concurrency: int = 32, latency: float = 0.2, reps: int = 3,
            only: tuple[str, ...] = (), emit: Callable[[str], None] = print,
            stub_engine: str = "threads") -> dict[str, Any]:
    """Best-of-reps wall and CPU per client against one stub process; prints each figure as it is measured."""
    bodies = _bodies(n)
    ideal = n * latency / concurrency
    res: dict[str, Any] = {"n": n, "concurrency": concurrency, "latency_s": latency, "ideal_s": round(ideal, 3),
                           "stub_engine": stub_engine}
    with start_stub_process(latency_s=latency, engine=stub_engine) as stub:
        expected = None
        for name, fn in clients().items():
            if only and name not in only:
                continue
            walls, cpus = [], []
            for _ in range(reps):
                c0, t0 = time.process_time(), time.perf_counter()
                texts = fn(stub.base_url, bodies, concurrency)
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
                expected = expected or texts
                if texts != expected:
                    raise AssertionError(f"{name}: answers differ from the first client's")
            w, cpu = min(walls), min(cpus)
            res[name] = {"wall_s": round(w, 3), "cpu_s": round(cpu, 3), "cpu_ms_per_request": round(1000 * cpu / n, 2),
                         "ideal_over_wall": round(ideal / w, 3), "walls": [round(x, 3) for x in walls],
                         "load_avg": os.getloadavg()}
            emit(f"{name:8s} wall {w:6.3f}s  cpu {cpu:6.3f}s ({1000 * cpu / n:5.2f} ms/request)  "
                 f"ideal/wall {ideal / w:5.2f}  load {os.getloadavg()[0]:.1f}")
        res["stub"] = stub.stats()
    return res


def main() -> None:
    """Measure every client and write the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma list of clients (sdk,httpx,aiohttp,urllib,backend)")
    ap.add_argument("--stub-engine", choices=ENGINES, default="threads",
                    help="the stub server's engine (recbench/testing/openai_stub.py ENGINES)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_openai_client.json"))
    a = ap.parse_args()
    print(f"{a.n} requests, concurrency {a.concurrency}, stub latency {a.latency:g}s: ideal "
          f"{a.n * a.latency / a.concurrency:.3f}s; load {os.getloadavg()[0]:.1f}", flush=True)
    res = measure(a.n, a.concurrency, a.latency, a.reps, tuple(x for x in a.only.split(",") if x),
                  emit=lambda s: print(s, flush=True), stub_engine=a.stub_engine)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
