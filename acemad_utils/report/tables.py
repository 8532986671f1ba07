"""Paper-style tables from transcripts (percentages): accuracy with n and a 95% CI resampling questions (within each
benchmark for the Average, the mean of the benchmark columns); paired tests: exact McNemar on 0/1 outcomes, else a
sign-flip permutation test (the Single Agent's per-question accuracy is a mean over 5 runs); the paper beside ours."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Optional

import numpy as np
import pandas as pd

from acemad_utils.data import paths as P
from acemad_utils.data.transcripts import commitments
from acemad_utils.report import readable as RD
from acemad_utils.report.stats import (
    adjust_pvalues,
    bootstrap_ci,
    exact_if_constant,
    interval,
    mcnemar_exact,
    resampled_means,
    sign_flip_p,
    snapped,
)

BENCH_LABELS = {"truthfulqa": "TruthfulQA", "arc_challenge": "ARC-C", "bbh": "BBH", "logiqa": "LogiQA",
                "medqa": "MedQA", "mmlu_pro": "MMLU-Pro", "demo": "Demo"}  # fmt: skip
AVERAGE = "Average"


def bench_label(b: str) -> str:
    """'arc_challenge' -> 'ARC-C', 'synthetic-arc_challenge' -> 'ARC-C (synthetic items)'."""
    if b.startswith("synthetic-"):
        return f"{bench_label(b[len('synthetic-') :])} (synthetic items)"
    return BENCH_LABELS.get(b, b)


def question_frame(records: Sequence[dict]) -> pd.DataFrame:
    """Per question x method accuracy (repeats averaged): a failed record is `correct` NaN (out of every mean and
    pair), a question without a gold answer no row."""
    rows = [_frame_row(r) for r in records if r.get("status", "ok") != "ok" or r["final"]["correct"] is not None]
    cols = ["question_id", "benchmark", "method", "correct", "failed", "unparsed", "commitments"]
    df = pd.DataFrame(rows, columns=cols)
    if len({row[:3] for row in rows}) == len(rows):  # one record per cell (no repeats): grouping would keep it as is
        return df.loc[:, [*cols[2::-1], *cols[3:]]]
    return df.groupby(["method", "benchmark", "question_id"], as_index=False, sort=False).agg(
        correct=("correct", "mean"), failed=("failed", "max"), unparsed=("unparsed", "sum"),
        commitments=("commitments", "sum"),
    )  # fmt: skip


def _frame_row(r: dict) -> tuple:
    if r.get("status", "ok") != "ok":
        return r["question_id"], r["benchmark"], r["method"], np.nan, True, 0, 0
    unparsed = int((r.get("usage") or {}).get("parse_failures", 0) or 0)  # commitments unparsed after repair
    return r["question_id"], r["benchmark"], r["method"], float(r["final"]["correct"]), False, unparsed, commitments(r)


def _given_frame(records: Optional[Sequence[dict]], frame: Optional[pd.DataFrame]) -> pd.DataFrame:
    # exactly one of them, so a frame never silently stands for other records
    if (records is None) == (frame is None):
        raise ValueError("pass either records or frame=tables.question_frame(records), not both or neither")
    return frame if frame is not None else reused(id(records), records, lambda: question_frame(records or []))


_REUSED: Optional[dict] = None  # frames_reused's frames by list identity, and their pivots by frame identity


def reused(key, obj, make):
    """make() once per `obj` (and `key`, which names what is made of it) inside frames_reused, held with it (so its
    id is not reused), else every time."""
    if _REUSED is None:
        return make()
    held = _REUSED.get(key)
    if held is None or held[0] is not obj:
        held = _REUSED[key] = (obj, make())
    return held[1]


@contextlib.contextmanager
def frames_reused() -> Iterator[None]:
    """Inside, accuracy_long and versus_best (and claims._by_question) build what they make of a records list once
    (the ledger tables the same lists many times), held till the block ends (so no id is reused)."""
    global _REUSED
    outer, _REUSED = _REUSED, {} if _REUSED is None else _REUSED
    try:
        yield
    finally:
        _REUSED = outer


def _stratified_average(groups: list[np.ndarray], n_boot: int, seed: int, *, ci: bool = True):
    point = float(snapped(np.mean([g.mean() for g in groups])))
    # A group of one question resamples to itself: it would add no spread, and the interval would understate the
    # average's uncertainty. No interval then (stats.bootstrap_ci's rule, for the average).
    if not ci or min(map(len, groups)) < 2:
        return point, np.nan, np.nan
    boots = np.mean(resampled_means(groups, seed, n_boot), axis=0)
    lo, hi = snapped(np.quantile(boots, [0.025, 0.975]))
    return point, float(lo), float(hi)


def accuracy_long(
    records: Optional[Sequence[dict]], methods: Optional[Sequence[str]] = None, n_boot: int = 2000, *, seed: int = 0,
    frame: Optional[pd.DataFrame] = None, ci: bool = True,
) -> pd.DataFrame:  # fmt: skip
    """One row per method x benchmark (+ Average): n answered, n_failed (not counted wrong), n_unparsed of
    n_commitments, accuracy, ci_lo, ci_hi (%); ci=False: NaN bounds, no bootstrap."""
    df = _given_frame(records, frame)
    methods = list(methods or df["method"].unique())
    benchmarks = list(df["benchmark"].unique())
    cells = dict(iter(df.groupby(["method", "benchmark"], sort=False)))  # one pass, not one scan per cell
    rows: list[dict] = []
    for m in methods:
        mine, groups = [], []
        for b in benchmarks:
            cell = cells.get((m, b), df.iloc[:0])
            x, n_failed = cell["correct"].dropna().to_numpy(), int(cell["correct"].isna().sum())
            if len(x) or n_failed:  # every question failed: NaN accuracy, a cell that says so
                parse = int(cell["unparsed"].sum()), int(cell["commitments"].sum())
                if ci:  # exact bounds where every outcome is the same (stats.exact_if_constant)
                    mean, lo, hi = bootstrap_ci(x, n_boot=n_boot, seed=seed)
                    acc = (mean, *exact_if_constant([x], lo, hi))
                else:
                    acc = (x.mean() if len(x) else np.nan), np.nan, np.nan
                mine.append(_row(m, b, len(x), n_failed, *parse, acc))
                groups += [x] if len(x) else []
        if groups:  # the mean of the benchmark columns (with one benchmark: that benchmark again)
            failed, unparsed, committed = (sum(r[k] for r in mine) for k in ("n_failed", "n_unparsed", "n_commitments"))
            acc = _stratified_average(groups, n_boot, seed, ci=ci)
            acc = (acc[0], *exact_if_constant(groups, acc[1], acc[2])) if ci else acc
            mine.append(_row(m, AVERAGE, sum(map(len, groups)), failed, unparsed, committed, acc))
        rows += mine
    return pd.DataFrame(rows)


def _row(m: str, b: str, n: int, n_failed: int, n_unparsed: int, n_commitments: int, acc: tuple) -> dict:
    return {"method": m, "benchmark": b, "n": n, "n_failed": n_failed, "n_unparsed": n_unparsed,
            "n_commitments": n_commitments, "accuracy": 100 * acc[0], "ci_lo": 100 * acc[1],
            "ci_hi": 100 * acc[2]}  # fmt: skip


def paired_test(a: np.ndarray, b: np.ndarray, n_perm: int = 10000, seed: int = 0) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if np.isin(a, (0, 1)).all() and np.isin(b, (0, 1)).all():
        return mcnemar_exact(a.astype(bool), b.astype(bool))
    return sign_flip_p(a - b, n_perm=n_perm, seed=seed)


TEST_COLUMNS = ["method", "benchmark", "best_baseline", "n_paired", "gain", "gain_lo", "gain_hi", "p_value", "p_holm"]
# p_holm: Holm's adjustment across every test of one versus_best call (a table's family of tests; docs/statistics.md)


def pivot(part: pd.DataFrame) -> tuple[list, np.ndarray]:
    """part.pivot(index="question_id", columns="method", values="correct") as (its methods, its float array), both
    axes sorted as pandas sorts them, without building the frame (the ledger pivots ~600 times)."""
    qids, q_at = np.unique(part["question_id"].to_numpy(dtype=object), return_inverse=True)
    methods, m_at = np.unique(part["method"].to_numpy(dtype=object), return_inverse=True)
    cell = q_at * len(methods) + m_at
    if len(np.unique(cell)) < len(cell):
        raise ValueError("a question_frame has one row per question and method: this one has duplicates")
    x = np.full((len(qids), len(methods)), np.nan)
    x[q_at, m_at] = part["correct"].to_numpy(dtype=float)
    return methods.tolist(), x


def _average_gain(piv: dict, t: str, benchmarks: Sequence[str], baselines: Sequence[str], *, n_boot: int, seed: int,
                  label: str = AVERAGE):  # fmt: skip
    """Against the best baseline answering on every benchmark (piv: each one's `pivot`): the stratified mean of the
    paired differences (one benchmark: their mean) with its CI and p (one benchmark: paired_test, else a weighted sign
    flip)."""
    # over each pivot's float array and column positions: indexing its columns in pandas was most of a map row's time
    cols = {b: {m: i for i, m in enumerate(piv[b][0])} for b in benchmarks}
    used = [b for b in benchmarks if t in cols[b]]
    arr = {b: piv[b][1] for b in used}
    answered = lambda m, b: m in cols[b] and not np.isnan(arr[b][:, cols[b][m]]).all()  # (no rival else)
    full = [m for m in baselines if used and all(answered(m, b) for b in used)]
    if not full:
        return None
    mean = lambda c: np.nansum(c) / n if (n := np.count_nonzero(~np.isnan(c))) else np.nan  # pandas' skipna mean
    best = max(full, key=lambda m: np.mean([mean(arr[b][:, cols[b][m]]) for b in used]))
    pairs = [p[~np.isnan(p).any(axis=1)] for p in (arr[b][:, [cols[b][t], cols[b][best]]] for b in used)]
    diffs = [p[:, 0] - p[:, 1] for p in pairs]
    if not all(len(x) for x in diffs):
        return None
    gain, lo, hi = _stratified_average(diffs, n_boot, seed)
    if label != AVERAGE or len(diffs) == 1:  # one benchmark: its Average is that column, with the same test
        p = paired_test(pairs[0][:, 0], pairs[0][:, 1], seed=seed)
    else:
        w = np.concatenate([np.full(len(x), 1.0 / (len(x) * len(diffs))) for x in diffs])
        p = sign_flip_p(np.concatenate(diffs), w=w, seed=seed)
    return dict(zip(TEST_COLUMNS, (t, label, best, int(sum(map(len, diffs))), 100 * gain, 100 * lo, 100 * hi, p)))


def versus_best(
    records: Optional[Sequence[dict]], targets: Sequence[str], baselines: Sequence[str], *, n_boot: int = 2000,
    seed: int = 0, average: bool = True, frame: Optional[pd.DataFrame] = None, per_benchmark: bool = True,
) -> pd.DataFrame:  # fmt: skip
    """Per target x benchmark: the best of `baselines` there, the paired gain (points, CI), p_value and p_holm (Holm
    across this call); `average`: the stratified mean of the paired differences over benchmarks against the best
    Average (how Table 2's Qwen gains +33.36 ARC-C, -14.53 MMLU-Pro are recovered). No pair: attrs["note"] says why."""
    if not (average or per_benchmark):
        raise ValueError("versus_best with average=False and per_benchmark=False has no row to compute")
    df = _given_frame(records, frame)
    benchmarks = list(df["benchmark"].unique())

    def pivots() -> dict:  # one pass, not one scan of the frame per benchmark
        parts = dict(iter(df.groupby("benchmark", sort=False)))
        return {b: pivot(parts.get(b, df.iloc[:0])) for b in benchmarks}

    piv = reused((id(df), *benchmarks), df, pivots)
    rows = []
    for t in targets:
        if per_benchmark:
            rows += [_average_gain(piv, t, [b], baselines, n_boot=n_boot, seed=seed, label=b) for b in benchmarks]
        if average:
            rows.append(_average_gain(piv, t, benchmarks, baselines, n_boot=n_boot, seed=seed))
    out = pd.DataFrame([r for r in rows if r is not None], columns=TEST_COLUMNS)
    out["p_holm"] = adjust_pvalues(out["p_value"].to_numpy(dtype=float))
    if out.empty:
        gone = lambda ms: [m for m in ms if not any(m in p[0] for p in piv.values())]
        why = [
            f"{k}(s) {g} not in these records"
            for k, g in (("baseline", gone(baselines)), ("method", gone(targets)))
            if g
        ]
        out.attrs["note"] = "no paired comparison: " + ("; ".join(why) or "no shared questions")
    return out


def wide(long: pd.DataFrame, tests: Optional[pd.DataFrame] = None, note: Optional[str] = None) -> pd.DataFrame:
    """Methods x benchmarks (+ Average), cells 'acc [lo, hi] (gain, p, Holm p)'; `note` explains the parentheses."""
    cells = long.assign(cell=long.apply(lambda r: _cell(r, long), axis=1))
    cols = list(long["benchmark"].unique())
    out = cells.pivot(index="method", columns="benchmark", values="cell").reindex(
        index=list(long["method"].unique()), columns=cols
    )
    extra = []
    if tests is not None and len(tests):
        for _, t in tests.iterrows():
            if t.method in out.index and t.benchmark in out.columns:
                holm = RD.holm_pvalue(t.p_holm, t.p_value)
                out.loc[t.method, t.benchmark] += f" ({t.gain:+.1f}, {RD.pvalue(t.p_value)}, Holm {holm})"
    elif tests is not None:
        extra.append(f"(paired test: {tests.attrs.get('note', 'no paired comparison')})")
    if note:
        extra.append(f"(in parentheses: {note})")
    n_row = pd.DataFrame([{c: _n_note(long[long.benchmark == c]) for c in cols}], index=["(questions per method)"])
    out = pd.concat([out, n_row] + [pd.DataFrame([dict.fromkeys(cols, "")], index=[text]) for text in extra])
    out.columns = [bench_label(c) for c in out.columns]
    return out.rename_axis("method").reset_index()


def _cell(r, long: pd.DataFrame) -> str:
    """'acc [lo, hi]'; a cell whose n differs from its column's (failed questions) gets its own n and failures."""
    text = "no answer" if r.n == 0 else f"{r.accuracy:.1f} {interval(r.ci_lo, r.ci_hi)}"
    failed, unparsed = int(r.get("n_failed", 0) or 0), int(r.get("n_unparsed", 0) or 0)
    if failed or long.loc[long.benchmark == r.benchmark, "n"].nunique() > 1:
        text += f" (n={int(r.n)}" + (f", {failed} failed)" if failed else ")")
    if unparsed:  # beside n, as failed questions are: how much of the cell's answers is no belief at all
        text += f" ({unparsed} of {int(r.get('n_commitments', 0) or 0)} commitments unparsed)"
    return text


def _n_note(column: pd.DataFrame) -> str:
    failed = int(column["n_failed"].sum()) if "n_failed" in column else 0
    text = f"n={int(column['n'].max())}" + (f", {failed} failed (not counted)" if failed else "")
    unparsed = int(column["n_unparsed"].sum()) if "n_unparsed" in column else 0
    if unparsed:
        text += f", {unparsed} of {int(column['n_commitments'].sum())} commitments unparsed"
    return text


PRINTED_TABLES = ("table1_voting_vs_mad", "table2_main_results", "table3_heterogeneity", "table4_deepseek",
                  "table5_llama8b", "table6_full_datasets")  # fmt: skip
KEY_COLUMNS = ("model", "method")


def paper_table(name: str, model: Optional[str] = None) -> pd.DataFrame:
    """The paper's printed numbers (data/paper/<name>.csv) with the printed and the recomputed Average."""
    path = P.PAPER / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"no {name}.csv in {P.PAPER} (the paper's tables: {', '.join(PRINTED_TABLES)})")
    df = pd.read_csv(path)
    if model is not None:
        df = df[df["model"] == model].drop(columns="model")
    cells = [c for c in df.columns if c not in (*KEY_COLUMNS, AVERAGE)]
    df = df.rename(columns={AVERAGE: "Average (printed)"})
    df["Average (recomputed)"] = df[cells].mean(axis=1).round(2)
    return df.reset_index(drop=True)


def paper_order(long: pd.DataFrame, table: str) -> pd.DataFrame:
    """A long table's rows with the benchmarks in the printed table's column order (others after, Average last)."""
    printed = [c for c in pd.read_csv(P.PAPER / f"{table}.csv", nrows=0).columns if c not in (*KEY_COLUMNS, AVERAGE)]
    seen = list(long["benchmark"].unique())
    rank = {b: (printed.index(k) if (k := BENCH_LABELS.get(b.removeprefix("synthetic-"))) in printed else len(printed))
            for b in seen}  # fmt: skip
    order = sorted(seen, key=lambda b: (b == AVERAGE, rank[b], seen.index(b)))
    key = long["benchmark"].map({b: i for i, b in enumerate(order)})
    methods = long["method"].map({m: i for i, m in enumerate(long["method"].unique())})
    return long.iloc[np.lexsort((key, methods))].reset_index(drop=True)  # stable: by method, then benchmark


def with_config(long: pd.DataFrame, meta: dict, *fields: str) -> pd.DataFrame:
    """Config fields (e.g. n_agents) from a run's meta.json by method label (`method` -> column `method_kind`)."""
    out, configs = long.copy(), meta["methods"]
    for f in fields:
        out["method_kind" if f == "method" else f] = out["method"].map({lab: c[f] for lab, c in configs.items()})
    return out


def artefact(name: str, profile: str) -> str:
    """The paper artefact's name, suffixed by the profile unless it is the default one."""
    return name if profile == "default" else f"{name}__{P.safe_segment(profile, 'profile')}"
