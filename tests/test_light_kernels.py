"""A synthetic kernel imports only what it uses (bench/imports.py times it); a fresh clone's run prints no warning."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from acemad_utils.data import paths as P

HEAVY = ("openai", "matplotlib", "papermill", "acemad_utils.agents.client", "acemad_utils.agents.llm_agent")


def loaded_after(code: str) -> set:
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_the_notebook_import_line_and_a_synthetic_setup_load_no_client_and_no_plotting():
    assert loaded_after("import acemad_utils.notebook") == set()
    assert loaded_after("from acemad_utils.experiments.setup import Setup\nassert Setup().synthetic") == set()


def test_the_client_and_a_figure_still_load_when_used():
    assert {"openai", "acemad_utils.agents.client"} <= loaded_after("from acemad_utils.agents.client import LLMClient")
    assert "matplotlib" in loaded_after(
        "import pandas as pd\nfrom acemad_utils.report import figures as F\n"
        "F.bars_by_benchmark(pd.DataFrame({'benchmark': ['b'], 'method': ['m'], 'accuracy': [0.5], "
        "'ci_lo': [0.4], 'ci_hi': [0.6]}), 'method', 't')"
    )


def test_the_set_up_keeps_pip_and_setuptools_notices_in_a_log():
    """Every pip step of the Makefile's set-up ends with $(QUIET): its notices go to .venv/pip.log, shown on failure."""
    text = (P.ROOT / "Makefile").read_text()
    pip_steps = [line.strip() for line in text.splitlines() if line.strip().startswith("@$(PIP)")]
    assert pip_steps and all(step.endswith("$(QUIET)") for step in pip_steps), pip_steps
    assert re.search(r"^QUIET\s*=.*pip\.log 2>&1 \|\| \{ cat .*pip\.log; exit 1; \}", text, re.M)


@pytest.mark.slow
def test_default_reproduce_in_a_fresh_clone_prints_no_warning(tmp_path):
    repo = tmp_path / "acemad"
    subprocess.run(["git", "clone", "-q", str(P.ROOT), str(repo)], check=True)
    env = {**os.environ, "PYTHONPATH": str(repo), "ACEMAD_SMOKE": "1"}
    env.pop("ACEMAD_PROGRESS", None)
    cmd = [sys.executable, "-m", "acemad_utils.reproduce", "--profile", "default"]
    out = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    warnings = [line for line in (out.stdout + out.stderr).splitlines() if "Warning" in line]
    assert not warnings, warnings[:10]
