"""The synthetic population as a model of knowledge (docs/population.md): an agent's peer-prediction skill follows
from its latent state on the item, a persona only changes how likely each state is; the fitted parameters."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from acemad_utils.agents.sim import STATES, SimParams, SimPopulation, items, make_items
from acemad_utils.data.paths import ROOT
from acemad_utils.data.sim_params import FITTED, ORIGINAL
from acemad_utils.experiments import fit, subsets
from acemad_utils.experiments.assumption_map import EVIDENCE
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_batch
from acemad_utils.protocol.schema import SYNTHETIC_LABEL, AgentSpec
from acemad_utils.report import figures
from acemad_utils.report.save import save_table

ITEMS = make_items(300, k=4, seed=21)
ROSTER = DebateConfig(method="acemad").specs()  # 4 Generalists, 1 Skeptic


def agents(params: SimParams, items=ITEMS, specs=ROSTER, seed=3):
    """The latent agents of AceMAD's debates on `items` (the engine draws the very same: keyed by debate)."""
    return SimPopulation(params, seed=seed).batch_agents(specs, items, [0] * len(items))


def round1(params: SimParams, items=ITEMS) -> list[tuple[str, str, bool, float, float]]:
    """(persona, state, skilled, calibration, round-1 score) of every agent of an AceMAD debate on every item."""
    recs = run_batch(items, SimPopulation(params, seed=3), DebateConfig(method="acemad"), [0] * len(items))
    b = agents(params, items)
    return [(ROSTER[i].persona, STATES[b.state[d, i]], bool(b.skilled[d, i]), float(b.cal[d, i, 0]), e["score"])
            for d, rec in enumerate(recs) for i, e in enumerate(rec["rounds"][0])]  # fmt: skip


def scores(rows, persona: str, state: str) -> np.ndarray:
    return np.array([s for p, st, _, _, s in rows if p == persona and st == state])


def test_answer_distribution_per_persona_is_the_sum_of_its_states():
    params, q = SimParams(), ITEMS[0]
    (_, _, pi), specs = items([q], params, 3), [AgentSpec("Skeptic", 0.6), AgentSpec("Generalist", 0.1),
                                              AgentSpec("Generalist", 0.6, "slow")]  # fmt: skip
    for spec, (g, ins, trapped, naive) in zip(specs, agents(params, [q], specs).states[0]):
        assert np.isclose(g + ins + trapped + naive, 1.0) and min(g, ins, trapped, naive) >= 0
        # the earlier persona model's P(trap | not guessing): pi * (1 - insight) for a Skeptic, pi for the crowd
        assert np.isclose(trapped / (1 - g), pi[0] * (1 - params.p_insight(spec)))
        assert np.isclose(ins, (1 - g) * params.p_insight(spec))
    no_insight = SimParams(crowd_insight=0.0)  # the original crowd: a Generalist never sees through the trap
    assert agents(no_insight, [q], [AgentSpec("Generalist", 0.1)]).states[0, 0, 1] == 0.0
    # the baselines' Assistant is a crowd agent: a homogeneous roster has no truth-holder unless crowd_insight > 0
    b = agents(no_insight, ITEMS[:50], DebateConfig(method="decentralized").specs())
    assert (b.alpha == params.crowd_susceptibility).all() and (b.cal == params.crowd_calibration).all()
    pair = agents(params, [q], [AgentSpec("Assistant", 0.7), AgentSpec("Generalist", 0.7)])
    np.testing.assert_allclose(pair.states[0, 0], pair.states[0, 1])


