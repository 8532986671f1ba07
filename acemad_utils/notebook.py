"""What every notebook's setup cell needs: one import line and one call whose arguments the cell shows.

    from acemad_utils.notebook import config, figures, narrative, registry, save_figure, save_table, start, tables
    setup, SRC = start("02_baselines", PROFILE=PROFILE, BACKEND=BACKEND, ...)   # every Setup parameter of the
    result = setup.run(registry.baselines(N_VALUES, N_TABLE, SEED), n_max=N_MAX)  # notebook, named in the cell
    result.label("majority", n_agents=N_TABLE)   # ask the run for what to show; never rebuild a label

registry    the paper's experiments (what each notebook runs: experiments/registry.py); Setup.run returns a
            registry.RunResult (.pick, .config, .label, .labels, .family)
figures, tables, narrative, claims    report/: plots, tables (artefact names, paper tables), the generated prose,
            the claims ledger
config      the paper's constants (protocol/config.py): config.ETA, config.ROUNDS, config.N_AGENTS, ...
theory      notebook 00's simulations (experiments/theory.py)
map_runs, map_report    notebook 09's assumption map: its runs (experiments/assumptions.py) and its tables,
            figures and prose (report/assumptions.py); two modules of one name, told apart here
SRC         the source label every table and figure carries ("SYNTHETIC ..." or the model's name)
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from IPython import get_ipython

from acemad_utils.data.transcripts import profile_runs
from acemad_utils.experiments import assumptions as map_runs
from acemad_utils.experiments import params, registry, theory
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol import config
from acemad_utils.report import assumptions as map_report
from acemad_utils.report import claims, figures, narrative, tables
from acemad_utils.report.save import save_figure, save_table

__all__ = [
    "claims",
    "config",
    "figures",
    "map_report",
    "map_runs",
    "narrative",
    "profile_runs",
    "registry",
    "save_figure",
    "save_table",
    "start",
    "tables",
    "tables_once",
    "theory",
]

# The notebook parameters Setup takes (PROFILE, BACKEND, ...), read once from the real class: a test may stand a
# stub in for `Setup` and the check below still knows the names.
SETUP_PARAMS = tuple(Setup.PARAMS)


def tables_once() -> None:
    """In a notebook kernel, a DataFrame shown as a cell's value keeps its HTML table and a one-line text/plain
    (its shape) instead of a second, plain-text copy of the whole table: the committed notebooks store every
    output, and a table twice is noise. Outside IPython it does nothing; print(df) is unchanged."""
    shell = get_ipython()
    if shell is None:
        return
    plain = shell.display_formatter.formatters["text/plain"]
    plain.for_type(
        pd.DataFrame, lambda df, p, cycle: p.text(f"<DataFrame: {df.shape[0]} rows x {df.shape[1]} columns>")
    )


def _named(notebook: str, named: dict[str, Any]) -> dict[str, Any]:
    """named, checked to be exactly the Setup parameters of the notebook's schema (none left to a silent default)."""
    if notebook not in params.NOTEBOOKS:
        raise ValueError(f"start({notebook!r}, ...): no such notebook; notebooks: {list(params.NOTEBOOKS)}")
    wanted = [n for n in params.names(notebook) if n in SETUP_PARAMS]
    missing = [n for n in wanted if n not in named]
    extra = sorted(set(named) - set(wanted))
    if missing or extra:
        raise ValueError(
            f"start({notebook!r}, ...) takes exactly the notebook's Setup parameters {wanted}: "
            + "; ".join([*([f"pass {missing}"] * bool(missing)), *([f"{extra} are not among them"] * bool(extra))])
        )
    return named


def start(notebook: str, /, **named: Any) -> tuple[Setup, str]:
    """(Setup from the notebook's parameters, its source label), after printing what it runs on; tables_once().

    start("02_baselines", PROFILE=PROFILE, BACKEND=BACKEND, ...) names every Setup parameter of the notebook's
    schema (a missing or unknown one is a ValueError naming them). Each value is checked as a profile's would be.
    In notebook 07's loop over models, pass the model's values under the parameters' names (MODEL=run.model, ...).
    """
    tables_once()
    setup = Setup.from_params(_named(notebook, named))
    print(setup.describe())
    return setup, figures.source_label(setup.synthetic, setup.model)
