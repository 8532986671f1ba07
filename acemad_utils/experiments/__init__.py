"""experiments: what the notebooks run, and running it.

params     every notebook parameter: type, allowed values, default, notebooks, meaning (docs/parameters.md)
registry   the paper's experiments as named data: every run each notebook makes, from its parameters; RunResult
paper_tables  what the paper's tables run (methods, T values, benchmarks)
setup      Setup: a profile's agents, questions and challenging subsets for notebooks 01-07
runner     run_experiment: resumable runs -> outputs/runs/<profile>/<name>/transcripts.jsonl.gz + meta.json
run_files  how those files are written (whole lines, torn tails cut, canonical order, compressed when complete)
subsets    challenging subsets (Appendix "Challenging Subset Construction"): they run debates, so they live here
profiles   profiles/*.yaml: loaded and checked before anything runs
theory     the Monte Carlo checks of notebook 00 on the synthetic population
"""

from acemad_utils.experiments.runner import RunInterrupted, run_experiment
from acemad_utils.experiments.setup import Setup

__all__ = ["RunInterrupted", "Setup", "run_experiment"]
