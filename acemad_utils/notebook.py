"""What every experiment notebook's setup cell needs: one import line and one call.

    from acemad_utils.notebook import F, R, TB, DebateConfig, save_figure, save_table, start
    S, SRC = start(globals())   # Setup from the notebook's parameters (smoke mode applied inside), described

F figures, TB tables, R the registry of the paper's experiments (what each notebook runs), SRC the source
label every table and figure carries ("SYNTHETIC ..." or the model's name).
"""

from __future__ import annotations

from acemad_utils.experiments import registry as R  # noqa: F401
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig  # noqa: F401
from acemad_utils.report import figures as F  # noqa: F401 (re-exported for the notebooks)
from acemad_utils.report import tables as TB  # noqa: F401
from acemad_utils.report.save import save_figure, save_table  # noqa: F401


def start(params: dict, **kw) -> tuple[Setup, str]:
    """(Setup.from_params(params, **kw), its source label), after printing what it runs on."""
    S = Setup.from_params(params, **kw)
    print(S.describe())
    return S, F.source_label(S.synthetic, S.model)
