"""What the paper's tables run, as the paper prints them: methods, T values, benchmarks (notebooks 03 and 07).

The registry (experiments/registry.py) builds the runs from these; the parameter rules (experiments/params.py)
checks OTHER_MODELS' tables and FULL_BENCHMARKS against them.
"""

from __future__ import annotations

from typing import Any

from acemad_utils.data.benchmarks import BENCHMARKS
from acemad_utils.protocol.config import ROUNDS, TABLE2_ROUNDS

ALL_BENCHMARKS = list(BENCHMARKS)  # data.benchmarks' order, the paper's
BASELINES = ("single", "majority", "decentralized", "centralized", "sparse")  # Table 2's baselines
VOTING_VS_MAD = ("majority", "decentralized", "centralized", "sparse")  # Table 1 and Figure 2
MAD_METHODS = ("decentralized", "centralized", "sparse")

# What each of the paper's tables runs (notebooks 03 and 07). Baselines are the methods of the table with the
# baselines' homogeneous roster; AceMAD rows are the listed T. Table 6 ("MAD" vs AceMAD, l.1113-1140) runs on
# the full test sets, not the challenging subsets; its "MAD" is read as Decentralized MAD (l.1114).
PAPER_TABLES: dict[str, dict[str, Any]] = {
    "table2_main_results": {"baselines": list(BASELINES), "rounds": list(TABLE2_ROUNDS), "benchmarks": ALL_BENCHMARKS},
    "table4_deepseek": {"baselines": list(VOTING_VS_MAD), "rounds": [ROUNDS], "benchmarks": ALL_BENCHMARKS},
    "table5_llama8b": {"baselines": list(BASELINES), "rounds": [ROUNDS], "benchmarks": ["truthfulqa", "medqa", "bbh"]},
    "table6_full_datasets": {
        "baselines": ["decentralized"],
        "rounds": [ROUNDS],
        "benchmarks": ["arc_challenge", "logiqa"],
    },
}
