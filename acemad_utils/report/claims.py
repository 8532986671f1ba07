"""The claims ledger: every quantitative claim of the paper, one row each, with the paper's number, ours with
its 95% CI, and a verdict. Pure: runs (meta, records) in, a DataFrame out; notebook 08 reads and writes.

    from acemad_utils.report import claims as C
    ledger = C.ledger({"main": (meta, records), "baselines": ..., ...})   # the runs of notebooks 02-07
    C.markdown(ledger, C.title(synthetic=True, source=SRC))

Verdicts. A claim that one method beats another is tested by the paired gain on the same questions (the
Average: the mean over benchmarks of the per-benchmark gains, resampled within each benchmark): `supported`
when its CI lies above 0, `not supported` when it lies at or below 0, `inconclusive at this n` otherwise. A
claim of a value (49.92%, 74%) is `supported` when our CI holds it (and, for an improvement, excludes 0),
`not supported` when it does not, `inconclusive at this n` when the CI holds both it and 0. A claim whose run is
missing (a notebook not run, a model not listed in the profile) gets `not run`. The paper's numbers are its
printed cells (data/paper/), its gains the printed cells' differences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

import numpy as np
import pandas as pd

from acemad_utils.report import rescoring as A
from acemad_utils.report import tables as TB

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_RUN = "supported", "not supported", "inconclusive at this n", "not run"
COLUMNS = ["claim", "paper line", "paper", "ours [95% CI]", "n", "verdict", "note"]
RunData = tuple[dict, list]
Target = Union[str, tuple]  # a label, or (our label, the paper's label, the paper's baselines)


def gain_verdict(lo: float, hi: float) -> str:
    """A claimed gain from its CI: above 0, at or below 0, or straddling 0."""
    return SUPPORTED if lo > 0 else NOT_SUPPORTED if hi <= 0 else INCONCLUSIVE


def value_verdict(value: float, lo: float, hi: float, null: Optional[float] = None) -> str:
    """A claimed value from our CI: held (and the null excluded), not held, or both held."""
    if not lo <= value <= hi:
        return NOT_SUPPORTED
    return INCONCLUSIVE if null is not None and lo <= null <= hi else SUPPORTED


def row(claim: str, line: str, paper, ours: str = "", n: int = 0, verdict: str = NOT_RUN, note: str = "") -> dict:
    paper = paper if isinstance(paper, str) else f"{paper:+.2f}" if paper is not None else "-"
    return dict(zip(COLUMNS, (claim, line, paper, ours, n, verdict, note)))


def _ci(x: float, lo: float, hi: float, signed: bool = True) -> str:
    f = "{:+.1f}" if signed else "{:.1f}"
    return f"{f.format(x)} [{f.format(lo)}, {f.format(hi)}]"


def bench_key(benchmark: str) -> str:
    """The paper's column for one of our benchmarks ('synthetic-arc_challenge' -> 'ARC-C')."""
    return benchmark if benchmark == TB.AVERAGE else TB.BENCH_LABELS.get(benchmark.removeprefix("synthetic-"), "")


def paper_gain(paper: pd.DataFrame, target: str, baselines: Sequence[str], column: str) -> Optional[float]:
    """The printed cell of `target` minus the best printed cell of `baselines` in `column` (None if absent)."""
    col = "Average (printed)" if column == TB.AVERAGE else column
    cells = paper.set_index("method")[col] if col in paper else None
    if cells is None or target not in cells or not any(b in cells for b in baselines):
        return None
    return float(cells[target] - max(cells[b] for b in baselines if b in cells))


def gain_rows(
    claim: str,
    line: str,
    records: list,
    target: str,
    baselines: Sequence[str],
    *,
    paper: Optional[pd.DataFrame] = None,
    paper_target: str = "",
    paper_baselines: Sequence[str] = (),
    per_benchmark: bool = False,
) -> list[dict]:
    """One row per benchmark (with per_benchmark) and one for the Average: target's paired gain over the best
    of `baselines` there. The paper's gain uses paper_target / paper_baselines (default: the same labels)."""
    tests = TB.versus_best(records, [target], list(baselines))
    if not per_benchmark:
        tests = tests[tests.benchmark == TB.AVERAGE]
    out = []
    for t in tests.to_dict("records"):
        col = bench_key(t["benchmark"])
        theirs = None if paper is None else paper_gain(paper, paper_target or target, paper_baselines or baselines, col)
        name = claim if t["benchmark"] == TB.AVERAGE else f"{claim}: {TB.bench_label(t['benchmark'])}"
        out.append(
            row(
                name,
                line,
                theirs,
                _ci(t["gain"], t["gain_lo"], t["gain_hi"]),
                t["n_paired"],
                gain_verdict(t["gain_lo"], t["gain_hi"]),
                f"vs {t['best_baseline']}, p={t['p_value']:.2g}",
            )
        )
    return out or [row(claim, line, None, note=f"{target} or {list(baselines)} not in the run")]


