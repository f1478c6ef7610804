"""Doc rot: every `python -m recbench ...` command of README.md and docs/*.md (single runs and `-m` sweeps, in code
blocks and in inline code) still composes, checked the way the CLI checks it: `add_default_method`, `method_paths`
and `check_overrides` (recbench/cli/overrides.py), then each sweep combination composed and held to the checks that
need no data, server or GPU (`???` keys, interpolations, `validate`, the method belongs to the task; Hydra's own
launcher keys composed with the hydra node). A command that cannot be checked is skipped by a rule (a placeholder, a
subcommand) or by name in SKIP, each with its reason. Also the map of docs/architecture.md: every path it names
exists, and every core module is on it."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from recbench.api.errors import ConfigError

pytestmark = pytest.mark.full  # ~100 compositions: many seconds

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
ENTRY = re.compile(r"python -m recbench(?=\s|$)")  # the main entry point, not recbench.report / .compare / ...
#: where a command ends on its line: a comment, the next command, a pipe or a redirection
END = re.compile(r"\s#|&&|\|\||;|\s\||\s[12]?>")
#: a value the reader fills in: <run dir>, ..., $VAR (in Hydra's own keys it does not matter to composing)
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…|\$")
#: `python -m recbench <subcommand>` and flags: they take no overrides (tests/core/test_core_cli.py, test_doctor.py)
SUBCOMMANDS = ("list", "doctor", "--help", "-h", "--hydra-help")

#: commands that compose but cannot be checked here, each with why (a key of this table must still be in a page:
#: test_every_skip_still_names_a_command)
SKIP: dict[str, str] = {
    # the example model of docs/new_backend.md exists once a reader adds the page's three blocks;
    # tests/backends/test_backends_doc_example.py composes and runs it from the page
    "model=tiny": "the example model config of docs/new_backend.md",
}
# a server, a GPU or a data folder is never needed to compose: commands for vllm, llama405b or SLURM are checked

#: folders a page names as the reader's own, replaced by a folder the test builds from the page itself
OWN_FOLDERS = {"/home/me/my_conf": ("docs/new_benchmark.md", "# ~/my_conf/task/pref_yesno.yaml", "task/pref_yesno.yaml")}


@dataclass(frozen=True)
class Command:
    """One command line of a page: where it stands and its arguments after `python -m recbench`."""

    page: str
    line: int
    text: str
    #: the refusal a page shows under the command (`recbench: config error: ...` and its lines), () for none
    refusal: tuple[str, ...] = ()

    @property
    def rest(self) -> str:
        """What follows `python -m recbench`, up to a comment, `&&`, a pipe or a redirection."""
        rest = ENTRY.split(self.text, 1)[1]
        m = END.search(rest)
        return rest[: m.start()] if m else rest

    @property
    def args(self) -> list[str]:
        """The command's arguments, shell-split."""
        return shlex.split(self.rest)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: python -m recbench {' '.join(self.args)}"


def commands(path: Path) -> list[Command]:
    """Every `python -m recbench` command of a page of this repository (commands_of, named from the root)."""
    return commands_of(path, path.relative_to(REPO).as_posix())


