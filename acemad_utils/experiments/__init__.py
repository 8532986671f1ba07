"""experiments: what the notebooks run (registry, params, profiles, paper_tables), the inputs they share (setup,
subsets: the challenging subsets) and running it (runner: resumable transcripts + meta.json)."""

from acemad_utils.experiments.runner import RunInterrupted, run_experiment
from acemad_utils.experiments.setup import Setup

__all__ = ["RunInterrupted", "Setup", "run_experiment"]
