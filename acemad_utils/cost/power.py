"""How many questions each claimed comparison needs, against what a profile plans to run (docs/statistics.md,
"Power"): the paper's effect from its printed cells (Average = mean of the per-benchmark gains, as the ledger tests
it), the n for 80% power at alpha 0.05 and at Holm's first step, and the planned run's power. The paper prints no
discordance: it comes from the two printed accuracies at correlation rho (0, conservative; or a pilot's rho).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import pandas as pd

from acemad_utils.cost.items import PAPER_SUBSETS, item_counts
from acemad_utils.data.benchmarks import FULL_SIZES
from acemad_utils.experiments import registry
from acemad_utils.report import power as PW
from acemad_utils.report.tables import BENCH_LABELS, paper_table

if TYPE_CHECKING:  # estimate prints this module's table: a run-time import would be circular
    from acemad_utils.cost.estimate import Estimate

POWER, ALPHA = 0.8, 0.05


@dataclass(frozen=True)
class Claim:
    """Row `a` beats row `b` of a printed table (over `benchmarks`; None: the Average), tested on the questions of
    `notebook`'s registry run `run` when it runs `needs`."""

    family: str
    table: str
    a: str
    b: str  # "best": the table's best baseline by recomputed Average
    notebook: str
    run: str  # the registry Run's name (prefix)
    model: Optional[str] = None  # the table's model block (Table 2)
    benchmarks: Optional[tuple] = None
    needs: tuple = field(default_factory=tuple)  # (method, {fields}) the run must have
    note: str = ""
    label: str = ""  # shown after the claim: whose numbers (a model, a table)


_T2, _G = "table2_main_results", "GPT-4o-mini"
_BASELINES = ("Single Agent", "Majority Voting", "Decentralized MAD", "Centralized MAD", "Sparse MAD", "MAD")
CLAIMS = [
    Claim("main gain", _T2, "AceMAD (T=3)", "best", "03_main_results", "main", _G, note="l.459"),
    *[
        Claim("per-benchmark gain", _T2, "AceMAD (T=3)", "best", "03_main_results", "main", _G, (b,))
        for b in ("arc_challenge", "logiqa", "mmlu_pro", "truthfulqa", "medqa", "bbh")
    ],
    Claim("T comparison", _T2, "AceMAD (T=3)", "AceMAD (T=5)", "03_main_results", "main", _G,
          needs=(("acemad", {"rounds": 5}),)),
    Claim("T comparison", _T2, "AceMAD (T=3)", "AceMAD (T=2)", "03_main_results", "main", _G,
          needs=(("acemad", {"rounds": 2}),)),
    Claim("debate over voting", "table1_voting_vs_mad", "Decentralized MAD", "Majority Voting", "02_baselines",
          "baselines", label="Table 1"),
    Claim("ablation", _T2, "AceMAD (T=3)", "Decentralized MAD", "05_ablation", "ablation", _G,
          note="Figure 4 prints no numbers: sized as Table 2's AceMAD minus Decentralized MAD (l.209's Standard MAD)"),
    *[
        Claim("heterogeneity", "table3_heterogeneity", v, "Decentralized MAD", "04_heterogeneity", "heterogeneity",
              needs=((v, {}),))
        for v in ("AceMAD (Different Persona)", "AceMAD (Different Thinking System)", "AceMAD (Different LLMs)")
    ],
    Claim("other models", _T2, "AceMAD (T=3)", "best", "07_other_models", "other_", "Qwen3-235B-A22B-Instruct",
          needs=(("table", "table2_main_results"),), label="Qwen3-235B-A22B"),
    Claim("other models", "table4_deepseek", "AceMAD (T=3)", "best", "07_other_models", "other_",
          needs=(("table", "table4_deepseek"),), label="DeepSeek-V3.1"),
    Claim("other models", "table5_llama8b", "AceMAD (T=3)", "best", "07_other_models", "other_",
          needs=(("table", "table5_llama8b"),), label="Llama-3.1-8B"),
    Claim("other models", "table6_full_datasets", "AceMAD", "MAD", "07_other_models", "full_datasets",
          label="Table 6, full test sets"),
]  # fmt: skip
#: Claims no printed number sizes: listed with no n (a trend or a "flat" claim, not a difference of two cells).
UNSIZED = {"scaling": "Figure 5 prints no numbers (N = 1..20 trend); its rows are trend claims"}