def commands_of(path: Path, page: str = "") -> list[Command]:
    """Every `python -m recbench` command of a Markdown file: code lines (a fenced block, or a line holding no
    backtick), joined over trailing backslashes, and inline code spans, also those that wrap onto the next line of
    their paragraph."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Command] = []
    para: list[tuple[int, str]] = []  # (line number, text) of the paragraph read so far

    def flush() -> None:
        text = " ".join(t.strip() for _, t in para)
        for m in re.finditer(r"`([^`]+)`", text):
            if ENTRY.search(m.group(1)):
                out.append(Command(page or path.name, _line_of(para, m.start()), m.group(1)))
        para.clear()

    fenced, i = False, 0
    while i < len(lines):
        raw = lines[i]
        if raw.lstrip().startswith("```"):
            flush()
            fenced = not fenced
        elif fenced or ("`" not in raw and ENTRY.search(raw)):
            n, text = i + 1, raw
            while text.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text.rstrip()[:-1] + " " + lines[i].strip()
            shown = []  # the output a block shows under the command
            while fenced and i + 1 < len(lines) and lines[i + 1].strip() and not lines[i + 1].lstrip().startswith("```") \
                    and not ENTRY.search(lines[i + 1]):
                i += 1
                shown.append(lines[i].strip())
            if ENTRY.search(text):
                refused = bool(shown) and shown[0].startswith("recbench:") and "error" in shown[0]
                out.append(Command(page or path.name, n, text, tuple(shown) if refused else ()))
        elif raw.strip():
            para.append((i + 1, raw))
        else:
            flush()
        i += 1
    flush()
    return out


def _line_of(para: list[tuple[int, str]], offset: int) -> int:
    """The line on which character `offset` of a paragraph (its lines stripped, joined by one space) stands."""
    pos = 0
    for n, t in para:
        pos += len(t.strip()) + 1
        if offset < pos:
            return n
    return para[-1][0]


def why_skipped(cmd: Command) -> str:
    """'' for a command to check, else the rule or the SKIP entry that leaves it out."""
    for key, why in SKIP.items():
        if key in cmd.text:
            return why
    args = cmd.args
    if args and args[0] in SUBCOMMANDS:
        return "a subcommand: takes no overrides"
    if PLACEHOLDER.search(" ".join(a for a in args if not _is_hydra(a))):  # hydra.sweep.dir=$SWEEP composes as it is
        return "a placeholder for the reader to fill in"
    return ""


def own_folder(tmp: Path) -> dict[str, str]:
    """{a page's example folder: a folder holding the config the page writes there}, built from the page's YAML."""
    out = {}
    for folder, (page, first_line, rel) in OWN_FOLDERS.items():
        text = (REPO / page).read_text(encoding="utf-8")
        block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL) if b.startswith(first_line))
        target = tmp / folder.strip("/").replace("/", "_") / rel
        target.parent.mkdir(parents=True)
        target.write_text(block, encoding="utf-8")
        out[folder] = str(tmp / folder.strip("/").replace("/", "_"))
    return out


def check(args: list[str]) -> None:
    """Raise ConfigError unless the overrides pass the CLI's own checks and every sweep combination composes and
    passes the checks that need no data, server or GPU."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from recbench.api.config import validate
    from recbench.cli.overrides import add_default_method, check_overrides, method_paths
    from recbench.cli.sweep import (  # the sweep's own method-for-task check
        _method_problem,
        combinations,
    )
    from recbench.run.construct import CONFIG_MODULE, register_resolvers

    register_resolvers()
    argv = method_paths(add_default_method(args))  # what recbench.cli.app does before Hydra sees the arguments
    check_overrides(argv)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            for combo in combinations([a for a in argv if "=" in a and not a.startswith("-")]):
                own = [a for a in combo if not _is_hydra(a)]
                try:
                    if len(own) < len(combo):  # hydra/launcher=..., hydra.launcher.*: the launcher's keys exist
                        compose(config_name="config", overrides=combo, return_hydra_config=True)
                    cfg = compose(config_name="config", overrides=own)
                    missing = [k for k in OmegaConf.missing_keys(cfg) if not k.startswith("hydra")]
                    if missing:
                        raise ConfigError(f"required key(s) not set: {', '.join(missing)}")
                    OmegaConf.to_container(cfg, resolve=True)
                    validate(cfg)
                    why, _ = _method_problem(cfg)
                    if why:
                        raise ConfigError(why)
                except Exception as e:  # noqa: BLE001 - a composition error: one line naming the combination
                    cause = e if isinstance(e, ConfigError) else (e.__cause__ or e)
                    raise ConfigError(f"{' '.join(combo)}: {str(cause).strip().splitlines()[0]}") from None
    finally:
        GlobalHydra.instance().clear()


def _is_hydra(override: str) -> bool:
    """An override of Hydra's own node (hydra/launcher=..., hydra.sweep.dir=...) other than hydra.searchpath."""
    key = override.lstrip("+~").split("=", 1)[0]
    return key.startswith("hydra") and key != "hydra.searchpath"


ALL = [c for p in PAGES for c in commands(p)]


def test_the_pages_hold_the_commands_they_show():
    found = {(c.page, tuple(c.args)) for c in ALL}
    assert len(ALL) >= 60, len(ALL)
    assert ("README.md", ("task=perrec", "model=smollm2", "method=listwise")) in found  # the mission's command
    assert ("README.md", ("-m", "method=random,bm25_history,listwise", "limit=12")) in found  # a sweep
    # a code line continued with a backslash, and an inline command wrapped onto the next line of its paragraph
    assert any(c.page == "docs/backends.md" and "model.backend.tensor_parallel_size=8 model.gpus=8" in c.text for c in ALL)
    assert any(c.page == "docs/recbench_plus_training.md" and c.args[-1] == "+model.backend.adapter=<out>" for c in ALL)
    refusals = [c for c in ALL if c.refusal]  # a block showing the refusal under its command
    assert [c.args for c in refusals if c.page == "docs/reports.md"] == [
        ["-m", "task=llmrec_rating", "method=user_mean,item_mean,global_mean,mf"]]
    checked = [c for c in ALL if not why_skipped(c)]
    assert len(checked) >= 0.6 * len(ALL), [str(c) for c in ALL if why_skipped(c)]


@pytest.mark.parametrize("cmd", [c for c in ALL if not why_skipped(c)], ids=str)
def test_doc_command_composes(cmd, tmp_path):
    args = cmd.args
    for folder, built in own_folder(tmp_path).items():  # the reader's own config folder, as the page writes it
        args = [a.replace(f"file://{folder}", f"file://{built}") for a in args]
    if not cmd.refusal:
        check(args)
        return
    with pytest.raises(ConfigError) as refused:  # a page that shows a refusal: it is still refused, for its reason
        check(args)
    assert any(line.split(": ", 1)[-1] in str(refused.value) for line in cmd.refusal), (str(refused.value), cmd.refusal)


def test_every_skip_still_names_a_command():
    assert [k for k in SKIP if not any(k in c.text for c in ALL)] == []


@pytest.mark.parametrize("args, error", [
    # the line docs/perrec.md showed until the adapter key moved off the hf model configs
    (["task=perrec_built", "task.data_dir=built/ml", "method=listwise", "model.backend.adapter=adapters/merged"],
     "Unknown config key 'model.backend.adapter'"),
    (["-m", "task=perrec", "method=listwise,popular_match"],  # a sweep value only another benchmark has
     "method 'popular_match' is not a method of task perrec"),
    (["task=perrec", "method=listwise", "limit=0"], "limit=0: must be >= 1"),  # validate()
    (["-m", "hydra/launcher=slurm", "hydra.launcher.partitions=gpu", "method=random"], "partitions"),  # the launcher
])
def test_the_check_refuses_a_command_that_no_longer_composes(args, error):
    with pytest.raises(ConfigError, match=re.escape(error)):
        check(args)


def test_the_reader_finds_commands_in_each_form(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Run `python -m recbench task=perrec\nmethod=listwise` now.\n\n"
                    "    python -m recbench -m method=a,b \\\n        limit=3   # a sweep\n\n"
                    "```bash\nRECBENCH_RUNS_DIR=/x nice python -m recbench seed=1 && python -m recbench.report runs\n```\n"
                    "```text\n$ python -m recbench limit=0\nrecbench: config error: limit=0: must be >= 1\n```\n"
                    "Not this: `python -m recbench.compare a b`.\n", encoding="utf-8")
    got = [(c.line, c.args) for c in commands_of(page)]
    assert got == [(1, ["task=perrec", "method=listwise"]), (4, ["-m", "method=a,b", "limit=3"]), (8, ["seed=1"]),
                   (11, ["limit=0"])]
    assert [c.refusal for c in commands_of(page)][-1] == ("recbench: config error: limit=0: must be >= 1",)


# ---- docs/architecture.md: the map names only files that exist, and every core module is on it ---------------------
ARCH = REPO / "docs" / "architecture.md"
PKG = REPO / "recbench"
#: where a path on the map starts: the repository's folders, or a folder of the package (`run/loop.py`)
ROOTS = ("recbench/", "tasks/", "kg/", "conf/", "data/", "tests/", "docs/", "scripts/", "benchmarks/",
         *(f"{p.name}/" for p in PKG.iterdir() if p.is_dir() and not p.name.startswith("_")))


def map_paths(text: str) -> list[str]:
    """The file and folder paths in a page's code spans (`recbench/run/loop.py`, `store/schema.py`, `conf/task/`),
    leaving out patterns with a placeholder (`<name>`, `*`)."""
    spans = re.findall(r"`([^`\n]+)`", text)
    return sorted({s for s in spans if s.startswith(ROOTS) and " " not in s and not re.search(r"[<*{]", s)})


def exists(path: str) -> bool:
    """A path of the map is a file or folder of the repository, or of the package (relative to recbench/)."""
    return (REPO / path).exists() or (PKG / path).exists()


def test_the_architecture_page_names_only_paths_that_exist():
    paths = map_paths(ARCH.read_text(encoding="utf-8"))
    assert {"run/loop.py", "store/schema.py", "conf/config.yaml", "recbench/api/"} <= set(paths)
    assert [p for p in paths if not exists(p)] == []


def test_every_core_module_is_on_the_architecture_page():
    """A newcomer finds any module of the core from the page: each one (package faces aside) is named there, by its
    path under recbench/ (`run/loop.py`), or by its file name among the entry points."""
    text = ARCH.read_text(encoding="utf-8")
    core = [p for p in PKG.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts]
    missing = [p.relative_to(PKG).as_posix() for p in core
               if not re.search(rf"(?<![\w/.]){re.escape(p.relative_to(PKG).as_posix())}`", text)]
    assert missing == [], f"core modules not on docs/architecture.md's module map: {missing}"


def test_the_map_checks_see_a_missing_file_and_a_missing_module():
    assert not exists("run/no_such_module.py") and exists("run/loop.py") and exists("recbench/run/loop.py")
    assert map_paths("a `run/gone.py` and `conf/method/<benchmark>/` and `samples.jsonl`") == ["run/gone.py"]
    assert not re.search(r"(?<![\w/.])compare\.py`", "`cli/compare.py`")  # a module is not found inside another's path
