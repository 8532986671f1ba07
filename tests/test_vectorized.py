"""The batch engine (protocol.vectorized) and the vectorized synthetic population (agents.sim_vector).

(a) the same distribution as the per-agent reference (agents.sim) on 2,000 items per method, by two-sample tests;
(b) with a deterministic population (no noise) the batch engine's records equal run_question's, byte for byte;
(c) a debate's record does not depend on the batch it was answered in (size, order, which process).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.agents.sim_vector import VectorSimPopulation
from acemad_utils.experiments import runner
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.protocol.records import to_line
from acemad_utils.protocol.schema import Agent, AgentSpec, Population, Step, Turn
from acemad_utils.protocol.vectorized import run_batch

METHODS = ("single", "majority", "decentralized", "centralized", "sparse", "acemad", "self_consistency")
# Every DebateConfig field the registry and the notebooks vary, beside each method's defaults.
VARIANTS = [DebateConfig(method=m) for m in METHODS] + [
    DebateConfig(method="acemad", weighting="uniform"),
    DebateConfig(method="acemad", weighting="self_belief", rounds=2),
    DebateConfig(method="acemad", scoring_rule="log", eta=0.5, weight_exponent=1.0, rounds=5),
    DebateConfig(method="acemad", n_agents=9, rounds=5),
    DebateConfig(method="acemad", n_agents=1),
    DebateConfig(method="acemad", truth_holder=AgentSpec("Generalist", 0.6, thinking="slow")),
    DebateConfig(method="acemad", truth_holder=AgentSpec("Generalist", 0.6, model="other")),
    DebateConfig(method="decentralized", roster="acemad", history="last_round"),
    DebateConfig(method="centralized", mad_aggregator="moderator", n_agents=3),
    DebateConfig(method="centralized", mad_aggregator="plurality", rounds=4),
    DebateConfig(method="sparse", n_agents=7),
    DebateConfig(method="majority", n_agents=10, roster="acemad"),
    DebateConfig(method="single", single_runs=3, repeat_offset=1_000_000),
]


# ----------------------------------------------------------------------------- two-sample tests (numpy only)
def ks_pvalue(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov test, asymptotic p-value (Stephens' correction)."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    x = np.concatenate([a, b])
    d = np.abs(np.searchsorted(a, x, side="right") / len(a) - np.searchsorted(b, x, side="right") / len(b)).max()
    ne = len(a) * len(b) / (len(a) + len(b))
    lam = (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d
    return min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * (k * lam) ** 2) for k in range(1, 101))))


def chi2_pvalue(a, b) -> float:
    """Chi-square test that two samples of category labels come from one distribution (2 x C table)."""
    cats = sorted(set(a) | set(b), key=str)
    table = np.array([[sum(x == c for x in s) for c in cats] for s in (a, b)], dtype=float)
    table = table[:, table.sum(axis=0) > 0]
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    stat, df = float(((table - expected) ** 2 / expected).sum()), table.shape[1] - 1
    if df == 0:
        return 1.0
    # regularized upper incomplete gamma Q(df/2, stat/2) by its series (stat is moderate here)
    s, x = df / 2, stat / 2
    term = total = 1.0 / s
    for n in range(1, 2000):
        term *= x / (s + n)
        total += term
    return max(0.0, 1.0 - math.exp(s * math.log(x) - x - math.lgamma(s) + math.log(total)) if x > 0 else 1.0)


def _summaries(recs: list[dict]) -> dict[str, list]:
    """What the test compares: final answers, agents' answers and beliefs in the truth (first and last round,
    first and last agent: crowd and truth-holder), peer predictions and scores (AceMAD)."""
    out: dict[str, list] = {"final": [str(r["final"]["answer"]) + str(r["final"]["correct"]) for r in recs]}
    for r in recs:
        truth = r["labels"].index(r["answer"])
        if "runs" in r:
            out.setdefault("run belief", []).extend(e["p"][truth] for e in r["runs"])
            out.setdefault("run answer", []).extend(e["answer"] == r["answer"] for e in r["runs"])
            continue
        for t in {0, len(r["rounds"]) - 1}:
            for i in {0, len(r["rounds"][t]) - 1}:
                e = r["rounds"][t][i]
                out.setdefault(f"belief r{t} a{i}", []).append(e["p"][truth])
                out.setdefault(f"answer r{t} a{i}", []).append(int(np.argmax(e["p"]) == truth))
                if e["q"] is not None:
                    out.setdefault(f"q r{t} a{i}", []).append(e["q"][truth])
                    out.setdefault(f"score r{t} a{i}", []).append(e["score"])
                    out.setdefault(f"weight r{t} a{i}", []).append(e["weight"])
        if "moderator" in r:
            out.setdefault("moderator belief", []).extend(e["p"][truth] for e in r["moderator"])
    return out


# Every method with the default population, and AceMAD under the population's named variants.
DISTRIBUTION_CASES = [(DebateConfig(method=m), SimParams()) for m in METHODS] + [
    (DebateConfig(method="acemad"), SimParams(knowledge_link=0.0)),
    (DebateConfig(method="acemad"), SimParams(calibration_by="persona")),
    (DebateConfig(method="acemad", truth_holder=AgentSpec("Generalist", 0.6, thinking="slow")), SimParams()),
    (DebateConfig(method="decentralized", roster="acemad"), SimParams(crowd_insight=0.2)),
    (DebateConfig(method="acemad"), SimParams(crowd_copy=1.0, crowd_insight=0.2)),  # near-copy Generalists
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "cfg, params",
    DISTRIBUTION_CASES,
    ids=[
        f"{c.label}-{p.knowledge_link}-{p.calibration_by}-{p.crowd_insight}-{p.crowd_copy}"
        for c, p in DISTRIBUTION_CASES
    ],
)
def test_the_vectorized_population_has_the_reference_distribution(cfg, params):
    """2,000 items per method, the same seed: every compared quantity passes a two-sample test (KS for beliefs,
    predictions, scores, weights; chi-square for answers) at p > 0.001 / the number of quantities compared (one
    case compares ~20: at 0.001 each, one in fifty identical populations would fail by chance; a real difference
    at 2,000 items gives p far below either)."""
    items = make_items(2000, k=4, seed=11)
    ref = [run_question(q, SimPopulation(params, seed=5), cfg) for q in items]
    vec = run_batch(items, VectorSimPopulation(params, seed=5), cfg, [0] * len(items))
    a, b = _summaries(ref), _summaries(vec)
    assert a.keys() == b.keys()
    failed = {}
    for name in a:
        discrete = name == "final" or name.startswith("answer") or name == "run answer"
        p = chi2_pvalue(a[name], b[name]) if discrete else ks_pvalue(a[name], b[name])
        if p < 1e-3 / len(a):
            failed[name] = p
    assert not failed, f"{cfg.label}: the batch engine's distribution differs from agents.sim's: {failed}"


def test_the_two_sample_tests_can_fail():
    """The tests above have power: a population with another calibration is told apart on the same items."""
    items = make_items(2000, k=4, seed=11)
    cfg = DebateConfig(method="acemad")
    a = _summaries(run_batch(items, VectorSimPopulation(seed=5), cfg, [0] * len(items)))
    b = _summaries(run_batch(items, VectorSimPopulation(SimParams(crowd_calibration=0.2), seed=5), cfg, [0] * 2000))
    assert ks_pvalue(a["q r0 a0"], b["q r0 a0"]) < 1e-6
    assert chi2_pvalue(["x"] * 100 + ["y"] * 100, ["x"] * 150 + ["y"] * 50) < 1e-6
    assert ks_pvalue(np.linspace(0, 1, 500), np.linspace(0, 1, 500) ** 2) < 1e-6


# ----------------------------------------------------------------------------- (b) a deterministic population
def _start(qid: str, agent: int, draw: int, k: int) -> np.ndarray:
    """A deterministic initial belief from (question, agent, draw)."""
    h = hashlib.sha256(f"{qid}|{agent}|{draw}".encode()).digest()
    x = np.array([1.0 + b for b in h[:k]])
    return x / x.sum()


class _DetAgent(Agent):
    """The synthetic agent's rules without its noise: it commits its belief, moves toward the mean stance of
    the peers it saw last round (the moderator: this round), predicts (p + seen) / 2."""

    def __init__(self, spec, q, index, draw, alpha):
        self.spec, self.index, self.alpha = spec, index, alpha
        self.belief = _start(q.id, index, draw, len(q.options))

    def act(self, turn: Turn) -> Step:
        r = turn.round if self.index == -1 else turn.round - 1
        prev = [m.stance for m in turn.history if m.round == r and m.agent != self.index and m.stance is not None]
        seen = np.add.reduce(np.asarray(prev), axis=0) / len(prev) if prev else None
        if seen is not None:
            self.belief = (1 - self.alpha) * self.belief + self.alpha * seen
        p = self.belief
        q = (p + (seen if seen is not None else np.full_like(p, 1 / len(p)))) / 2 if turn.want_peer_prediction else None
        return Step(message=f"{self.index}:{int(np.argmax(p))}", p=p, q=q, info={"stance": p})


class _DetBatch:
    def __init__(self, specs, questions, repeats, moderator):
        self.specs, self.moderator = specs, moderator
        idx = [-1] if moderator else range(len(specs))
        k = len(questions[0].options)
        self.belief = np.array([[_start(q.id, i, r, k) for i in idx] for q, r in zip(questions, repeats)])
        self.alpha = np.array([_alpha(s, moderator) for s in specs])[None, :, None]
        self.index = list(idx)

    def act(self, t, seen, want_q):
        has = ~np.isnan(seen[..., :1])
        self.belief = np.where(has, (1 - self.alpha) * self.belief + self.alpha * np.nan_to_num(seen), self.belief)
        p = self.belief
        q = (p + np.where(has, np.nan_to_num(seen), 1 / p.shape[-1])) / 2 if want_q else None
        return p, q

    def messages(self, P):
        return [[f"{i}:{a}" for i, a in zip(self.index, row)] for row in P.argmax(axis=-1).tolist()]


def _alpha(spec, moderator: bool) -> float:
    return 1.0 if moderator else (0.1 if spec.persona == "Skeptic" else 0.3)


class DetPopulation(Population):
    synthetic, name, batched = True, "deterministic", True

    def agents(self, specs, question, repeat=0):
        return [_DetAgent(s, question, i, repeat, _alpha(s, False)) for i, s in enumerate(specs)]

    def moderator(self, question, repeat=0):
        return _DetAgent(AgentSpec("Generalist", 0.1), question, -1, repeat, 1.0)

    def batch_agents(self, specs, questions, repeats):
        return _DetBatch(list(specs), questions, repeats, False)

    def batch_moderator(self, questions, repeats):
        return _DetBatch([AgentSpec("Generalist", 0.1)], questions, repeats, True)


ITEMS = make_items(30, k=4, seed=2) + make_items(20, k=3, seed=3, benchmark="three") + make_items(5, k=10, seed=4)


@pytest.mark.parametrize("cfg", VARIANTS, ids=lambda c: c.label + c.hash)
def test_the_batch_engine_stores_what_run_question_stores(cfg):
    pop = DetPopulation()
    repeats = [i % 3 for i in range(len(ITEMS))]
    batch = run_batch(ITEMS, pop, cfg, repeats)
    one = [run_question(q, pop, cfg, r) for q, r in zip(ITEMS, repeats)]
    assert [to_line(r) for r in batch] == [to_line(r) for r in one]


# ----------------------------------------------------------------------------- (c) no dependence on the batch
@pytest.mark.parametrize("cfg", VARIANTS[:6] + VARIANTS[8:9], ids=lambda c: c.label)
def test_a_record_does_not_depend_on_its_batch(cfg):
    pop = VectorSimPopulation(seed=9)
    repeats = [0] * len(ITEMS)
    whole = [to_line(r) for r in run_batch(ITEMS, pop, cfg, repeats)]
    backwards = [to_line(r) for r in run_batch(ITEMS[::-1], pop, cfg, repeats)][::-1]
    alone = [to_line(run_batch([q], pop, cfg, [0])[0]) for q in ITEMS[::7]]  # as another process would
    assert whole == backwards
    assert whole[::7] == alone


def test_runs_in_batches_of_7_and_of_600_write_the_same_file(tmp_outputs, monkeypatch):
    items = make_items(700, k=4, seed=6)
    cfgs = [DebateConfig(method="acemad"), DebateConfig(method="centralized"), DebateConfig(method="single")]
    files = []
    for size in (7, 600):
        monkeypatch.setattr(runner, "BATCH", size)
        d = runner.run_experiment(f"batch{size}", items, cfgs, VectorSimPopulation(seed=1), repeats=2, progress=False)
        files.append((d / "transcripts.jsonl.gz").read_bytes())
    assert files[0] == files[1]


def _shape(x):
    """A record's structure: its keys and value types, recursively (lists by their first element)."""
    if isinstance(x, dict):
        return {k: _shape(v) for k, v in sorted(x.items())}
    if isinstance(x, list):
        return [_shape(x[0])] if x else []
    return type(x).__name__


@pytest.mark.parametrize("cfg", VARIANTS, ids=lambda c: c.label + c.hash)
def test_the_vectorized_population_stores_the_reference_schema(cfg):
    items = make_items(8, k=4, seed=8)
    vec = run_batch(items, VectorSimPopulation(seed=2), cfg, [0] * len(items))
    ref = [run_question(q, SimPopulation(seed=2), cfg) for q in items]
    assert [_shape(r) for r in vec] == [_shape(r) for r in ref]