def cells(c: Claim) -> tuple[str, list[str], list[float], list[float]]:
    t = paper_table(c.table, c.model)
    by = {lab: k for k, lab in BENCH_LABELS.items()}
    benches = [by[col] for col in t.columns if col in by]
    if c.benchmarks:
        benches = [b for b in benches if b in c.benchmarks]
    cols = [BENCH_LABELS[b] for b in benches]
    rows = t.set_index("method")[cols] / 100
    b = c.b
    if b == "best":
        base = rows.loc[[m for m in rows.index if m in _BASELINES]]
        b = str(base.mean(axis=1).idxmax())
    return b, benches, list(rows.loc[c.a]), list(rows.loc[b])


def _run(c: Claim, params_by_nb: dict) -> tuple[Optional[registry.Run], dict]:
    """The profile's registry Run of the claim (None: not run) and its notebook's parameters."""
    P = params_by_nb.get(c.notebook)
    has = lambda r: all(r.name.endswith(v) if k == "table" else r.select(k, **v) for k, v in c.needs)
    runs = registry.runs(c.notebook, P) if P is not None else []
    return next((r for r in runs if r.name.startswith(c.run) and has(r)), None), P or {}


def planned(r: Optional[registry.Run], P: dict, benches: Sequence[str], capped: bool = True) -> list[int]:
    """Questions per benchmark the profile's run `r` asks (capped=False: N_MAX ignored)."""
    ns = [item_counts(b, P)[0 if r.on == "input" else 1] if r and b in (r.benchmarks or ()) else 0 for b in benches]
    return [int(n if r is None or r.cap is None or not capped else min(n, r.cap)) for n in ns]


def plan(params_by_nb: dict, rho: Optional[float] = None, est: Optional[Estimate] = None) -> pd.DataFrame:
    """One row per claim; rho sets the discordance (None: 0); est (a cost Estimate) adds the dollars of the Holm n."""
    holm = ALPHA / len(CLAIMS)  # Holm's first step
    rows = []
    for c in CLAIMS:
        b, benches, pa, pb = cells(c)
        r, P = _run(c, params_by_nb)
        ns = planned(r, P, benches)
        d = [x - y for x, y in zip(pa, pb)]
        psi = [PW.discordance_at(x, y, rho or 0.0) for x, y in zip(pa, pb)]
        paper = FULL_SIZES if c.table == "table6_full_datasets" else PAPER_SUBSETS
        shares = ns if all(ns) else [paper[bb] for bb in benches]  # a benchmark without a question: the design's
        sized_ = sum(d) != 0  # a per-benchmark tie (MMLU-Pro) claims no difference: nothing to detect
        n05 = PW.n_strata(shares, d, psi, ALPHA, POWER) if sized_ else None
        nh = PW.n_strata(shares, d, psi, holm, POWER) if sized_ else None
        where = BENCH_LABELS[benches[0]] if len(benches) == 1 else "Average"
        most = sum(planned(r, P, benches, capped=False))
        note = c.note or (
            f"n exceeds the {most:,} question{'s' * (most != 1)} available: no run of this profile reaches it"
            if nh is not None and 0 < most < nh
            else ""
        )
        row = {"family": c.family, "claim": f"{c.a} over {b}, {where}" + (f" ({c.label})" if c.label else ""),
               "table": c.table, "planned n": sum(ns), "effect (points)": round(100 * sum(d) / len(d), 2),
               "n, alpha 0.05": n05, f"n, Holm 0.05/{len(CLAIMS)}": nh,
               "power (Holm)": (PW.power_strata(ns, d, psi, holm) if all(ns) else 0.0) if sized_ else None,
               "note": note}  # fmt: skip
        if est is not None:
            per = _usd_per_question(est, c, r, P)
            row["USD for n (Holm)"] = None if per is None or nh is None else per * nh
        rows.append(row)
    return pd.DataFrame(rows)


