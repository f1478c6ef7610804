"""Time each stage of the duckdb build engine's prepare (build/duckdb_engine.prepare: load, clean, summary, annotate,
eligible, chains) on one input, wall and process CPU seconds (DuckDB's threads included), the load average and peak
RSS after each. Run it on two trees for a before/after (the same input, side by side or one after the other):

    PYTHONPATH=. python benchmarks/bench_perrec_prepare.py movielens /tmp/scalebench/data/ml-25M WORK --pio-false
    cd BASE && PYTHONPATH=. python $TREE/benchmarks/bench_perrec_prepare.py movielens /tmp/scalebench/data/ml-25M WORK2

`--pio-false` turns DuckDB's preserve_insertion_order off after the load, as build/duckdb_engine.prepare does since the
integer-code rewrite (leave it out for trees before it). WORK is emptied first and keeps the database afterwards.
Results of 2026-11-26: benchmarks/results/bench_perrec_prepare_25M.txt.
"""
import os, sys, time, json, shutil, resource
from pathlib import Path
from recbench.tasks.perrec.build import sql
from recbench.tasks.perrec.build import duckdb_engine as bd
from recbench.tasks.perrec.build.config import BuildConfig

src, inp, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
shutil.rmtree(folder, ignore_errors=True); folder.mkdir(parents=True)
cfg = BuildConfig(per_size=20000, seed=0)
eng = bd.Engine()
con = bd.connect(folder / "db.duckdb", eng)
T, C = {}, {}
t, c = time.perf_counter(), time.process_time()
def lap(name):
    global t, c
    now, cnow = time.perf_counter(), time.process_time()
    T[name], C[name] = round(now - t, 2), round(cnow - c, 2)
    t, c = now, cnow
    print(f"{name}: {T[name]} s wall, {C[name]} s cpu, load {os.getloadavg()[0]:.1f}, "
          f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1e6:.2f} GB", flush=True)
path = sql.ratings_file(src, inp)
n = sql.load(con, src, path); lap("load")
if "--pio-false" in sys.argv: con.execute("SET preserve_insertion_order = false")
sql.clean(con, None, None); lap("clean")
s = sql.summary(con); lap("summary")
sql.annotate(con, cfg.avg); lap("annotate")
ups = bd.units_per_second(s["t_max"], "auto")
ne = sql.eligible(con, cfg.gamma, int(cfg.window_days * 86400 * ups)); lap("eligible")
m, l, it = bd.chains(con, cfg.lam, eng.batch_rows); lap("chains")
ni = con.execute("SELECT count(DISTINCT icode) FROM e").fetchone()[0]; lap("n_items")
con.execute("CHECKPOINT"); lap("checkpoint")
print(json.dumps(T), json.dumps(C), "total wall", round(sum(T.values()), 1), "cpu", round(sum(C.values()), 1),
      "chains", len(l), "eligible", ne, "items", ni)
