"""Which recbench modules the fast tier leaves unrun: runs `bash scripts/test.sh --fast`'s tests under coverage.py and
lists every .py file under recbench/ that no fast test imports (0%) or only imports (no line inside any of its
functions runs). Exit 1 when such a module is not in JUSTIFIED below (each entry says why it may stay so).

    .venv/bin/python scripts/fast_coverage.py [pytest arguments]       # about 1.3x the fast tier's time
    .venv/bin/python scripts/fast_coverage.py --report-only            # read the last run's data again
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / ".coverage.fast"
FAST = ["--tier", "fast"]  # what scripts/test.sh --fast selects (tests/conftest.py)

#: modules the fast tier may leave at 0% or import-only, and why (relative to recbench/)
JUSTIFIED: dict[str, str] = {
    "backends/convert.py": "converts the real SmolLM2 GGUF to a Hugging Face folder (tens of seconds): slow tests",
    "testing/serve.py": "starts a real vLLM server: the vLLM tests in .venv-vllm (scripts/test_vllm.sh)",
    "tasks/recbench_plus/train/sft.py": "LoRA SFT with trl on the real model (minutes): slow tests",
    "tasks/recbench_plus/train/__main__.py": "the fine-tuning CLI (trl, the real model, minutes): slow tests",
}


def function_lines(path: Path) -> set[int]:
    """Line numbers inside the bodies of the module's functions and methods (what runs only when they are called)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in node.body:
                out.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return out


def report() -> int:
    """Print the modules at 0% and those only imported; 1 when one of them is not justified."""
    import coverage

    cov = coverage.Coverage(data_file=str(DATA))
    cov.load()
    data = cov.get_data()
    measured = {str(Path(f).resolve()) for f in data.measured_files()}
    zero, import_only, rows = [], [], []
    for path in sorted((REPO / "recbench").rglob("*.py")):
        rel = str(path.relative_to(REPO / "recbench"))
        if str(path.resolve()) not in measured:
            zero.append(rel)
            continue
        _, statements, _, missing, _ = cov.analysis2(str(path))
        run = set(statements) - set(missing)
        if statements and not run:  # --source lists a file no test imported with every line missing
            zero.append(rel)
            continue
        pct = 100.0 * len(run) / len(statements) if statements else 100.0
        rows.append((pct, rel))
        body = function_lines(path) & set(statements)
        if body and not (body & run):
            import_only.append(rel)
    print(f"recbench modules: {len(rows) + len(zero)}; measured by the fast tier: {len(rows)}")
    for pct, rel in sorted(rows)[:15]:
        print(f"  {pct:5.1f}%  {rel}")
    bad = 0
    for title, mods in (("0% (never imported by a fast test)", zero),
                        ("imported only (no line of any function runs)", import_only)):
        print(f"{title}: {len(mods)}")
        for rel in mods:
            why = JUSTIFIED.get(rel)
            bad += why is None
            print(f"  {rel}: {why or 'NOT JUSTIFIED: add a fast test that exercises it'}")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    """Run the fast tier under coverage (unless --report-only), then report."""
    if "--report-only" not in argv:
        DATA.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "coverage", "run", f"--data-file={DATA}", "--source=recbench", "-m", "pytest",
               "-q", "-p", "no:cacheprovider", *FAST, "--ignore=tests/fuzz", *argv]
        code = subprocess.call(cmd, cwd=REPO)
        if code not in (0, 1):  # 1: some test failed; the coverage data is still worth reading
            return code
    return report()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