def profile_model(P: dict) -> str:
    """The model a profile's runs call unless a run names its own: MODEL, else the local GGUF's name (BACKEND local,
    as experiments/setup.py serves it), else the client's default."""
    if P.get("MODEL"):
        return str(P["MODEL"])
    if P.get("BACKEND") == "local":
        from acemad_utils.agents.local_server import LocalServerError, model_name  # noqa: PLC0415

        try:
            return model_name()
        except LocalServerError:
            return "local model (not installed)"
    from acemad_utils.agents.client import DEFAULT_MODEL  # noqa: PLC0415 (the openai SDK: an endpoint's estimate)

    return DEFAULT_MODEL


def _usd_per_question(est: Estimate, c: Claim, r: Optional[registry.Run], P: dict) -> Optional[float]:
    """Dollars per question of the claim's run (its notebook's rows of its model and of models answering inside it);
    None when nothing is planned or a row is unpriced."""
    if r is None:
        return None
    model = r.model or profile_model(P)
    rows = [x for x in est.rows if x.notebook == c.notebook and (x.model == model or not x.questions)]
    n = sum(planned(r, P, list(r.benchmarks or ())))
    if not rows or not n or any(x.usd is None for x in rows):
        return None
    return sum(x.usd or 0.0 for x in rows) / n


def format_plan(table: pd.DataFrame, rho: Optional[float] = None, source: str = "") -> str:
    holm = [c for c in table.columns if c.startswith("n, Holm")][0]
    shown = table.drop(columns=["table", "note"]).rename(columns={
        "planned n": "planned", "effect (points)": "effect", "n, alpha 0.05": "n@0.05", holm: "n@Holm",
        "power (Holm)": "power", "USD for n (Holm)": "USD@Holm"})  # fmt: skip
    n = lambda x: "-" if x is None or x != x else f"{int(x):,}"
    usd = lambda x: "unpriced" if x is None or x != x else f"${x:,.0f}"
    if "USD@Holm" in shown:  # no n or nothing planned: no dollars to show
        has = shown["n@Holm"].notna() & (shown["planned"] > 0)
        shown["USD@Holm"] = [usd(x) if h else "-" for x, h in zip(shown["USD@Holm"], has)]
    fmt = {"family": "{:<19}".format, "claim": lambda c: f"{c[:70]:<70}", "planned": "{:,}".format,
           "effect": "{:+.2f}".format, "n@0.05": n, "n@Holm": n, "power": "{:.0%}".format}  # fmt: skip
    under = table[table["power (Holm)"].fillna(1.0) < POWER]
    disc = (
        f"the pilot's observed correlation rho = {rho:+.2f} {source}".rstrip()
        if rho is not None
        else "rho = 0 (as if the two methods erred independently; methods sharing a model err together, so the true "
        "discordance is usually lower and these n are conservative; a pilot measures it: make pilot)"
    )
    lines = [
        f"questions needed for {POWER:.0%} power on the paper's claimed effects (paired test; {holm[3:]} is Holm's "
        f"first step over the {len(table)} claims):",
        *("  " + x for x in shown.to_string(index=False, formatters=fmt, na_rep="-", justify="left").splitlines()),
        *(f"  note: {r['claim']}: {r['note']}" for _, r in table[table["note"] != ""].iterrows()),
        f"  {len(under)} of {len(table)} claims are underpowered in this plan (power < {POWER:.0%}) at the discordance "
        "below; the ledger sizes each row by what its run shows (the discordance its methods have, its own CI, 5 "
        "points where the paper prints no number, Holm over all its tests), so it may ask more or fewer",
        *(f"  {fam}: no n ({why})" for fam, why in UNSIZED.items()),
        f"  discordance per benchmark from the two printed accuracies at {disc}",
    ]
    if "USD@Holm" in shown:
        lines.append(
            "  USD@Holm: n@Holm questions at the estimate's dollars per question of that run ($0: its calls are an "
            "earlier notebook's, cached)"
        )
    lines.append(
        "  effects recomputed from the printed cells (Average = mean of the per-benchmark gains); docs/statistics.md"
    )
    return "\n".join(lines)
