"""What every experiment notebook's setup cell needs: one import line and one call.

    from acemad_utils.notebook import F, R, TB, DebateConfig, save_figure, save_table, start
    S, SRC = start(globals())   # Setup from the notebook's parameters (smoke mode applied inside), described
    tables_once()               # (called by start) a DataFrame shows as its HTML table only

F figures, TB tables, R the registry of the paper's experiments (what each notebook runs), SRC the source
label every table and figure carries ("SYNTHETIC ..." or the model's name).
"""

from __future__ import annotations

import pandas as pd
from IPython import get_ipython

from acemad_utils.experiments import registry as R  # noqa: F401
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig  # noqa: F401
from acemad_utils.report import figures as F  # noqa: F401 (re-exported for the notebooks)
from acemad_utils.report import tables as TB  # noqa: F401
from acemad_utils.report.save import save_figure, save_table  # noqa: F401


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


def start(params: dict, **kw) -> tuple[Setup, str]:
    """(Setup.from_params(params, **kw), its source label), after printing what it runs on; tables_once()."""
    tables_once()
    S = Setup.from_params(params, **kw)
    print(S.describe())
    return S, F.source_label(S.synthetic, S.model)