def test_the_trap_is_a_wrong_option_stable_and_shared_so_crowd_errors_correlate():
    truth, trap, pi = items(ITEMS[:50], SimParams(), 0)
    assert (trap != truth).all() and ((0 <= pi) & (pi <= 1)).all()
    np.testing.assert_array_equal(items(ITEMS[49:50], SimParams(), 0)[1], trap[49:])  # a question's own, in any batch
    # P(agent j wrong | agent i wrong) > P(agent j wrong): the shared trap propensity couples them.
    qs = make_items(1500, k=4, seed=11)
    recs = run_batch(qs, SimPopulation(seed=2), DebateConfig(method="majority", roster="acemad"), [0] * 1500)
    truth = np.array([r["labels"].index(r["answer"]) for r in recs])
    wrong = np.array([[np.argmax(e["p"]) for e in r["rounds"][0][:4]] for r in recs]) != truth[:, None]
    a, b = wrong[wrong[:, 0], 1], wrong[~wrong[:, 0], 1]
    pooled = wrong[:, 1].mean()  # two-proportion z: about N(0, 1) if errors were independent
    assert (a.mean() - b.mean()) / np.sqrt(pooled * (1 - pooled) * (1 / len(a) + 1 / len(b))) > 4


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_a_skeptic_that_fell_for_the_trap_predicts_false_consensus_under_knowledge():
    rows = round1(SimParams())
    trapped = [r for r in rows if r[0] == "Skeptic" and r[1] == "trapped"]
    assert len(trapped) > 20 and all(not sk and cal == SimParams().crowd_calibration for _, _, sk, cal, _ in trapped)
    # Like a trapped crowd agent it predicts that its peers think as it does: q = p in round 1 (crowd_calibration 0).
    recs = run_batch(ITEMS[:60], SimPopulation(seed=3), DebateConfig(method="acemad"), [0] * 60)
    b = agents(SimParams(), ITEMS[:60])
    for d, rec in enumerate(recs):
        for i, e in enumerate(rec["rounds"][0]):
            if STATES[b.state[d, i]] == "trapped":
                np.testing.assert_allclose(e["q"], e["p"])
    # The persona variant keeps the earlier rule: the SAME trapped Skeptics (same seed: the same states and round-1
    # beliefs) become skilled predictors and score higher, paired agent by agent.
    persona = round1(SimParams(calibration_by="persona"))
    assert [r[:2] for r in persona] == [r[:2] for r in rows]
    assert all(cal == SimParams().insight_calibration for p, _, _, cal, _ in persona if p == "Skeptic")
    gain = np.array([b[4] - a[4] for a, b in zip(rows, persona) if a[0] == "Skeptic" and a[1] == "trapped"])
    assert gain.mean() > 4 * gain.std(ddof=1) / np.sqrt(len(gain)), gain.mean()


def test_a_generalist_in_the_insight_state_is_skilled():
    params = SimParams(crowd_insight=0.3)
    b = agents(params, ITEMS[:100])
    crowd = np.array([s.persona == "Generalist" for s in ROSTER])[None, :] & np.ones((100, 1), bool)
    insight, others = crowd & (b.state == STATES.index("insight")), crowd & (b.state != STATES.index("insight"))
    assert insight.sum() > 50 and others.sum() > 50
    assert b.skilled[insight].all() and (b.cal[insight] == params.insight_calibration).all()
    assert (b.alpha[insight] == params.insight_susceptibility).all() and not b.skilled[others].any()
    rows = round1(params, ITEMS[:150])
    hi, lo = scores(rows, "Generalist", "insight"), scores(rows, "Generalist", "trapped")
    assert (hi.mean() - lo.mean()) / np.sqrt(hi.var(ddof=1) / len(hi) + lo.var(ddof=1) / len(lo)) > 4  # Welch z


