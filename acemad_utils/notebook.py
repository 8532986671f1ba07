"""What every notebook's setup cell needs: one import line and one call whose arguments the cell shows.

from acemad_utils.notebook import config, figures, registry, save_figure, save_table, start, tables, words
setup, SRC = start("02_baselines", PROFILE=PROFILE, BACKEND=BACKEND, ...)  # every Setup parameter, named
result = setup.run(registry.baselines(N_VALUES, N_TABLE, SEED), n_max=N_MAX)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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


def fresh_kernel(cwd: str) -> None:
    """What a new kernel would start from, in a kernel `make reproduce` reuses for the next notebook of a synthetic
    run (its start and imports are ~1 CPU s of each notebook): an empty namespace and execution count 1 (IPython's
    reset), the notebook's directory, no open figure, no memo an earlier notebook filled, warnings shown
    again, and the earlier notebook's objects collected. The committed notebooks are run this way (make notebooks)
    and each in a kernel of its own (nbval): both must give the same outputs."""
    import contextlib
    import ctypes
    import gc
    import sys
    import warnings

    get_ipython().reset(new_session=True)
    os.chdir(cwd)
    if plt := sys.modules.get("matplotlib.pyplot"):
        plt.close("all")
    for name, module in list(sys.modules.items()):  # the package's memos (bootstrap indices, items' draws, theory's)
        if name.startswith("acemad_utils."):
            for memo in [v for v in vars(module).values() if hasattr(v, "cache_clear")]:
                memo.cache_clear()
    warnings._filters_mutated()  # type: ignore[attr-defined]  # every module's record of warnings shown is stale
    # Collected: what is not frozen (what transcripts.gc_paused froze, records without cycles, went with their last
    # reference; unfreezing it for a full scan cost ~0.1 CPU s a notebook). Then what is left, the imports, frozen:
    # no later collection rescans them.
    gc.collect()
    gc.freeze()
    with contextlib.suppress(OSError, AttributeError):  # glibc: hand the freed heap back, as an ended kernel would
        ctypes.CDLL(None).malloc_trim(0)


def start(notebook: str, /, **named: Any) -> tuple[Setup, str]:
    """(Setup from the notebook's parameters, its source label), after printing what it runs on; `named` must be
    exactly the notebook's Setup parameters (none left to a silent default)."""
    if notebook not in params.NOTEBOOKS:
        raise ValueError(f"start({notebook!r}, ...): no such notebook; notebooks: {list(params.NOTEBOOKS)}")
    wanted = [n for n in params.names(notebook) if n in params.SETUP_NAMES]
    missing, extra = [n for n in wanted if n not in named], sorted(set(named) - set(wanted))
    if missing or extra:
        raise ValueError(
            f"start({notebook!r}, ...) takes exactly the notebook's Setup parameters {wanted}: "
            + "; ".join([*([f"pass {missing}"] * bool(missing)), *([f"{extra} are not among them"] * bool(extra))])
        )
    tables_once()
    setup = Setup.from_params(named)
    print(setup.describe())
    return setup, figures.source_label(setup.synthetic, setup.model)