def relative_gain(records: list, target: str, base: str, n_boot: int = 2000, seed: int = 0) -> Optional[tuple]:
    """(relative improvement of target's Average over base's, in %, CI lo, hi, n paired): the ratio of the
    means of benchmark means minus 1, bootstrapped by resampling questions within each benchmark (paired)."""
    df = pd.DataFrame(
        [
            (r["benchmark"], r["question_id"], r["method"], float(r["final"]["correct"]))
            for r in records
            if r["final"]["correct"] is not None  # a question without a gold answer is not scored
        ]
    )
    df.columns = ["benchmark", "question_id", "method", "correct"]
    piv = df[df.method.isin([target, base])].pivot_table("correct", ["benchmark", "question_id"], "method").dropna()
    if target not in piv or base not in piv or piv.empty:
        return None
    rng = np.random.default_rng(seed)
    a_b, b_b, a_p, b_p = [], [], [], []
    for _, g in piv.groupby(level=0):
        a, b = g[target].to_numpy(), g[base].to_numpy()
        idx = rng.integers(0, len(a), (n_boot, len(a)))
        a_b.append(a[idx].mean(1))
        b_b.append(b[idx].mean(1))
        a_p.append(a.mean())
        b_p.append(b.mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        boots = 100 * (np.mean(a_b, 0) / np.mean(b_b, 0) - 1)
        point = 100 * (np.mean(a_p) / np.mean(b_p) - 1)
    boots = np.where(np.isnan(boots), np.inf, boots)  # 0/0 resamples: no finite ratio
    lo, hi = np.quantile(boots, 0.025, method="lower"), np.quantile(boots, 0.975, method="higher")  # infs: no mixing
    return float(point), float(lo), float(hi), len(piv)


def _labels(meta: dict, method: str, **fields) -> list[str]:
    """Labels of a run's configs of one method kind (and fields), in order of n_agents."""
    ms = [(c.get("n_agents", 0), lab) for lab, c in meta["methods"].items() if c["method"] == method]
    ms = [(n, lab) for n, lab in ms if all(meta["methods"][lab].get(k) == v for k, v in fields.items())]
    return [lab for _, lab in sorted(ms)]


def _average(records: list, labels: Sequence[str]) -> pd.Series:
    long = TB.accuracy_long(records, methods=list(labels))
    return long[long.benchmark == TB.AVERAGE].set_index("method")["accuracy"]


FLAT_MARGIN = 2.0  # points: "flat" / "plateaus" is supported when the paired change's CI stays below this
MAD_LABELS = ("Decentralized MAD", "Centralized MAD", "Sparse MAD")


def flat_verdict(lo: float, hi: float) -> str:
    """ "No further gain": a CI above 0 refutes it, one below FLAT_MARGIN supports it, else inconclusive."""
    return NOT_SUPPORTED if lo > 0 else SUPPORTED if hi < FLAT_MARGIN else INCONCLUSIVE


def main_claims(main: Optional[RunData], paper: pd.DataFrame) -> list[dict]:
    """Table 2 with GPT-4o-mini (l.459): AceMAD (T=3) beats every baseline, 49.92%, +74% over Decentralized
    MAD, T=3 optimal. `paper`: the printed GPT-4o-mini block."""
    line, t3 = "l.459, Table 2", "AceMAD (T=3)"
    if main is None:
        return [row("AceMAD (T=3) beats every baseline (notebook 03)", line, None)]
    meta, recs = main
    if t3 not in meta["methods"]:
        return [row("AceMAD (T=3) beats every baseline", line, None, note="T=3 not in this profile's ROUNDS")]
    base = [lab for lab, c in meta["methods"].items() if c["method"] != "acemad" and not c.get("roster")]
    out = gain_rows("AceMAD (T=3) beats every baseline", line, recs, t3, base, paper=paper, per_benchmark=True)
    verdicts = {r["verdict"] for r in out}
    every = SUPPORTED if verdicts == {SUPPORTED} else NOT_SUPPORTED if NOT_SUPPORTED in verdicts else INCONCLUSIVE
    out.append(
        row(
            "... on every benchmark and on the Average",
            line,
            "all > 0",
            n=out[-1]["n"],
            verdict=every,
            note="the conjunction of the rows above",
        )
    )
    avg = TB.accuracy_long(recs, methods=[t3])
    a = avg[avg.benchmark == TB.AVERAGE].iloc[0]
    printed = float(paper.set_index("method")["Average (printed)"][t3])
    out.append(
        row(
            "AceMAD (T=3) average accuracy 49.92% (GPT-4o-mini)",
            line,
            f"{printed:.2f}",
            _ci(a.accuracy, a.ci_lo, a.ci_hi, signed=False),
            int(a.n),
            value_verdict(printed, a.ci_lo, a.ci_hi),
            "accuracy in %; the printed cells average 43.25",
        )
    )
    out += _relative_row(recs, t3, paper, line)
    out += gain_rows(
        "AceMAD (T=3) beats Majority Voting (a huge improvement)", line, recs, t3, ["Majority Voting"], paper=paper
    )
    others = [lab for lab in _labels(meta, "acemad") if lab != t3]
    out += gain_rows("T=3 is the optimal number of rounds", line, recs, t3, others, paper=paper)
    return out


def _relative_row(recs: list, t3: str, paper: pd.DataFrame, line: str) -> list[dict]:
    """The "+74% over Decentralized MAD" row; undefined (inconclusive) when Decentralized MAD scores 0."""
    rel = relative_gain(recs, t3, "Decentralized MAD")
    if rel is None:
        return []
    p = paper.set_index("method")["Average (printed)"]
    claimed = 100 * (p[t3] / p["Decentralized MAD"] - 1)
    finite = bool(np.isfinite(rel[0]))
    ours = _ci(*rel[:3]) + "%" if finite else "undefined (Decentralized MAD at 0%)"
    verdict = value_verdict(claimed, rel[1], rel[2], null=0.0) if finite else INCONCLUSIVE
    note = "ratio of Averages minus 1; paired bootstrap within benchmarks"
    return [
        row("74% relative improvement over Decentralized MAD", line, f"{claimed:+.1f}%", ours, rel[3], verdict, note)
    ]


def ablation_claims(ablation: Optional[RunData], main: Optional[RunData], seed: int = 0) -> list[dict]:
    """Figure 4 (l.511): the full protocol highest on every benchmark, and above Standard MAD as the paper's bar
    means it: Decentralized MAD with AceMAD's agents, no q asked (notebook 05's run, else notebook 03's control)."""
    line = "l.511, Figure 4"
    out = []
    if ablation is not None:
        meta, recs = ablation
        [label] = [lab for lab, c in meta["methods"].items() if c["method"] == "acemad"]
        full, ace = meta["methods"][label], [r for r in recs if r["method"] == label]
        names = list(A.ABLATIONS)
        re = A.reweighted_records(ace, A.ABLATIONS, eta=full["eta"], exponent=full["weight_exponent"], seed=seed)
        out += gain_rows("Full protocol beats both ablations", line, re, names[0], names[1:], per_benchmark=True)
        out += gain_rows("Full protocol beats Self-belief only", line, re, names[0], names[1:2])
    else:
        out.append(row("Full protocol beats both ablations (notebook 05)", line, None))
    for run in (ablation, main):
        if run is None:
            continue
        methods = run[0]["methods"]
        ctrl = [lab for lab, c in methods.items() if c.get("roster") == "acemad"]
        ace3 = [lab for lab, c in methods.items() if c["method"] == "acemad" and c["rounds"] == 3]
        if ctrl and ace3:
            claim = "AceMAD (T=3) beats Standard MAD (AceMAD's agents, no q asked)"
            out += gain_rows(claim, line, run[1], ace3[0], ctrl)
            break
    for r in out:
        r["note"] = (r["note"] + "; " if r["note"] else "") + "Figure 4 prints no numbers"
    return out


def table_claims(
    run: Optional[RunData], paper: pd.DataFrame, *, claim: str, line: str, targets: Sequence[Target], baselines
) -> list[dict]:
    """Each target's Average gain over the best of `baselines` (Tables 1, 3, 4, 5, 6 and Table 2's Qwen block)."""
    out = []
    for t in targets:  # a label, or (our label, the paper's label, the paper's baselines)
        theirs: dict = dict(paper_target=t[1], paper_baselines=t[2]) if isinstance(t, tuple) else {}
        label = t[0] if isinstance(t, tuple) else t
        if run is None:
            out.append(row(f"{claim}: {label}", line, None, note="run not made in this profile"))
        else:
            out += gain_rows(f"{claim}: {label}", line, run[1], label, baselines, paper=paper, **theirs)
    return out


def _pair_gain(records: list, a: str, b: str):
    t = TB.versus_best(records, [a], [b])
    t = t[t.benchmark == TB.AVERAGE]
    return None if t.empty else t.iloc[0].to_dict()


def trend_claims(baselines: Optional[RunData], scaling: Optional[RunData]) -> list[dict]:
    """Figure 2 (l.229): Decentralized MAD improves monotonically in N, voting stays flat. Figure 5 (l.522):
    AceMAD improves from N=1 to N=10, then plateaus or declines."""
    out = []
    specs = [
        ("Figure 2 (l.229)", baselines, "decentralized", "Decentralized MAD improves monotonically in N"),
        ("Figure 2 (l.229)", baselines, "majority", "Majority Voting stays flat in N"),
        ("l.522, Figure 5", scaling, "acemad", "AceMAD improves up to N=10"),
    ]
    for line, run, method, claim in specs:
        if run is None:
            out.append(row(claim, line, "(figure)"))
            continue
        labels = _labels(run[0], method)
        ns = [run[0]["methods"][lab]["n_agents"] for lab in labels]
        upto = [lab for lab, n in zip(labels, ns) if n <= (10 if method == "acemad" else 5)]
        g = _pair_gain(run[1], upto[-1], upto[0]) if len(upto) > 1 else None
        if g is None:
            out.append(row(claim, line, "(figure)", note="fewer than two N in this profile"))
            continue
        avg = _average(run[1], upto)
        monotone = bool(np.all(np.diff(avg.reindex(upto).to_numpy()) >= 0))
        if method == "majority":  # flat: no change either way beyond the margin
            verdict = NOT_SUPPORTED if g["gain_lo"] > 0 or g["gain_hi"] < 0 else INCONCLUSIVE
            verdict = SUPPORTED if -FLAT_MARGIN < g["gain_lo"] and g["gain_hi"] < FLAT_MARGIN else verdict
        else:  # "monotonically" (Figure 2) also needs the points in order; Figure 5 claims only the rise
            verdict = gain_verdict(g["gain_lo"], g["gain_hi"])
            verdict = INCONCLUSIVE if verdict == SUPPORTED and not monotone and method != "acemad" else verdict
        by_n = ", ".join(f"N={n}: {avg[lab]:.1f}" for lab, n in zip(upto, ns))
        out.append(
            row(
                f"{claim} (N={ns[0]} to N={ns[len(upto) - 1]})",
                line,
                "(figure)",
                _ci(g["gain"], g["gain_lo"], g["gain_hi"]),
                int(g["n_paired"]),
                verdict,
                f"Average by N: {by_n}; {'monotone' if monotone else 'not monotone'}",
            )
        )
    out.append(_plateau(scaling))
    return out


def _plateau(scaling: Optional[RunData]) -> dict:
    claim, line = "AceMAD plateaus or declines beyond N=10", "l.522, Figure 5"
    if scaling is None:
        return row(claim, line, "(figure)")
    labels = _labels(scaling[0], "acemad")
    ns = {lab: scaling[0]["methods"][lab]["n_agents"] for lab in labels}
    at10 = [lab for lab in labels if ns[lab] == 10]
    beyond = [lab for lab in labels if ns[lab] > 10]
    if not at10 or not beyond:
        return row(claim, line, "(figure)", note="N=10 and N>10 not both run in this profile")
    tests = TB.versus_best(scaling[1], beyond, at10)
    t = tests[tests.benchmark == TB.AVERAGE].sort_values("gain").iloc[-1].to_dict()  # the best N beyond 10
    return row(
        claim,
        line,
        "(figure)",
        _ci(t["gain"], t["gain_lo"], t["gain_hi"]),
        int(t["n_paired"]),
        flat_verdict(t["gain_lo"], t["gain_hi"]),
        f"best N>10 ({t['method']}) minus N=10; plateau = CI below +{FLAT_MARGIN:g} points",
    )


def _at_n(run: RunData, n: int) -> tuple[int, RunData]:
    """(N, the configs of a run at N): N = n, or the largest N run when n was not."""
    meta, recs = run
    ns = sorted({c["n_agents"] for c in meta["methods"].values()})
    n = n if n in ns else ns[-1]
    keep = {lab for lab, c in meta["methods"].items() if c["n_agents"] == n}
    methods = {k: v for k, v in meta["methods"].items() if k in keep}
    return n, ({**meta, "methods": methods}, [r for r in recs if r["method"] in keep])


def other_model_claims(runs: dict) -> list[dict]:
    """Table 2's Qwen3 block, Tables 4 and 5 (AceMAD (T=3) over the best MAD) and Table 6 (over Decentralized MAD)."""
    tables = {  # table: (claim's name, paper line, the paper's block)
        "table2_main_results": ("Table 2 (Qwen3-235B-A22B)", "l.459, Table 2", "Qwen3-235B-A22B-Instruct"),
        "table4_deepseek": ("Table 4 (DeepSeek-V3.1)", "l.1020, Table 4", None),
        "table5_llama8b": ("Table 5 (Llama-3.1-8B)", "l.1069, Table 5", None),
    }
    out = []
    for table, (name, line, model) in tables.items():
        run = next((v for k, v in runs.items() if k.startswith("other_") and k.endswith(table)), None)
        paper = TB.paper_table(table, model=model)
        mads = [m for m in MAD_LABELS if m in set(paper["method"])]
        out += table_claims(
            run, paper, claim=f"{name}: AceMAD beats the best MAD", line=line, targets=["AceMAD (T=3)"], baselines=mads
        )
    out += table_claims(
        runs.get("full_datasets"),
        TB.paper_table("table6_full_datasets"),
        claim="Table 6 (full test sets): AceMAD beats Decentralized MAD",
        line="l.1114, Table 6",
        targets=[("AceMAD (T=3)", "AceMAD", ["MAD"])],
        baselines=["Decentralized MAD"],
    )
    return out


def ledger(runs: dict, seed: int = 0) -> pd.DataFrame:
    """Every claim's row, from the runs of notebooks 02-07 ({experiment name: (meta, records)}; a missing run
    gives `not run` rows)."""
    t1 = runs.get("baselines")
    het = runs.get("heterogeneity")
    n, t1_at_n = _at_n(t1, 5) if t1 else (5, None)
    kinds = {"decentralized": MAD_LABELS[0], "centralized": MAD_LABELS[1], "sparse": MAD_LABELS[2]}
    at_n = {c["method"]: lab for lab, c in (t1_at_n[0]["methods"] if t1_at_n else {}).items()}  # labels carry N
    rows = table_claims(
        t1_at_n,
        TB.paper_table("table1_voting_vs_mad"),
        claim=f"Table 1 (N={n}): MAD beats Majority Voting",
        line="l.226, Table 1",
        targets=[(at_n.get(k, paper), paper, ["Majority Voting"]) for k, paper in kinds.items()],
        baselines=[at_n.get("majority", "Majority Voting")],
    )
    rows += trend_claims(t1, runs.get("scaling"))
    rows += main_claims(runs.get("main"), TB.paper_table("table2_main_results", model="GPT-4o-mini"))
    variants = [lab for lab in (het[0]["methods"] if het else []) if lab.startswith("AceMAD")]
    rows += table_claims(
        het,
        TB.paper_table("table3_heterogeneity"),
        line="l.468, Table 3",
        claim="Table 3: heterogeneity beats homogeneous Decentralized MAD",
        targets=variants or ["AceMAD (Different Persona)"],
        baselines=["Decentralized MAD"],
    )
    rows += ablation_claims(runs.get("ablation"), runs.get("main"), seed)
    rows += other_model_claims(runs)
    return pd.DataFrame(rows, columns=COLUMNS)


def title(synthetic: bool, source: str) -> str:
    if synthetic:
        return (
            f"Claims ledger [{source}]: the verdicts describe the synthetic population on generated items, "
            "not the paper's models"
        )
    return f"Claims ledger [{source}]: the paper's claims tested on this model"


def counts(ledger: pd.DataFrame) -> dict:
    """{verdict: rows} in a fixed order (for the notebook's summary line)."""
    return {v: int((ledger.verdict == v).sum()) for v in (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_RUN)}


def source(runs: dict) -> tuple[bool, str]:
    """(synthetic?, model) of the runs, for figures.source_label: synthetic when any run is; the main run's model."""
    metas = [m for m, _ in runs.values()]
    main = runs["main"][0] if "main" in runs else (metas[0] if metas else {})
    return any(m.get("synthetic") for m in metas) or not metas, main.get("model") or ""
