"""Test helpers: compose the real Hydra config in-process, run the entry point in-process (run_cli), read a run dir."""
from __future__ import annotations

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from recbench.cli.overrides import method_paths
from recbench.run.construct import register_resolvers


def compose_cfg(overrides: list[str]):
    """The composed recbench config for the given overrides (as the CLI would build it, minus the hydra node)."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
        return compose(config_name="config", overrides=method_paths(overrides))


def assert_build_task_refuses(overrides: list[str], message: str) -> None:
    """build_task on the composed config raises one ConfigError starting with `message` (before any data is read)."""
    import pytest

    from recbench.api.errors import ConfigError
    from recbench.run.construct import build_task

    with pytest.raises(ConfigError) as e:
        build_task(compose_cfg(overrides))
    assert str(e.value).startswith(message), str(e.value)


def listwise_answer(req) -> str:
    """A deterministic, parseable listwise answer: the users in reverse label order."""
    text = req.messages[-1][1]
    n = int(text.split(" users all rated")[0].strip().split()[-1])
    labels = [f"User {chr(65 + i)}" for i in range(n)][::-1]
    return '{"ranking": [' + ", ".join(f'"{x}"' for x in labels) + "]}"


def read_samples(run_dir) -> list[dict]:
    """A run dir's records as dicts, each call with its messages, read through recbench.store.schema.read_run."""
    from recbench.store.schema import read_run

    out = []
    for r in read_run(run_dir, require_result=False).samples(with_prompts=True):
        d = r.to_dict()
        for c, call in zip(d["calls"], r.calls):
            c["messages"] = call.messages
        out.append(d)
    return out


def run_scripted(tmp_path, overrides: list[str], answer_fn) -> tuple[dict, list[dict], list]:
    """Run the config through the loop with a ScriptedBackend answering `answer_fn(request)` into tmp_path/run:
    (metrics.json's content, samples.jsonl's records, every request the backend was sent)."""
    import json

    from recbench.run.evaluate import run_from_config
    from tests.doubles import ScriptedBackend

    cfg = compose_cfg([*overrides, f"cache.path={tmp_path / 'cache.sqlite'}"])
    seen = []

    def answer(req):
        seen.append(req)
        return answer_fn(req)

    m = run_from_config(cfg, tmp_path / "run", backend=ScriptedBackend(answer)).to_dict()
    recs = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    return m, recs, seen


class CliResult:
    """One in-process `python -m recbench ...`: exit code, stdout, stderr, seconds."""

    def __init__(self, code: int, out: str, err: str, wall: float):
        self.code, self.out, self.err, self.wall = code, out, err, wall

    def recbench_lines(self) -> list[str]:
        """stderr lines starting with 'recbench:' other than the documented model-started line ('... ready in N s')."""
        return [ln for ln in self.err.splitlines() if ln.startswith("recbench:") and " ready in " not in ln]

    def one_error_line(self) -> str:
        """The single `recbench:` error line of a failed run (asserting no traceback and exactly one such line)."""
        assert "Traceback" not in self.err + self.out, self.err
        lines = self.recbench_lines()
        assert len(lines) == 1, self.err
        return lines[0]


def run_cli(args: list[str], capfd) -> CliResult:
    """`python -m recbench <args>` in this process (no interpreter start-up: the fast tier's way to drive the entry
    point); the exit code as the shell would see it (an exception that escapes is exit 1 with its traceback on
    stderr). What a run changes in the process (argv, the SIGTERM handler, the root logger's handlers and level,
    Hydra's global state, the derived-data folder) is given back, so the next test sees the state it would alone."""
    import logging
    import signal
    import sys
    import time
    import traceback

    from hydra.core.global_hydra import GlobalHydra

    from recbench.__main__ import main
    from recbench.store import derived_cache

    saved_derived = dict(derived_cache._DIR)
    capfd.readouterr()
    saved_argv, saved_term = sys.argv[:], signal.getsignal(signal.SIGTERM)
    root = logging.getLogger()
    saved_log = (root.handlers[:], root.level)
    sys.argv = ["recbench", *args]
    t0 = time.monotonic()
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what the interpreter would print before exiting with 1
        traceback.print_exc()
        code = 1
    finally:
        sys.argv = saved_argv
        signal.signal(signal.SIGTERM, saved_term)
        for h in root.handlers:
            if h not in saved_log[0]:
                h.close()
        root.handlers[:], _ = saved_log
        root.setLevel(saved_log[1])
        derived_cache._DIR.clear()
        derived_cache._DIR.update(saved_derived)
        GlobalHydra.instance().clear()
    wall = time.monotonic() - t0
    out, err = capfd.readouterr()
    return CliResult(code, out, err, wall)


def assert_generator_rewrites_sample(main, sample: str, out) -> None:
    """A bundled SYNTHETIC sample is what its generator `main` writes with its default arguments into `out`: every
    file byte for byte, stats.json apart from the output folder it names."""
    import json
    from pathlib import Path

    from recbench.run.construct import bundled_data

    bundled, out = Path(bundled_data(sample)), Path(out)
    main(["--out", str(out)])
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    shipped = {str(p.relative_to(bundled)) for p in bundled.rglob("*") if p.is_file() and p.name != "README.md"}
    assert written == shipped
    for rel in sorted(written - {"stats.json"}):
        assert (out / rel).read_bytes() == (bundled / rel).read_bytes(), rel
    if "stats.json" in written:
        new, old = json.loads((out / "stats.json").read_text()), json.loads((bundled / "stats.json").read_text())
        strip = lambda d: {k: ({kk: vv for kk, vv in v.items() if kk != "out"} if isinstance(v, dict) else v)  # noqa: E731
                           for k, v in d.items()}
        assert strip(new) == strip(old)


def ratings_db(path, frame):
    """A DuckDB database at `path` holding `frame` (user_id, item_id, rating, ts: a category's ratings) as the builder
    leaves them: `user_codes`, `item_codes` (each id's rank in sorted order), `a` (u, i, rating, ts) and the view `r`."""
    import duckdb

    con = duckdb.connect(str(path))
    con.register("f", frame)
    for table, col, code in (("user_codes", "user_id", "u"), ("item_codes", "item_id", "i")):
        con.execute(f"""CREATE TABLE {table} AS SELECT {col},
                        CAST(row_number() OVER (ORDER BY {col}) - 1 AS INTEGER) AS {code}
                        FROM (SELECT DISTINCT {col} FROM f)""")
    con.execute("CREATE TABLE a AS SELECT u, i, rating, ts FROM f JOIN user_codes USING (user_id) "
                "JOIN item_codes USING (item_id)")
    con.execute("""CREATE VIEW r AS SELECT uc.user_id, ic.item_id, a.rating, a.ts
                   FROM a JOIN user_codes uc USING (u) JOIN item_codes ic USING (i)""")
    con.close()
    return path
