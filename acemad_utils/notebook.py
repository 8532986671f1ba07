"""What every notebook's setup cell needs: one import line and one call whose arguments the cell shows.

    from acemad_utils.notebook import config, figures, registry, save_figure, save_table, start, tables, words
    setup, SRC = start("02_baselines", PROFILE=PROFILE, BACKEND=BACKEND, ...)   # every Setup parameter of the
    result = setup.run(registry.baselines(N_VALUES, N_TABLE, SEED), n_max=N_MAX)  # notebook, named in the cell
    result.label("majority", n_agents=N_TABLE)   # ask the run for what to show; never rebuild a label

registry    the paper's experiments (what each notebook runs: experiments/registry.py); Setup.run returns a
            registry.RunResult (.pick, .config, .label, .labels, .family)
figures, tables, words, claims, premise    report/: plots, tables (artefact names, paper tables), what the
            "What we see" f-strings share, the claims ledger, the premise check and the gain split
config      the paper's constants (protocol/config.py): config.ETA, config.ROUNDS, config.N_AGENTS, ...
theory      notebook 00's simulations (experiments/theory.py)
assumption_map    notebook 09's assumption map (and notebook 08's assumption grid): its runs, table and figures
other_model_table    notebook 07: one printed table run with its model (a ModelTable)
SRC         the source label every table and figure carries ("SYNTHETIC ..." or the model's name)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Optional

import pandas as pd
from IPython import get_ipython

from acemad_utils.data.paths import CHECKOUT, CHECKOUT_ENV
from acemad_utils.data.settings import env
from acemad_utils.data.transcripts import profile_runs
from acemad_utils.experiments import assumption_map, params, registry, theory
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol import config
from acemad_utils.report import claims, figures, premise, readable, tables, words
from acemad_utils.report.save import save_figure, save_table

__all__ = [
    "assumption_map",
    "claims",
    "config",
    "figures",
    "other_model_table",
    "premise",
    "profile_runs",
    "registry",
    "save_figure",
    "save_table",
    "start",
    "tables",
    "tables_once",
    "theory",
    "words",
]

# A kernel of `make reproduce` runs the driver's checkout, never another one (whose tables it would write).
if env(CHECKOUT_ENV) and Path(env(CHECKOUT_ENV)) != CHECKOUT:
    raise ImportError(
        f"this kernel imports acemad_utils from {CHECKOUT}, the reproduce driver runs {env(CHECKOUT_ENV)}: run the "
        "driver with that checkout's own Python path (its PYTHONPATH)"
    )

# Read once from the real class: a test may stand a stub in for `Setup`.
SETUP_PARAMS = tuple(Setup.PARAMS)


def tables_once() -> None:
    """In a kernel, a DataFrame shown as a cell's value stores readable.html's table and a one-line text/plain (its
    shape), not a second plain-text copy; texts are never cut with '...'. Outside IPython it does nothing."""
    shell = get_ipython()
    if shell is None:
        return
    pd.set_option("display.max_colwidth", None)  # print(df) too: a cut claim or note cannot be read
    plain = shell.display_formatter.formatters["text/plain"]
    plain.for_type(
        pd.DataFrame, lambda df, p, cycle: p.text(f"<DataFrame: {df.shape[0]} rows x {df.shape[1]} columns>")
    )
    shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, readable.html)


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
    """(Setup from the notebook's parameters, its source label), after printing what it runs on. Every Setup
    parameter of the notebook is named (a missing or unknown one is a ValueError); values are checked as a profile's."""
    tables_once()
    setup = Setup.from_params(_named(notebook, named))
    print(setup.describe())
    return setup, figures.source_label(setup.synthetic, setup.model)


class ModelTable(NamedTuple):
    """One of notebook 07's printed tables run with its model."""

    name: str
    long: pd.DataFrame
    tests: pd.DataFrame
    source: str
    acemad: str


def other_model_table(
    entry: dict, setup_params: dict, *, n_max: Optional[int], eta: float, subset_model: str
) -> ModelTable:
    """Notebook 07: one OTHER_MODELS entry run with its model, endpoint and benchmarks on `subset_model`'s subsets
    (`setup_params`: start()'s keywords); its table saved beside the paper's printed one."""
    p = setup_params
    experiment = registry.other_model(entry, p["BENCHMARKS"], p["SEED"], eta)
    model_setup, src = start(
        "07_other_models",
        **{
            **p,
            "MODEL": experiment.model,
            "BENCHMARKS": list(experiment.benchmarks or []),
            "BASE_URL": experiment.base_url or p["BASE_URL"],
            "SUBSET_MODEL": subset_model,
        },
    )
    result = model_setup.run(experiment, n_max=n_max)
    table = entry["table"]
    long = tables.paper_order(tables.accuracy_long(result.records, methods=result.labels()), table)
    mads = [result.label(m, group="baselines") for m in registry.MAD_METHODS]
    tests = tables.versus_best(result.records, result.labels("acemad"), mads)
    model_setup.close()
    main = table == "table2_main_results"
    name = f"{table}_{registry.model_slug(entry['paper_model'])}" if main else table
    save_table(
        long.merge(tests, how="left", on=["method", "benchmark"]),
        tables.artefact(name, p["PROFILE"]),
        synthetic=model_setup.synthetic,
        source=src,
        display=tables.wide(long, tests, note="paired gain over the best MAD baseline"),
        companions={
            f"Source: {src}": pd.DataFrame({"setup": [model_setup.describe()]}),
            f"Paper ({entry['paper_model']}, as printed)": tables.paper_table(
                table, model=entry["paper_model"] if main else None
            ),
        },
    )
    return ModelTable(name, long, tests, src, result.label("acemad", group="acemad", rounds=config.ROUNDS))