def skill_table(link: float) -> np.ndarray:
    """2 x 2 counts (insight state or not) x (skilled or not) over many agents of AceMAD's roster."""
    b = agents(SimParams(knowledge_link=link, crowd_insight=0.2), make_items(1500, k=4, seed=9), seed=8)
    ins = b.state == STATES.index("insight")
    return np.array([[(~ins & ~b.skilled).sum(), (~ins & b.skilled).sum()], [(ins & ~b.skilled).sum(),
                     (ins & b.skilled).sum()]])  # fmt: skip


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_at_knowledge_link_zero_skill_is_independent_of_state():
    t0 = skill_table(0.0)
    # A two-proportion z-test of independence (P(skilled | insight) = P(skilled | not)) that fails if skill still
    # follows the state: |z| > 3.3 has probability 1e-3 under independence.
    p1, p0 = t0[1, 1] / t0[1].sum(), t0[0, 1] / t0[0].sum()
    pooled = t0[:, 1].sum() / t0.sum()
    z = (p1 - p0) / np.sqrt(pooled * (1 - pooled) * (1 / t0[1].sum() + 1 / t0[0].sum()))
    assert abs(z) < 3.3, (t0, z)
    t1 = skill_table(1.0)
    assert t1[0, 1] == 0 and t1[1, 0] == 0  # link 1: skilled exactly when in the insight state
    # The expected number of skilled predictors is the same at every link (only WHO is skilled changes).
    n0, n1 = t0[:, 1].sum(), t1[:, 1].sum()
    assert abs(n0 - n1) < 4 * np.sqrt(n1), (n0, n1)


