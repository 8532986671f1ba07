"""The paper's experiment as the default: rosters, Table 2's gain, Centralized MAD's decision, the Single Agent's
sampling, shared subsets, the uniform ablation, Sparse at small N and the paper's tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.data import paths as P
from acemad_utils.experiments import subsets as SS
from acemad_utils.experiments.registry import MAD_METHODS, PAPER_TABLES, table_configs
from acemad_utils.experiments.setup import SIM_STANDINS, Setup
from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import GENERALIST, NAIVE_AGENT, SKEPTIC, DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.protocol.schema import Agent, Population, Step, Turn
from acemad_utils.report import rescoring as A
from acemad_utils.report import tables as TB
from acemad_utils.report.figures import source_label

ITEMS = make_items(120, k=4, seed=21)
BASELINES = ("single", "majority", "decentralized", "centralized", "sparse")


@pytest.mark.parametrize("method", BASELINES)
def test_baselines_get_one_homogeneous_roster_of_the_naive_agent(method):
    specs = DebateConfig(method=method).specs()
    assert specs == [NAIVE_AGENT] * 5
    assert NAIVE_AGENT.persona == "Assistant" and NAIVE_AGENT.temperature == 0.7  # paper l.604
    # The old behaviour is a named option, with a label that says so.
    cfg = DebateConfig(method=method, roster="acemad")
    assert cfg.specs() == [GENERALIST] * 4 + [SKEPTIC]
    assert cfg.label == f"{DebateConfig(method=method).label} (AceMAD roster)"


def test_acemad_keeps_its_crowd_and_truth_holder_roster():
    assert DebateConfig(method="acemad").specs() == [GENERALIST] * 4 + [SKEPTIC]
    assert DebateConfig(method="acemad", weighting="uniform").specs() == [GENERALIST] * 4 + [SKEPTIC]
    homo = DebateConfig(method="acemad", roster="homogeneous")
    assert homo.specs() == [NAIVE_AGENT] * 5 and homo.label == "AceMAD (homogeneous, T=3)"
    with pytest.raises(ValueError, match="roster='crowd'"):
        DebateConfig(method="majority", roster="crowd")


class ScopeRecorder(Population, Agent):
    """A population whose agents answer A and record the cache scope and the spec of every call in its `calls`."""

    def __init__(self, spec=None, calls=None):
        self.spec, self.calls = spec, [] if calls is None else calls

    def agents(self, specs, question, repeat=0):
        return [ScopeRecorder(s, self.calls) for s in specs]

    def act(self, turn: Turn) -> Step:
        self.calls.append((turn.scope, self.spec))
        return Step(message="", p=np.eye(len(turn.question.options))[0])


def test_single_agent_runs_five_independent_samples_of_the_naive_agent():
    pop = ScopeRecorder()
    rec = run_question(ITEMS[0], pop, DebateConfig(method="single"))
    scopes = [s for s, _ in pop.calls]
    assert len(rec["runs"]) == 5 and len(set(scopes)) == 5  # five cache scopes: five samples, not one replayed
    assert {spec for _, spec in pop.calls} == {NAIVE_AGENT}
    assert {r["temperature"] for r in rec["runs"]} == {0.7}
    # The subset construction uses the same agent but its own draws: the baseline never replays them.
    pop2 = ScopeRecorder()
    run_question(ITEMS[0], pop2, SS.subset_config())
    assert {spec for _, spec in pop2.calls} == {NAIVE_AGENT}
    assert not set(scopes) & {s for s, _ in pop2.calls}


def _recs(acc: dict) -> list[dict]:
    """Hand-built records: acc[benchmark][method] = list of 0/1 per question."""
    return [
        {"question_id": f"{b}/{i}", "benchmark": b, "method": m, "status": "ok", "final": {"correct": bool(x)}}
        for b, by_m in acc.items()
        for m, xs in by_m.items()
        for i, x in enumerate(xs)
    ]


def test_gain_is_over_the_best_mad_baseline_and_the_average_over_the_best_mad_average():
    n, labels = 10, [*(DebateConfig(method=m).label for m in BASELINES), "AceMAD (T=3)"]
    # right answers out of n per method (in `labels` order): Single Agent and Majority Voting beat every MAD, as
    # for Qwen in the paper's Table 2
    right = {"b1": (9, 8, 5, 1, 1, 8), "b2": (9, 9, 2, 6, 4, 4)}
    acc = {b: {m: [1] * k + [0] * (n - k) for m, k in zip(labels, ks)} for b, ks in right.items()}
    recs = _recs(acc)
    mads = [DebateConfig(method=m).label for m in MAD_METHODS]
    t = TB.versus_best(recs, ["AceMAD (T=3)"], mads).set_index("benchmark")
    assert t.loc["b1", "best_baseline"] == "Decentralized MAD" and t.loc["b1", "gain"] == pytest.approx(30.0)
    assert t.loc["b2", "best_baseline"] == "Centralized MAD" and t.loc["b2", "gain"] == pytest.approx(-20.0)
    # Average: against the MAD with the best Average (Decentralized 35 vs Centralized 35 vs Sparse 25 ->
    # a tie goes to the first listed), as the mean over benchmarks of the paired differences.
    assert t.loc[TB.AVERAGE, "best_baseline"] == "Decentralized MAD"
    assert t.loc[TB.AVERAGE, "gain"] == pytest.approx(((8 - 5) + (4 - 2)) / 2 / n * 100)
    assert 0 < t.loc[TB.AVERAGE, "p_value"] <= 1 and t.loc[TB.AVERAGE, "n_paired"] == 2 * n
    # Against every baseline the same AceMAD loses: that is the second, labelled column of notebook 03.
    every = TB.versus_best(recs, labels[-1:], labels[:-1]).set_index("benchmark")
    assert every.loc["b1", "best_baseline"] == "Single Agent" and every.loc["b1", "gain"] == pytest.approx(-10.0)


def test_a_baseline_whose_every_call_failed_is_not_the_best_baseline():
    # a real run under load: Decentralized MAD's records all failed; the gain is over the MADs that answered
    recs = _recs({"b1": {"AceMAD (T=3)": [1, 1, 0, 1], "Sparse MAD": [1, 0, 0, 0]}})
    recs += [{"question_id": f"b1/{i}", "benchmark": "b1", "method": "Decentralized MAD", "status": "failed"}
             for i in range(4)]  # fmt: skip
    t = TB.versus_best(recs, ["AceMAD (T=3)"], ["Decentralized MAD", "Sparse MAD"]).set_index("benchmark")
    assert list(t.best_baseline) == ["Sparse MAD", "Sparse MAD"] and t.loc[TB.AVERAGE, "gain"] == pytest.approx(50.0)


def test_a_frame_built_once_gives_the_tables_its_records_give_and_the_map_reads_a_part():
    # notebook 09 builds tables.question_frame once per map point and hands it to five table calls (frame=)
    rng = np.random.default_rng(3)
    methods = ["AceMAD (T=3)", "Uniform", "Decentralized MAD", "Centralized MAD"]
    recs = _recs({b: {m: list(rng.integers(0, 2, 12)) for m in methods} for b in ("b1", "b2")})
    recs.append({"question_id": "b1/0", "benchmark": "b1", "method": "Uniform", "status": "failed"})
    frame = TB.question_frame(recs)
    pd.testing.assert_frame_equal(
        TB.versus_best(None, methods[:2], methods[2:], n_boot=200, frame=frame),
        TB.versus_best(recs, methods[:2], methods[2:], n_boot=200),
    )
    pd.testing.assert_frame_equal(
        TB.accuracy_long(None, methods=methods[1:], n_boot=200, frame=frame),
        TB.accuracy_long(recs, methods=methods[1:], n_boot=200),
    )
    # what notebook 09's map reads, alone: the Average rows of the tests, the accuracies without their bootstrap
    every = TB.versus_best(recs, methods[:2], methods[2:], n_boot=200)
    avg = TB.versus_best(recs, methods[:2], methods[2:], n_boot=200, per_benchmark=False)
    assert list(avg.benchmark) == [TB.AVERAGE] * 2
    pd.testing.assert_frame_equal(
        avg.drop(columns="p_holm"),
        every[every.benchmark == TB.AVERAGE].drop(columns="p_holm").reset_index(drop=True),
    )
    with pytest.raises(ValueError):
        TB.versus_best(recs, methods[:1], methods[2:], average=False, per_benchmark=False)
    long, bare = (TB.accuracy_long(recs, n_boot=200, ci=ci) for ci in (True, False))
    pd.testing.assert_frame_equal(bare.drop(columns=["ci_lo", "ci_hi"]), long.drop(columns=["ci_lo", "ci_hi"]))
    assert bare[["ci_lo", "ci_hi"]].isna().all().all() and long[["ci_lo", "ci_hi"]].notna().all().all()
    for records, f in ((recs, frame), (None, None)):  # a frame never silently stands in for other records
        with pytest.raises(ValueError):
            TB.versus_best(records, methods[:1], methods[2:], frame=f)
        with pytest.raises(ValueError):
            TB.accuracy_long(records, frame=f)


def test_frames_reused_builds_a_lists_frame_once_inside_the_block_only(monkeypatch):
    # the claims ledger tables the same runs' records ~30 times: inside frames_reused each list is framed once
    recs = _recs({"b1": {"A": [1, 0, 1, 1], "B": [0, 0, 1, 0]}})
    other = [dict(r) for r in recs]  # equal records, another list: its own frame
    built, frame = [], TB.question_frame
    monkeypatch.setattr(TB, "question_frame", lambda records: built.append(records) or frame(records))
    with TB.frames_reused():
        first = TB.versus_best(recs, ["A"], ["B"], n_boot=50)
        pd.testing.assert_frame_equal(TB.versus_best(recs, ["A"], ["B"], n_boot=50), first)
        TB.accuracy_long(recs, n_boot=50)
        TB.accuracy_long(other, n_boot=50)
    assert len(built) == 2 and built[0] is recs and built[1] is other
    TB.accuracy_long(recs, n_boot=50)  # after the block: built again
    assert len(built) == 3


def test_an_empty_comparison_gives_a_message_in_the_table_never_a_crash():
    # The local profile's N_TABLE=3: the labels carry N=3, so a hand-typed "Majority Voting" matches nothing.
    labels = [DebateConfig(method=m, n_agents=3).label for m in ("majority", "decentralized")]
    recs = _recs({"b1": {labels[0]: [1, 0, 0], labels[1]: [1, 1, 0]}})
    tests = TB.versus_best(recs, labels[1:], ["Majority Voting"])
    assert tests.empty and list(tests.columns) == TB.TEST_COLUMNS
    long = TB.accuracy_long(recs)
    merged = long.merge(tests, how="left", on=["method", "benchmark"])  # no KeyError 'method'
    assert len(merged) == len(long)
    shown = TB.wide(long, tests)
    assert shown["method"].str.contains("no paired comparison").any()
    assert shown["method"].str.contains("'Majority Voting'").any()
    # The registry way: labels from configs always match.
    ok = TB.versus_best(recs, labels[1:], labels[:1])
    assert not ok.empty and set(ok["best_baseline"]) == {labels[0]}


def _mean_belief_answer(r: dict, seed: int) -> str:
    """The argmax of a record's mean final belief, with the tie-break keys of a run with this seed."""
    keys = B.tiebreak_keys(seed, [r["question_id"]], len(r["labels"]))[0]
    return r["labels"][int(B.argmax_tiebreak(np.array([e["p"] for e in r["rounds"][-1]]).mean(0), keys)[0])]


