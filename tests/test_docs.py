"""Every module, function, file and command that README.md, docs/*.md, bench/README.md and the package's docstrings
and comments name exists in this checkout.

What counts as a name (in `backticks` or a [link](target); commands also inside fenced blocks):
    a repository path        `acemad_utils/agents/sim.py`, `notebooks/09_assumption_map.ipynb`, [x](docs/y.md)
    a dotted package name    `acemad_utils.report.rescoring.redecided`, or short: `rescoring.redecided`,
                             `experiments.setup.SIM_STANDINS` (first part: a subpackage or module of acemad_utils)
    a make target            `make test-fast`
    a module run with -m     `python -m acemad_utils.reproduce`
    an environment variable  ACEMAD_MAX_USD (anywhere): listed in data/settings.py's ENV_VARS, read there
Paths under outputs/ (regenerated, git-ignored), placeholders (<profile>, *, ...) and a user's own files
(my.jsonl) are not checked: they are not the repository's. In docstrings and comments (acemad_utils/**) the names
checked are file names (`debate.py`, ticked or not), `acemad_utils.x.y` and ticked dotted names.

And every command the docs show runs as written in a fresh clone: no bare `python -m acemad_utils` (it needs the
activated venv), and each ```bash block is run verbatim in a shell without it, skipping (named) the lines that need a
key, the network, make or another tool's server.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import tokenize
from functools import cache
from pathlib import Path

import pytest

from acemad_utils.data.settings import ENV_VARS

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "acemad_utils"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"```.*?```", re.S)
TICKED = re.compile(r"`([^`]+)`")  # may wrap to the next line
LINK = re.compile(r"\]\(([^)\s]+)\)")
MAKE = re.compile(r"\bmake\s+([a-z][a-z0-9-]*)")
PYTHON_M = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
PATH_LIKE = re.compile(r"[\w.-]+(/[\w.-]*)+|[\w-]+\.(py|md|ipynb|yaml|toml|cfg|sh)")
#: Top-level directories of the repository; a path starting elsewhere (`tables/...` under outputs/) is not checked.
REPO_DIRS = {"acemad_utils", "notebooks", "profiles", "tests", "bench", "docs", "data", ".ci"}
SUBPACKAGES = {p.parent.name for p in (Path(__file__).resolve().parents[1] / "acemad_utils").glob("*/__init__.py")}
#: Names the docs' own examples define (`results.table`), and a user's own files (`my_task.py`).
EXAMPLE_NAMES = {"results", "final", "r", "my_task", "mine"}
#: Dotted names in docstrings that are another library's (an OpenAI reply's field), not this package's.
THEIRS = {"usage.prompt_tokens_details.cached_tokens"}
FILE_SUFFIXES = {"md", "tex", "json", "jsonl", "toml", "py", "gz", "html", "sqlite", "csv", "yaml", "ipynb", "parquet"}
#: Not the repository's: regenerated outputs, a user's run folder, placeholders.
NOT_OURS = re.compile(r"^(outputs|acemad_runs|\.venv)(/|$)|[<>*{}]|\.\.\.")
SUFFIXES = (".py", ".ipynb", ".md")


def module_names() -> dict[str, str]:
    """Every subpackage's and module's short name -> its dotted name (short names are unique in the package)."""
    names = {"acemad_utils": "acemad_utils"}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__main__":  # a command: importing it would run it
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.setdefault(parts[-1], ".".join(parts))
    return names


MODULES = module_names()


@cache  # imports every module of the package once
def defining_module(name: str) -> str | None:
    """The first module of the package that has `name` at top level (`DebateConfig` -> protocol.config)."""
    for dotted in sorted(MODULES.values()):
        try:
            module = importlib.import_module(dotted)
        except Exception:  # an optional extra's adapter (inspect_ai) that is not installed
            continue
        if hasattr(module, name):
            return dotted
    return None


def resolves(dotted: str) -> bool:
    """`dotted` names a module, or an attribute reachable from one (a function, class, constant, method)."""
    head, *rest = dotted.split(".")
    home = None if head in MODULES else defining_module(head)
    where = MODULES.get(head) or (home and f"{home}.{head}")
    if not where:
        return False
    parts = [*where.split("."), *rest]
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(name)
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def path_exists(text: str, doc: Path) -> bool:
    text = text.split("#")[0].split(":")[0].rstrip("/")
    bases = [REPO, doc.parent, PACKAGE]
    candidates = [base / text for base in bases] + [base / (text + s) for base in bases for s in SUFFIXES]
    if "/" not in text:  # a bare file name (`debate.py`): somewhere in the package, tests or bench
        candidates += [*PACKAGE.rglob(text), *(REPO / "tests").glob(text), *(REPO / "bench").glob(text)]
    return any(c.exists() for c in candidates)


def names(text: str) -> dict[str, set[str]]:
    """What one Markdown text names, by kind."""
    found: dict[str, set[str]] = {"path": set(), "dotted": set(), "make": set(), "module": set()}
    found["env"] = set(re.findall(r"\bACEMAD_[A-Z0-9_]*[A-Z0-9]", text))
    prose = FENCE.sub("", text)
    code = "\0".join(FENCE.findall(text) + TICKED.findall(prose))  # commands only in code, not "make sure"
    found["make"] = set(MAKE.findall(code))
    found["module"] = set(PYTHON_M.findall(code))
    for link in LINK.findall(prose):
        if not re.match(r"[a-z]+:|#", link) and not NOT_OURS.search(link):
            found["path"].add(link)
    for tick in TICKED.findall(prose):
        tick = tick.strip().removesuffix("()")
        if re.search(r"\s", tick) or NOT_OURS.search(tick):
            continue
        head, last = tick.split("/")[0].split(".")[0], tick.rsplit(".", 1)[-1]
        if head in EXAMPLE_NAMES:
            continue
        if PATH_LIKE.fullmatch(tick) and (head in REPO_DIRS | SUBPACKAGES or "/" not in tick):
            if "/" in tick or tick.endswith((".py", ".ipynb")):
                found["path"].add(tick)
        elif DOTTED.fullmatch(tick) and last not in FILE_SUFFIXES:
            found["dotted"].add(tick)
    return found


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {t for line in re.findall(r"^([\w .-]+):(?!=)", text, flags=re.M) for t in line.split()}


def missing(text: str, doc: Path) -> list[str]:
    """Every name `text` (the Markdown of `doc`) gives that this checkout does not have, one line each."""
    found, targets = names(text), make_targets()
    out = [f"path {p!r}" for p in sorted(found["path"]) if not path_exists(p, doc)]
    out += [f"name {d!r}" for d in sorted(found["dotted"]) if not resolves(d)]
    out += [f"`make {t}` (no such Makefile target)" for t in sorted(found["make"]) if t not in targets]
    ours = sorted(m for m in found["module"] if m.split(".")[0] in {*MODULES, *REPO_DIRS})  # not vllm's
    out += [f"`python -m {m}`" for m in ours if importlib.util.find_spec(m) is None]
    out += [f"{v} (not in data/settings.py's ENV_VARS)" for v in sorted(found["env"]) if v not in ENV_VARS]
    return out


@pytest.mark.parametrize("doc", [*DOCS, REPO / "bench" / "README.md"], ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_a_doc_gives_exists(doc):
    gone = missing(doc.read_text(encoding="utf-8"), doc)
    assert not gone, f"{doc.relative_to(REPO)} names what this checkout lacks (fix the doc):\n" + "\n".join(gone)


def prose(path: Path) -> str:
    """The docstrings and comments of a Python file."""
    text = path.read_text(encoding="utf-8")
    out = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(ast.get_docstring(node, clean=False) or "")
    return "\n".join(out)


FILE_NAME = re.compile(r"(?<![\w./$<{-])((?:[\w.-]+/)*[\w-]+\.(?:py|ipynb|md|yaml))\b(?!\()")


def missing_in_code(text: str, path: Path) -> list[str]:
    """What the docstrings and comments `text` of `path` name that this checkout does not have, one line each."""
    files = {f for f in FILE_NAME.findall(text) if not NOT_OURS.search(f) and f.split(".")[0] not in EXAMPLE_NAMES}
    files = {f for f in files if "/" not in f or f.split("/")[0] in REPO_DIRS}  # not another package's file
    dotted = {d for tick in TICKED.findall(text) if DOTTED.fullmatch(d := tick.strip().removesuffix("()"))}
    dotted = {d for d in dotted | set(re.findall(r"\bacemad_utils(?:\.\w+)+", text)) if d.split(".")[0] in MODULES}
    out = [f"file {f!r}" for f in sorted(files) if not path_exists(f, path)]
    return out + [
        f"name {d!r}" for d in sorted(dotted - THEIRS) if d.rsplit(".", 1)[-1] not in FILE_SUFFIXES and not resolves(d)
    ]


def test_every_name_a_docstring_or_comment_gives_exists():
    gone = [f"{p.relative_to(REPO)}: {m}" for p in sorted(PACKAGE.rglob("*.py")) for m in missing_in_code(prose(p), p)]
    assert not gone, "docstrings and comments name what this checkout does not have:\n" + "\n".join(gone)


DROPPED = [
    "`acemad_utils/agents/llm_request.py`",
    "[the faults](docs/no-such-page.md)",
    "`analysis.redecided`",
    "`acemad_utils.report.rescoring.no_such_function`",
    "`experiments.setup.NO_SUCH_CONSTANT`",
    "`make no-such-target`",
    "```bash\npython -m acemad_utils.no_such_module\n```",
    "ACEMAD_NO_SUCH_VARIABLE=1",
]
REAL = (
    "`acemad_utils/agents/sim.py`, `debate.py`, `rescoring.redecided`, `experiments.setup.SIM_STANDINS`, "
    "`acemad_utils.run`, [docs](docs/running.md), `make test-fast`, `python -m acemad_utils.reproduce`"
)


def test_the_checks_see_every_kind_of_name_and_a_dropped_one():
    """The docs name things of every kind (else the tests above would pass on nothing); each made-up name fails."""
    found = names("\n".join(doc.read_text(encoding="utf-8") for doc in DOCS))
    assert {k for k, v in found.items() if v} == {"path", "dotted", "make", "module", "env"}, found
    assert "acemad_utils/agents/sim.py" in found["path"] and "test-fast" in found["make"]
    assert [made_up for made_up in DROPPED if not missing(f"Some prose naming {made_up}.", REPO / "README.md")] == []
    assert missing(REAL, REPO / "README.md") == []
    text = "# see llm_usage.py and `rescoring.no_such_function`, also acemad_utils.report.gone\n"
    gone = ["file 'llm_usage.py'", "name 'acemad_utils.report.gone'", "name 'rescoring.no_such_function'"]
    assert missing_in_code(text, PACKAGE / "x.py") == gone
    assert missing_in_code("`debate.py`, transcripts.py, `rescoring.redecided`, N.md(x)", PACKAGE / "x.py") == []


def test_the_readme_example_is_the_one_the_own_questions_test_runs():
    """README's Python block is docs/own-questions.md's API example verbatim (tests/test_own_questions.py runs it)."""
    readme = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.S)
    guide = (REPO / "docs" / "own-questions.md").read_text(encoding="utf-8")
    example = re.findall(r"```python\n(.*?)```", guide.split("\n## 1. Python API\n", 1)[1], flags=re.S)[0]
    assert example in readme, "copy docs/own-questions.md's '1. Python API' example into README.md verbatim"
    assert len(example.strip().splitlines()) <= 10


# ----------------------------------------------------------------------------- commands, run as written
#: Why a command line of the docs is not run here (each skipped line is matched by one of these, named).
SKIP = {
    "needs a key": re.compile(r"\b[A-Z_]*API_KEY=|export OPENAI_"),
    "needs a paid endpoint (--model without --base-url on 127.0.0.1)": re.compile(
        r"--model\b(?!.*--base-url http://127)"
    ),
    "needs the network (an install)": re.compile(r"^(pip|\S*/pip)\s+install\b"),
    "runs make (installs .venv, minutes to hours; the targets exist: test_every_name_a_doc_gives_exists)": re.compile(
        r"^make\b"
    ),
    "another tool's server or its output (vLLM, inspect)": re.compile(r"^(inspect\b|python3? -m vllm\b)|output\.jsonl"),
}
OUR_PYTHON = re.compile(r"(?<![\w/.])python3?\s+-m\s+acemad_utils\b")


def shell_blocks(text: str) -> list[str]:
    """The ```bash blocks of a Markdown text."""
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def runnable(block: str) -> tuple[str, list[tuple[str, str]]]:
    """(the block with every skipped command line removed, [(line, why)]); heredoc bodies stay with their command."""
    keep, skipped, heredoc = [], [], None
    for line in block.splitlines():
        if heredoc is not None:
            keep.append(line)
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        why = next((k for k, rx in SKIP.items() if rx.search(line.strip())), None)
        if why:
            skipped.append((line, why))
            continue
        keep.append(line)
        m = re.search(r"<<'?(\w+)'?", line)
        heredoc = m.group(1) if m else None
    return "\n".join(keep) + "\n", skipped


def run_block(block: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a docs block verbatim with bash in `cwd`, where `.venv` is this interpreter's environment (a fresh clone
    after `make venv`) importing this checkout; stops at the first failing command."""
    venv = Path(sys.executable).parents[1]
    (cwd / ".venv").symlink_to(venv, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "ACEMAD_PROGRESS": "0"}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(venv)))
    return subprocess.run(["bash", "-e", "-c", block], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_no_doc_command_needs_an_activated_venv():
    """`python -m acemad_utils ...` fails in a fresh clone (the system Python has no pandas): every command the docs
    show uses `.venv/bin/python` or `make`."""
    bare = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for code in FENCE.findall(text) + TICKED.findall(FENCE.sub("", text)):
            bare += [f"{doc.relative_to(REPO)}: {m}" for m in OUR_PYTHON.findall(code)]
    assert not bare, "say .venv/bin/python -m (or make run):\n" + "\n".join(bare)
    assert OUR_PYTHON.search("`python -m acemad_utils run x`") and not OUR_PYTHON.search(
        ".venv/bin/python -m acemad_utils"
    )


@pytest.mark.slow  # every docs block that runs (a few synthetic runs, ~10 s each on 2 loaded cores)
@pytest.mark.parametrize(
    "doc,i",
    [(d, i) for d in DOCS for i, _ in enumerate(shell_blocks(d.read_text(encoding="utf-8")))],
    ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else f"block{v}",
)
def test_each_docs_command_runs_as_written(doc, i, tmp_path):
    block, skipped = runnable(shell_blocks(doc.read_text(encoding="utf-8"))[i])
    commands = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not commands:
        pytest.skip("; ".join(sorted({why for _, why in skipped})))
    done = run_block(block, tmp_path)
    assert done.returncode == 0, f"{doc.relative_to(REPO)} block {i} failed:\n{block}\n{done.stdout}\n{done.stderr}"


def test_the_commands_run_without_an_activated_venv(tmp_path):
    """The block runner is a fresh clone's shell: the environment is only reachable as .venv/bin/python."""
    done = run_block('echo "$(command -v python3)"\n.venv/bin/python -c "import sys; print(sys.prefix)"\n', tmp_path)
    assert done.returncode == 0, done.stderr
    found, prefix = done.stdout.splitlines()
    assert not found.startswith(str(Path(sys.executable).parent)), found
    assert Path(prefix).resolve() == Path(sys.prefix).resolve()


def anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to '-'."""
    heads = re.findall(r"^#+\s+(.*)$", FENCE.sub("", doc.read_text(encoding="utf-8")), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def broken_links(doc: Path) -> list[str]:
    """The [text](target) links of `doc` that do not resolve from its own folder, as a reader's click does:
    the file, then the #anchor among its headings (links out of the repository are not checked)."""
    out = []
    for link in LINK.findall(FENCE.sub("", doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", link) or NOT_OURS.search(link):
            continue
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        if not target.exists() or (anchor and target.suffix == ".md" and anchor not in anchors(target)):
            out.append(link)
    return out


@pytest.mark.parametrize("doc", [*DOCS, REPO / "bench" / "README.md"], ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves_from_the_file_it_is_in(doc):
    assert broken_links(doc) == []


def test_the_link_check_sees_a_wrong_folder_and_a_wrong_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Cost and speed\n")
    doc = tmp_path / "b.md"
    doc.write_text("[ok](a.md#cost-and-speed) [folder](x/a.md) [anchor](a.md#costs) [here](#nothing)\n")
    assert broken_links(doc) == ["x/a.md", "a.md#costs", "#nothing"]


def test_every_set_up_step_of_the_makefile_says_what_it_does_first():
    """A first `make reproduce` installs for minutes: each pip or venv step is announced by the line before it."""
    recipe = (REPO / "Makefile").read_text(encoding="utf-8").split("\n$(VENV)/.base:")[1].split("\nvenv:")[0]
    lines = [x.strip() for x in recipe.splitlines() if x.startswith("\t")]
    steps = [i for i, x in enumerate(lines) if "$(PIP)" in x or "-m venv" in x]
    assert len(steps) >= 4
    assert all("echo" in lines[i] if "-m venv" in lines[i] else lines[i - 1].startswith("@echo") for i in steps)
