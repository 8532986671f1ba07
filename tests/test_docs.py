"""Every name README.md, docs/*.md and bench/README.md give exists in this checkout, every link resolves from its file,
and each ```bash block of the guides runs as written in a fresh clone's shell; every file and package name the
package's docstrings and comments give exists. Names are `ticked` (commands also in fenced blocks): repository paths,
dotted names (`rescoring.redecided`: first part a module or a name one defines), make targets, `python -m` modules,
and anywhere ACEMAD_ variables (data/settings.py ENV_VARS). outputs/, placeholders (<profile>, *, ...) and a user's
own files (my.jsonl) are not checked."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import io
import os
import pkgutil
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from acemad_utils.data.settings import ENV_VARS

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "acemad_utils"
GUIDES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]  # their commands run in test_each_docs_command
DOCS = [*GUIDES, REPO / "bench" / "README.md"]

FENCE = re.compile(r"```.*?```", re.S)
TICKED = re.compile(r"`([^`]+)`")  # may wrap to the next line
LINK = re.compile(r"\]\(([^)\s]+)\)")
MAKE = re.compile(r"\bmake\s+([a-z][a-z0-9-]*)")
PYTHON_M = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
PATH_LIKE = re.compile(r"[\w.-]+(/[\w.-]*)+|[\w-]+\.(py|md|ipynb|yaml|toml|cfg|sh)")
FILE_NAME = re.compile(r"(?<![\w./$<{-])((?:[\w.-]+/)*[\w-]+\.(?:py|ipynb|md|yaml))\b(?!\()")  # in prose
REPO_DIRS = {"acemad_utils", "notebooks", "profiles", "tests", "bench", "docs", "data", ".ci"}  # else not checked
SUBPACKAGES = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
EXAMPLE_NAMES = {"results", "final", "r", "my_task", "mine"}  # what the docs' examples define (`results.table`)
THEIRS = {"usage.prompt_tokens_details.cached_tokens"}  # another library's dotted name (an OpenAI reply's field)
FILE_SUFFIXES = {"md", "tex", "json", "jsonl", "toml", "py", "gz", "html", "sqlite", "csv", "yaml", "ipynb", "parquet"}
NOT_OURS = re.compile(r"^(outputs|acemad_runs|\.venv)(/|$)|[<>*{}]|\.\.\.")


#: Every subpackage's and module's short name -> its dotted name (the first in path order where two share one).
MODULES = {"acemad_utils": "acemad_utils"} | {
    p.parent.name if p.stem == "__init__" else p.stem: ".".join(p.relative_to(REPO).with_suffix("").parts[:-1])
    + ("" if p.stem == "__init__" else f".{p.stem}")
    for p in sorted(PACKAGE.rglob("*.py"), reverse=True)
    if p.stem != "__main__"  # a command: importing it would run it
}


@functools.cache  # imports every module of the package once
def defining_module(name: str) -> str | None:
    """The first module of the package that has `name` at top level (`DebateConfig` -> protocol.config)."""
    for dotted in sorted(MODULES.values()):
        try:
            if hasattr(importlib.import_module(dotted), name):
                return dotted
        except Exception:  # an optional extra's adapter (inspect_ai) that is not installed
            continue
    return None


def resolves(dotted: str) -> bool:
    """`dotted` names a module, or an attribute reachable from one (a function, class, constant, method)."""
    head, _, rest = dotted.partition(".")
    where = MODULES.get(head) or (defining_module(head) and f"{defining_module(head)}.{head}")
    try:  # where None: no module "None"
        pkgutil.resolve_name(f"{where}.{rest}".rstrip("."))
        return True
    except (ImportError, AttributeError, ValueError):
        return False


def path_exists(text: str, doc: Path) -> bool:
    text = text.split("#")[0].split(":")[0].rstrip("/")
    bases = [REPO, doc.parent, PACKAGE]
    candidates = [base / (text + s) for base in bases for s in ("", ".py", ".ipynb", ".md")]
    if "/" not in text:  # a bare file name (`debate.py`): somewhere in the package, tests or bench
        candidates += [*PACKAGE.rglob(text), *(REPO / "tests").glob(text), *(REPO / "bench").glob(text)]
    return any(c.exists() for c in candidates)


def missing(text: str, doc: Path) -> list[str]:
    """Every name the Markdown `text` of `doc` gives that this checkout lacks, one line each."""
    prose = FENCE.sub("", text)
    code = "\0".join(FENCE.findall(text) + TICKED.findall(prose))  # commands only in code, not "make sure"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = {t for line in re.findall(r"^([\w .-]+):(?!=)", makefile, flags=re.M) for t in line.split()}
    out = [f"`make {t}`" for t in sorted(set(MAKE.findall(code)) - targets)]
    modules = sorted(m for m in set(PYTHON_M.findall(code)) if m.split(".")[0] in {*MODULES, *REPO_DIRS})  # not vllm
    out += [f"`python -m {m}`" for m in modules if importlib.util.find_spec(m) is None]
    out += [
        f"{v} (not in ENV_VARS)" for v in sorted(set(re.findall(r"\bACEMAD_[A-Z0-9_]*[A-Z0-9]", text)) - set(ENV_VARS))
    ]
    for tick in sorted(t.strip().removesuffix("()") for t in TICKED.findall(prose)):
        head, last = tick.split("/")[0].split(".")[0], tick.rsplit(".", 1)[-1]
        if re.search(r"\s", tick) or NOT_OURS.search(tick) or head in EXAMPLE_NAMES:
            continue
        if PATH_LIKE.fullmatch(tick) and (head in REPO_DIRS | SUBPACKAGES or "/" not in tick):
            if ("/" in tick or tick.endswith((".py", ".ipynb"))) and not path_exists(tick, doc):
                out.append(f"path {tick!r}")
        elif DOTTED.fullmatch(tick) and last not in FILE_SUFFIXES and not resolves(tick):
            out.append(f"name {tick!r}")
    return out


def anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to '-'."""
    heads = re.findall(r"^#+\s+(.*)$", FENCE.sub("", doc.read_text(encoding="utf-8")), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def broken_links(text: str, doc: Path) -> list[str]:
    """The [text](target) links that do not resolve from `doc`'s folder as a reader's click does: the file, then the
    #anchor among its headings (links out of the repository are not checked)."""
    out = []
    for link in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", link) or NOT_OURS.search(link):
            continue
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        if not target.exists() or (anchor and target.suffix == ".md" and anchor not in anchors(target)):
            out.append(f"link {link!r}")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_and_link_a_doc_gives_exists(doc):
    text = doc.read_text(encoding="utf-8")
    gone = missing(text, doc) + broken_links(text, doc)
    assert not gone, f"{doc.relative_to(REPO)} names what this checkout lacks (fix the doc):\n" + "\n".join(gone)


def missing_in_code(path: Path, text: str | None = None) -> list[str]:
    """What the docstrings and comments of `path` (or `text`) name that this checkout does not have, one line each."""
    source = path.read_text(encoding="utf-8") if text is None else text
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    prose = [t.string for t in tokens if t.type == tokenize.COMMENT] + [
        ast.get_docstring(n, clean=False) or ""
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    text = "\n".join(prose)
    files = {f for f in FILE_NAME.findall(text) if not NOT_OURS.search(f) and f.split(".")[0] not in EXAMPLE_NAMES}
    files = {f for f in files if "/" not in f or f.split("/")[0] in REPO_DIRS}  # not another package's file
    dotted = {d for tick in TICKED.findall(text) if DOTTED.fullmatch(d := tick.strip().removesuffix("()"))}
    dotted = {d for d in dotted | set(re.findall(r"\bacemad_utils(?:\.\w+)+", text)) if d.split(".")[0] in MODULES}
    out = [f"file {f!r}" for f in sorted(files) if not path_exists(f, path)]
    return out + [
        f"name {d!r}" for d in sorted(dotted - THEIRS) if d.rsplit(".", 1)[-1] not in FILE_SUFFIXES and not resolves(d)
    ]


def test_every_name_a_docstring_or_comment_gives_exists():
    gone = [f"{p.relative_to(REPO)}: {m}" for p in sorted(PACKAGE.rglob("*.py")) for m in missing_in_code(p)]
    assert not gone, "docstrings and comments name what this checkout does not have:\n" + "\n".join(gone)


def test_the_checks_find_a_name_of_every_kind_that_does_not_exist():
    readme = REPO / "README.md"
    made_up = ["`acemad_utils/agents/llm_request.py`", "[x](docs/no-such-page.md)", "[x](docs/running.md#no-such)",
               "`analysis.redecided`", "`acemad_utils.report.rescoring.no_such_function`", "`make no-such-target`",
               "`experiments.setup.NO_SUCH_CONSTANT`", "```bash\npython -m acemad_utils.no_such_module\n```",
               "ACEMAD_NO_SUCH_VARIABLE=1"]  # fmt: skip
    assert [x for x in made_up if not missing(x, readme) + broken_links(x, readme)] == []
    real = "`acemad_utils/agents/sim.py`, `debate.py`, `rescoring.redecided`, `experiments.setup.SIM_STANDINS`, "
    real += "`acemad_utils.run`, [docs](docs/running.md), `make test-fast`, `python -m acemad_utils.reproduce`"
    assert missing(real, readme) + broken_links(real, readme) == []
    code = '"""`debate.py`, transcripts.py, `rescoring.redecided`, N.md(x)"""\n'
    code += "# see llm_usage.py and `rescoring.no_such_function`, also acemad_utils.report.gone\n"
    gone = ["file 'llm_usage.py'", "name 'acemad_utils.report.gone'", "name 'rescoring.no_such_function'"]
    assert missing_in_code(PACKAGE / "x.py", code) == gone


def test_the_readme_example_is_the_one_the_own_questions_test_runs():
    """README's Python block is docs/own-questions.md's API example verbatim (tests/test_own_questions.py runs it)."""
    readme = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.S)
    guide = (REPO / "docs" / "own-questions.md").read_text(encoding="utf-8")
    example = re.findall(r"```python\n(.*?)```", guide.split("\n## 1. Python API\n", 1)[1], flags=re.S)[0]
    assert example in readme, "copy docs/own-questions.md's '1. Python API' example into README.md verbatim"


# ----------------------------------------------------------------------------- commands, run as written
#: Why a command line of the docs is not run here (each skipped line is matched by one of these, named).
SKIP = {
    "needs a key": r"\b[A-Z_]*API_KEY=|export OPENAI_",
    "needs a paid endpoint (--model without --base-url on 127.0.0.1)": r"--model\b(?!.*--base-url http://127)",
    "needs the network (an install)": r"^(pip|\S*/pip)\s+install\b",
    "runs make (installs .venv, minutes to hours; the targets are checked above)": r"^make\b",
    "another tool's server or its output (vLLM, inspect)": r"^(inspect\b|python3? -m vllm\b)|output\.jsonl",
}
OUR_PYTHON = re.compile(r"(?<![\w/.])python3?\s+-m\s+acemad_utils\b")  # needs the activated venv


def runnable(block: str) -> tuple[str, list[str]]:
    """(the block with every skipped command line removed, why each was); heredoc bodies stay with their command."""
    keep, skipped, heredoc = [], [], None
    for line in block.splitlines():
        why = None if heredoc else next((k for k, rx in SKIP.items() if re.search(rx, line.strip())), None)
        if why:
            skipped.append(why)
            continue
        keep.append(line)
        if heredoc:
            heredoc = None if line.strip() == heredoc else heredoc
        elif m := re.search(r"<<'?(\w+)'?", line):
            heredoc = m.group(1)
    return "\n".join(keep) + "\n", skipped


def run_block(block: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a docs block verbatim with bash in `cwd`, where `.venv` is this interpreter's environment (a fresh clone
    after `make venv`) importing this checkout, and no venv is on PATH; stops at the first failing command."""
    venv = Path(sys.executable).parents[1]
    (cwd / ".venv").symlink_to(venv, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "ACEMAD_PROGRESS": "0"}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(venv)))
    return subprocess.run(["bash", "-e", "-c", block], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_no_doc_command_needs_an_activated_venv(tmp_path):
    """`python -m acemad_utils ...` fails in a fresh clone (the system Python has no pandas): every command the docs
    show uses `.venv/bin/python` or `make`; and the shell the blocks run in has only .venv/bin/python."""
    texts = [doc.read_text(encoding="utf-8") for doc in GUIDES]
    code = [c for t in texts for c in FENCE.findall(t) + TICKED.findall(FENCE.sub("", t))]
    assert [m for c in code for m in OUR_PYTHON.findall(c)] == [], "say .venv/bin/python -m (or make run)"
    assert OUR_PYTHON.search("`python -m acemad_utils run x`")
    assert not OUR_PYTHON.search(".venv/bin/python -m acemad_utils")
    done = run_block('echo "$(command -v python3)"\n.venv/bin/python -c "import sys; print(sys.prefix)"\n', tmp_path)
    found, prefix = done.stdout.splitlines()
    assert not found.startswith(str(Path(sys.executable).parent))
    assert Path(prefix).resolve() == Path(sys.prefix).resolve()


@pytest.mark.slow  # every docs block that runs (a few synthetic runs, ~10 s each on 2 loaded cores)
@pytest.mark.parametrize(
    "doc,i",
    [(d, i) for d in GUIDES for i, _ in enumerate(re.findall(r"```bash\n", d.read_text(encoding="utf-8")))],
    ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else f"block{v}",
)
def test_each_docs_command_runs_as_written(doc, i, tmp_path):
    block, skipped = runnable(re.findall(r"```bash\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)[i])
    if not [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]:
        pytest.skip("; ".join(sorted(set(skipped))))
    done = run_block(block, tmp_path)
    assert done.returncode == 0, f"{doc.relative_to(REPO)} block {i} failed:\n{block}\n{done.stdout}\n{done.stderr}"


def test_every_set_up_step_of_the_makefile_says_what_it_does_first():
    """A first `make reproduce` installs for minutes: each pip or venv step is announced by the line before it."""
    recipe = (REPO / "Makefile").read_text(encoding="utf-8").split("\n$(VENV)/.base:")[1].split("\nvenv:")[0]
    lines = [x.strip() for x in recipe.splitlines() if x.startswith("\t")]
    steps = [i for i, x in enumerate(lines) if "$(PIP)" in x or "-m venv" in x]
    assert len(steps) >= 4
    assert all("echo" in lines[i] if "-m venv" in lines[i] else lines[i - 1].startswith("@echo") for i in steps)


@pytest.mark.parametrize("module", ["cost", "agents.batch", "reproduce", "reproduce.nbtools"])
def test_a_modules_help_shows_its_description_in_whole_sentences(module):
    """`--help` shows the module docstring's first paragraph whole, not cut at the end of its first line."""
    cmd = [sys.executable, "-m", f"acemad_utils.{module}", "--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    description = out.split("\n\n")[1]  # after the usage block
    assert description.rstrip().endswith("."), description


def test_the_run_commands_challenging_option_says_what_it_does():
    """--challenging's help states the selection rule itself instead of pointing to a --help that has no more."""
    out = subprocess.run([sys.executable, "-m", "acemad_utils", "run", "--help"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert "(see --help)" not in out
    assert "fewer than 40% of its runs are kept" in " ".join(out.split())
