"""No warning a user did not cause: the default reproduce in a fresh clone and the set-up's pip steps print no
line matching "Warning"."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from acemad_utils.data import paths as P


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "Warning" in line]


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
    assert not _warnings(out.stdout + out.stderr), _warnings(out.stdout + out.stderr)[:10]