@pytest.mark.parametrize(
    "bad", [dict(knowledge_link=1.5), dict(calibration_by="label"), dict(crowd_insight=-0.1), dict(insight=True)]
)
def test_params_are_checked(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        SimParams(**bad)
    d = SimPopulation(SimParams(knowledge_link=0.0)).describe()["params"]  # the run's meta names every parameter
    assert d["knowledge_link"] == 0.0 and d["calibration_by"] == "knowledge" and "insight_calibration" in d


def test_near_copies_share_their_specs_first_agent_state_and_a_unique_agent_never_copies():
    specs = [AgentSpec("Generalist", 0.0)] * 4 + [AgentSpec("Skeptic", 0.0)]

    def answers(copy: float) -> np.ndarray:  # (items, agents): each agent's answer before reading anyone
        params = SimParams(crowd_copy=copy, crowd_insight=0.3, insight=0.3, explore_base=0.2)
        return agents(params, ITEMS, specs, seed=5).belief.argmax(-1)

    copies, independent = answers(1.0), answers(0.0)
    assert (copies[:, :4] == copies[:, :1]).all()  # temperature 0, crowd_copy 1: one state for the four
    assert (independent[:, :4] != independent[:, :1]).any(axis=1).mean() > 0.2  # without copies they differ
    assert (copies[:, 4] != copies[:, 0]).any()  # the Skeptic (the only agent of its spec) draws its own
    assert SimParams(crowd_copy=0.5).copy(0.1) == pytest.approx(0.45) and SimParams(crowd_copy=1.0).copy(1.5) == 0


def test_the_default_population_is_the_committed_fit_and_the_original_is_a_named_variant(tmp_outputs):
    assert {k: getattr(SimParams(), k) for k in FITTED} == FITTED
    fitted, original = Setup(population="fitted"), Setup(population="original")
    assert fitted.population.params == SimParams()
    assert {k: getattr(original.population.params, k) for k in ORIGINAL} == ORIGINAL
    assert original.slug != fitted.slug  # the original selects other items: subsets of its own
    with pytest.raises(ValueError, match="POPULATION"):
        Setup(population="mine")


def test_the_original_population_is_named_in_figures_tables_and_the_run_line_not_called_a_stand_in(tmp_outputs):
    """A figure or table of POPULATION=original says which synthetic population made it; the fitted default keeps
    the plain label, and "stand-in" is notebook 07's."""
    fitted, original, standin = Setup(), Setup(population="original"), Setup(model="DeepSeek-V3.1")
    src = figures.source_label(original.synthetic, original.model)
    assert src == "SYNTHETIC population 'original' (no LLM)"
    assert "POPULATION original" in original.describe() and "stand-in" not in original.describe()
    assert figures.source_label(fitted.synthetic, fitted.model) == SYNTHETIC_LABEL
    assert "POPULATION" not in fitted.describe()
    assert figures.source_label(standin.synthetic, standin.model) == "SYNTHETIC stand-in for DeepSeek-V3.1 (no LLM)"
    table = pd.DataFrame({"method": ["AceMAD"], "accuracy": [50.0]})
    other = figures.source_label(standin.synthetic, standin.model)
    for source, label in ((src, src), (other, other), ("", SYNTHETIC_LABEL), ("model: gpt-4o-mini", SYNTHETIC_LABEL)):
        csv = save_table(table, "t", synthetic=True, source=source).with_suffix(".csv")
        assert pd.read_csv(csv)["source"].tolist() == [label]  # as the figures say, and never a model's name


def test_the_committed_fit_reproduces_its_baseline_cells():
    """Re-simulating the committed fitted population with the fit's own items and seed gives the committed cells
    (the search that found the values is `python -m acemad_utils.experiments.fit`)."""
    saved = fit.committed()
    again = fit.cells(SimParams(), n_items=saved["n_items_per_benchmark"], seed=saved["seed"])
    assert list(again["cell"]) == [c["cell"] for c in saved["cells"]]
    np.testing.assert_allclose(again["simulated"], [c["simulated"] for c in saved["cells"]], atol=1e-3)
    np.testing.assert_allclose(again["paper"], [c["paper"] for c in saved["cells"]], atol=1e-9)
    # the fit's targets are the paper's printed cells: Table 1's gaps are differences of its printed averages
    t1 = {c["cell"]: c["paper"] for c in saved["cells"] if c["table"] == "Table 1"}
    assert t1["Sparse MAD - Majority Voting"] == pytest.approx(t1["Sparse MAD"] - t1["Majority Voting"])


def test_the_pattern_search_finds_a_minimum_in_the_box():
    target = np.array([0.3, 0.8, 0.0])
    x, fx = fit.search(np.full(3, 0.5), lambda x: float(np.sum((x - target) ** 2)), log=lambda _: None)
    np.testing.assert_allclose(x, target, atol=1 / 32)
    assert fx < 1e-3


def test_docs_population_shows_the_committed_fit():
    assert fit.doc_block() in (ROOT / "docs" / "population.md").read_text(encoding="utf-8")


def test_a_subset_another_synthetic_population_selected_is_not_reused(smoke_outputs, monkeypatch):
    S = Setup(benchmarks=["bbh"], n_items=30, workers=1)
    kept = S.subset("bbh")  # built by the fitted population, which reads it back
    name, qs = S.bench_name("bbh"), S.questions("bbh")
    assert subsets.load_subset(name, S.slug, qs, S.population)[: len(kept)] == kept
    with pytest.raises(FileNotFoundError, match="another synthetic population"):
        subsets.load_subset(name, S.slug, qs, SimPopulation(SimParams(**ORIGINAL), seed=S.seed))


def test_readme_and_docs_cite_every_study_the_map_places():
    ids = [re.search(r"\d{4}\.\d{5}|Prelec", ref).group(0) for ref, *_ in EVIDENCE]
    for page in ("README.md", "docs/population.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert [i for i in ids if i not in text] == [], page


def test_a_population_without_texts_draws_the_same_numbers():
    recs = [
        run_batch(ITEMS[:40], SimPopulation(seed=3, texts=texts), DebateConfig(method="acemad"), [0] * 40)
        for texts in (True, False)
    ]
    on, off = ([{**e, "message": None} for r in rs for rnd in r["rounds"] for e in rnd] for rs in recs)
    assert on == off and [r["final"] for r in recs[0]] == [r["final"] for r in recs[1]]
    assert {e["message"] for r in recs[1] for rnd in r["rounds"] for e in rnd} == {""}
    assert recs[0][0]["rounds"][0][0]["message"]