def test_centralized_decides_by_the_debaters_mean_belief_and_stores_the_moderator():
    pop = SimPopulation(seed=4)
    cfg = DebateConfig(method="centralized", rounds=2)
    recs = [run_question(q, pop, cfg) for q in ITEMS[:60]]
    for r in recs:
        assert r["final"]["answer"] == _mean_belief_answer(r, cfg.seed) == r["decisions"]["mean_belief"]["answer"]
        assert r["decisions"]["moderator"]["answer"] == r["labels"][int(np.argmax(r["moderator"][-1]["p"]))]
    mod = A.redecided(recs, "moderator")
    assert [m["final"]["answer"] for m in mod] == [r["decisions"]["moderator"]["answer"] for r in recs]
    moderated = cfg.replace(mad_aggregator="moderator")
    assert moderated.label == "Centralized MAD (moderator, T=2)"  # T: not the paper's 3
    with_mod = [run_question(q, pop, moderated) for q in ITEMS[:60]]
    assert [r["final"]["correct"] for r in with_mod] == [m["final"]["correct"] for m in mod]
    with pytest.raises(ValueError, match="only Centralized MAD has a moderator"):
        DebateConfig(method="decentralized", mad_aggregator="moderator")


def test_uniform_ablation_re_decides_the_acemad_run_by_the_standard_mad_rule():
    pop = SimPopulation(seed=6)
    ace = [run_question(q, pop, DebateConfig(method="acemad")) for q in ITEMS]
    out = A.reweighted_records(ace, A.ABLATIONS)  # records only: there is no population to call
    by = {name: [r["final"]["correct"] for r in out if r["method"] == name] for name in A.ABLATIONS}
    assert by["Full protocol"] == [r["final"]["correct"] for r in ace]
    uniform = [r["final"]["answer"] for r in out if r["method"] == "Uniform weights (AceMAD's debate)"]
    assert uniform == [_mean_belief_answer(r, 0) for r in ace]  # the runs' seed
    # ... which is what Decentralized MAD with the same agents decides (the debate ignores the weights).
    mad = [run_question(q, pop, DebateConfig(method="decentralized", roster="acemad")) for q in ITEMS]
    assert uniform == [r["final"]["answer"] for r in mad]
    assert by["Full protocol"] != by["Uniform weights (AceMAD's debate)"]


