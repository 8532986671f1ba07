"""A synthetic profile's kernel imports only what it uses: the openai SDK and the LLM client on first use
(an LLM population), matplotlib where a figure is drawn (bench/imports.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys

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