def test_sparse_is_a_full_mesh_up_to_three_agents():
    pop = SimPopulation(seed=8)
    strip = lambda r: [[e["p"] for e in rnd] for rnd in r["rounds"]]
    for n in (2, 3):
        for q in ITEMS[:20]:
            a = run_question(q, pop, DebateConfig(method="sparse", n_agents=n))
            b = run_question(q, pop, DebateConfig(method="decentralized", n_agents=n))
            assert strip(a) == strip(b)
    assert any(
        strip(run_question(q, pop, DebateConfig(method="sparse")))
        != strip(run_question(q, pop, DebateConfig(method="decentralized")))
        for q in ITEMS[:20]
    )


def test_paper_profile_names_a_second_model_and_every_other_model():
    prof = yaml.safe_load((P.ROOT / "profiles" / "paper.yaml").read_text())
    het = prof["notebooks"]["04_heterogeneity"]
    assert "llama" in het["SECOND_MODEL"].lower() and het["SECOND_BASE_URL"].startswith("http")
    other = prof["notebooks"]["07_other_models"]["OTHER_MODELS"]
    assert {e["table"] for e in other} == {"table2_main_results", "table4_deepseek", "table5_llama8b"}
    assert all(set(e) == {"table", "paper_model", "model", "base_url"} for e in other)


def test_every_paper_table_has_a_run_definition():
    assert set(PAPER_TABLES) == {"table2_main_results", "table4_deepseek", "table5_llama8b", "table6_full_datasets"}
    base, ace = table_configs("table5_llama8b")
    assert [c.label for c in base + ace] == [*(DebateConfig(method=m).label for m in BASELINES), "AceMAD (T=3)"]
    assert PAPER_TABLES["table5_llama8b"]["benchmarks"] == ["truthfulqa", "medqa", "bbh"]
    assert [c.rounds for c in table_configs("table2_main_results")[1]] == [2, 3, 5]
    with pytest.raises(ValueError):
        table_configs("table7")


def test_a_profile_with_another_item_pool_gets_challenging_subsets_of_its_own(smoke_outputs):
    """A profile file of one's own with another SEED or N_ITEMS: its subsets never collide with the shipped one's."""
    shipped, mine = Setup(benchmarks=["bbh"]), Setup(profile="mine", benchmarks=["bbh"], seed=1, n_items=200)
    assert shipped.slug == SS.SYNTHETIC_SLUG and mine.slug == SS.SYNTHETIC_SLUG + ".items-synthetic-200-seed1"
    assert shipped.subset("bbh") and mine.subset("bbh")
    assert Setup(profile="again", benchmarks=["bbh"], seed=1, n_items=200).subset("bbh") == mine.subset("bbh")


def test_other_models_reuse_the_subset_models_subsets(smoke_outputs):
    main = Setup(benchmarks=["bbh"], n_items=60)
    kept = main.subset("bbh")
    assert kept and main.subset_slug == SS.SYNTHETIC_SLUG + main.variant
    other = Setup(benchmarks=["bbh"], n_items=60, model="DeepSeek-V3.1", subset_model=main.model)
    assert other.population.params == SimParams(**SIM_STANDINS["DeepSeek-V3.1"])
    assert source_label(other.synthetic, other.model) == "SYNTHETIC stand-in for DeepSeek-V3.1 (no LLM)"
    assert [q.id for q in other.subset("bbh")] == [q.id for q in kept]  # no subset of its own was built
    assert not (SS.subsets_root() / other.slug).exists()
    own = Setup(benchmarks=["bbh"], n_items=60, model="DeepSeek-V3.1")  # per model: still an option
    assert own.subset_slug == own.slug != main.slug and own.subset("bbh") is not None
    assert (SS.subsets_root() / own.slug / f"{own.bench_name('bbh')}.jsonl").exists()
    lonely = Setup(benchmarks=["arc_challenge"], n_items=60, model="DeepSeek-V3.1", subset_model=main.model)
    with pytest.raises(FileNotFoundError, match="subset model"):
        lonely.subset("arc_challenge")  # the subset model's arc_challenge subset was never built


def test_a_setup_reads_each_subset_once_until_it_builds_again(smoke_outputs, monkeypatch):
    # notebook 09 asks for the same subsets at each of its map points: one read and hash check per Setup
    setup = Setup(benchmarks=["bbh"], n_items=60)
    kept = [q.id for q in setup.subset("bbh")]  # built, then read
    reads, load = [], SS.load_subset
    monkeypatch.setattr(SS, "load_subset", lambda *a, **kw: reads.append(a) or load(*a, **kw))
    assert [q.id for q in setup.subset("bbh")] == kept and [q.id for q in setup.subset("bbh", 2)] == kept[:2]
    assert [q.id for q in setup.load_subset("bbh", setup.slug)][: len(kept)] == kept and not reads  # (smoke caps)
    setup.build_subsets(progress=False)  # a build may rewrite what was read: read again
    assert [q.id for q in setup.subset("bbh")] == kept and len(reads) == 1
