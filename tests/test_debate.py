"""The engine (protocol.debate): config, topology, records, one engine for every population and entry point, the
runner's files and re-scoring."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading

import numpy as np
import pytest

from acemad_utils import api, command
from acemad_utils.agents.pool import map_agents
from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.data.transcripts import load_run, read_jsonl, transcript_bytes
from acemad_utils.experiments import runner
from acemad_utils.experiments.runner import run_and_load, run_experiment
from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import debate, run_batch, run_question, visible
from acemad_utils.protocol.records import to_line
from acemad_utils.protocol.schema import Agent, AgentSpec, Message, Population, Question, Step, Turn
from acemad_utils.report import rescoring as A

ITEMS = make_items(400, k=4, seed=11)
METHODS = ("single", "majority", "decentralized", "centralized", "sparse", "acemad", "self_consistency")


def accuracy(method: str, params: SimParams = SimParams(), items=ITEMS, **kw) -> np.ndarray:
    recs = run_batch(items, SimPopulation(params, seed=5), DebateConfig(method=method, **kw), [0] * len(items))
    return np.array([float(r["final"]["correct"]) for r in recs])


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(scoring_rule="hinge"), "scoring_rule='hinge'"),
        (dict(weighting="max"), "weighting='max'"),
        (dict(history="all"), "history='all'"),
        (dict(method="centralized", n_agents=1), "n_agents=1"),
    ],
)
def test_config_rejects_bad_values_with_a_clear_message(kw, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        DebateConfig(**kw)
    with pytest.raises(ValueError, match=r"'eta_' \(did you mean 'eta'\?\)"):
        DebateConfig.from_dict({"method": "acemad", "eta_": 2.0})
    assert DebateConfig(name="x").hash == DebateConfig().hash != DebateConfig(eta=1.0).hash  # the name is no result
    assert DebateConfig(n_agents=3).label == "AceMAD (N=3, T=3)"
    assert DebateConfig(weighting="uniform").label == "AceMAD (T=3, uniform)"


@pytest.mark.parametrize("n, n_th", [(1, 0), (2, 0), (3, 1), (5, 1), (10, 2), (15, 3)])
def test_roster_is_80_20_crowd_first(n, n_th):
    specs = DebateConfig(n_agents=n).specs()
    assert [(s.persona, s.temperature) for s in specs] == [("Generalist", 0.1)] * (n - n_th) + [("Skeptic", 0.6)] * n_th


# ----------------------------------------------------------------------------- topology, with agents that record
def test_visibility_rules():
    hist = [[Message(i, 1, f"r1a{i}") for i in range(5)], [Message(i, 2, f"r2a{i}") for i in range(5)]]
    everyone = set(range(5))
    assert len(visible(hist, 0, everyone, "full")) == 10
    assert [m.text for m in visible(hist, 0, everyone, "last_round")] == [f"r2a{i}" for i in range(5)]
    assert [m.agent for m in visible(hist, 0, everyone, "peers_last")] == [1, 2, 3, 4]
    assert sorted({m.agent for m in visible(hist, 0, {0, 1, 4}, "full")}) == [0, 1, 4]
    assert visible([], 3, everyone, "full") == ()


class Recorder(Agent):
    def __init__(self, idx, log, answer=0, k=4, fail=False):
        self.idx, self.log, self.answer, self.k, self.fail, self.spec = idx, log, answer, k, fail, AgentSpec()

    def act(self, turn: Turn) -> Step:
        self.log.append((turn.role, turn.agent, turn.round, tuple((m.agent, m.round) for m in turn.history),
                         turn.want_peer_prediction))  # fmt: skip
        p = np.full(self.k, 1.0 / self.k) if self.fail else np.eye(self.k)[self.answer] * 0.7 + 0.3 / self.k
        return Step(message=f"agent {turn.agent} says {self.answer}", p=p, q=p.copy(), parse_failure=self.fail)


class ScriptedPopulation(Population):
    def __init__(self, answers, fails=()):
        self.answers, self.fails, self.log = answers, set(fails), []

    def agents(self, specs, question, repeat=0):
        k = len(question.options)
        return [Recorder(i, self.log, self.answers[i], k, i in self.fails) for i in range(len(specs))]

    def moderator(self, question, repeat=0):
        return Recorder(-1, self.log, self.answers[-1], len(question.options))


Q4 = Question("t/1", "test", "?", {"A": "a", "B": "b", "C": "c", "D": "d"}, "B")


def test_centralized_is_a_star_and_scores_the_moderator_on_request():
    pop = ScriptedPopulation([0, 0, 0, 1, 1, 1])  # last entry is the moderator's answer (B, the truth)
    rec = run_question(Q4, pop, DebateConfig(method="centralized", rounds=2, mad_aggregator="moderator"))
    debaters_r2 = [(a, {x for x, _ in h}) for role, a, t, h, _ in pop.log if role == "debater" and t == 2]
    assert len(debaters_r2) == 5 and all(seen == {a, -1} for a, seen in debaters_r2)  # itself and the moderator
    mod_r1 = [h for role, a, t, h, _ in pop.log if role == "moderator" and t == 1][0]
    assert sorted(a for a, _ in mod_r1) == [0, 1, 2, 3, 4]  # the moderator reads every argument
    assert rec["final"]["answer"] == "B" and rec["final"]["correct"] is True and len(rec["moderator"]) == 2


def test_sparse_is_a_ring_and_acemad_asks_for_peer_predictions():
    pop = ScriptedPopulation([0] * 5)
    run_question(Q4, pop, DebateConfig(method="sparse", rounds=2))
    assert {a: {x for x, _ in h} for role, a, t, h, _ in pop.log if t == 2} == {
        i: {i, (i - 1) % 5, (i + 1) % 5} for i in range(5)
    }
    assert not any(wp for *_, wp in pop.log)
    pop = ScriptedPopulation([0] * 5)
    run_question(Q4, pop, DebateConfig(method="acemad", rounds=1))
    assert all(wp for *_, wp in pop.log)


def test_parse_failures_are_never_correct_and_never_gain_weight():
    # Three agents wrong (A), two failed commitments; the truth is B. Failed agents must not help.
    rec = run_question(Q4, ScriptedPopulation([0, 0, 0, 1, 1], fails={3, 4}), DebateConfig(method="acemad"))
    assert rec["final"]["answer"] == "A" and not rec["final"]["correct"]
    w = np.array([e["weight"] for e in rec["rounds"][-1]])
    assert w[3] <= w[:3].min() + 1e-12 and w[4] <= w[:3].min() + 1e-12
    pop = ScriptedPopulation([1] * 5, fails={0, 1, 2, 3, 4})  # nobody parsed: no answer at all
    for method in ("acemad", "majority", "decentralized"):
        rec = run_question(Q4, pop, DebateConfig(method=method))
        assert rec["final"]["answer"] is None and rec["final"]["correct"] is False


class HashAgent(Agent):
    """Deterministic, history-dependent replies, some failing to parse: what an LLM agent can return."""

    def __init__(self, spec):
        self.spec = spec

    def act(self, turn: Turn) -> Step:
        seen = [(m.agent, m.round, m.text) for m in turn.history]
        h = int(hashlib.sha256(f"{turn.scope}|{seen}".encode()).hexdigest()[:8], 16)
        rng, k = np.random.default_rng(h), len(turn.question.options)
        q = rng.dirichlet(np.ones(k)) if turn.want_peer_prediction else None
        info = {"q_parse_failure": True} if q is not None and h % 7 == 0 else {}
        usage = {"calls": 2, "prompt_tokens": h % 50, "completion_tokens": 3, "cache_hits": 0}
        return Step(f"{turn.agent}:{h % 97}:{len(seen)}", rng.dirichlet(np.ones(k)), q, h % 11 == 0, usage, info)


class HashPopulation(Population):
    def agents(self, specs, question, repeat=0):
        return [HashAgent(s) for s in specs]

    def moderator(self, question, repeat=0):
        return HashAgent(AgentSpec("Assistant", 0.7))


@pytest.mark.parametrize("method", METHODS)
def test_a_batch_of_agents_per_turn_stores_what_a_batch_of_one_stores(method):
    items = make_items(6, k=4, seed=2) + make_items(4, k=3, seed=3, benchmark="three")
    cfg, repeats = DebateConfig(method=method, history="peers_last" if method == "sparse" else "full"), [0, 1] * 5
    batch = run_batch(items, HashPopulation(), cfg, repeats)
    one = [run_question(q, HashPopulation(), cfg, r) for q, r in zip(items, repeats)]
    assert [to_line(r) for r in batch] == [to_line(r) for r in one]
    assert all(r["usage"]["calls"] > 0 for r in batch)


@pytest.mark.parametrize("method", METHODS)
def test_a_synthetic_record_does_not_depend_on_its_batch(method):
    items = make_items(30, k=4, seed=2) + make_items(20, k=3, seed=3, benchmark="three")
    pop, cfg = SimPopulation(seed=9), DebateConfig(method=method)
    whole = [to_line(r) for r in run_batch(items, pop, cfg, [0] * len(items))]
    assert whole == [to_line(r) for r in run_batch(items[::-1], pop, cfg, [0] * len(items))][::-1]
    assert whole[::7] == [to_line(run_question(q, pop, cfg)) for q in items[::7]]  # as another process would
    right = np.full(len(items), np.nan)  # a run not written is read from the arrays: the records' answers
    for b in debate(items, pop, cfg, [0] * len(items)):
        right[b.index] = b.correct()
    assert list(right) == [json.loads(x)["final"]["correct"] for x in whole]


def test_the_single_agent_scores_the_mean_of_its_runs():
    single = run_question(ITEMS[1], SimPopulation(), DebateConfig(method="single"))
    assert len(single["runs"]) == 5 and single["synthetic"] is True
    assert single["final"]["correct"] == pytest.approx(np.mean([r["correct"] for r in single["runs"]]))


# ----------------------------------------------------------------------------- one engine behind every entry point
def test_the_api_the_command_and_the_notebooks_engine_give_the_same_answers(tmp_path):
    methods = ["acemad", "majority", "centralized"]
    rows = [{"id": f"q-{i}", "question": f"{i}?", "options": list("wxyz"), "answer": "ABCD"[i % 4]} for i in range(40)]
    items = api.as_questions(rows)
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = lambda recs: [(r["question_id"], r["method"], r["final"]["answer"]) for r in recs]
    notebooks = [r for m in methods for r in run_batch(items, SimPopulation(seed=3), DebateConfig(method=m, seed=3),
                                                         [0] * len(items))]  # fmt: skip
    via_api = api.run(items, methods, synthetic=True, seed=3, out=tmp_path / "api")
    argv = ["run", str(tmp_path / "q.jsonl"), "--synthetic", "--seed", "3", "--methods", ",".join(methods)]
    assert command.main([*argv, "--out", str(tmp_path / "cmd"), "--yes"]) == 0
    runs = (tmp_path / "cmd").glob("runs/*/*/meta.json")
    from_file = [r for m in runs for r in read_jsonl(m.with_name("transcripts.jsonl"))]
    assert answers(via_api.records) == answers(notebooks)
    assert sorted(answers(from_file)) == sorted(answers(notebooks))


# ----------------------------------------------------------------------------- what the mechanism does (synthetic)
def test_acemad_beats_majority_where_the_theory_says_it_should():
    # False-consensus crowd + insightful truth-holders: peer prediction separates them.
    diff = accuracy("acemad") - accuracy("majority")
    assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(len(diff))


@pytest.mark.parametrize(
    "params",
    [SimParams(crowd_calibration=1.0), SimParams(insight=0.0, insight_calibration=0.0)],
    ids=["calibrated-crowd", "no-truth-holders"],
)
def test_acemad_does_not_beat_the_same_debate_with_uniform_weights_where_it_should_not(params):
    # The same agents debating without weights (Decentralized MAD, AceMAD's roster) isolates the weights: stubborn
    # crowd agents with insight drift any debate toward the truth.
    diff = accuracy("acemad", params) - accuracy("decentralized", params, roster="acemad")
    assert diff.mean() < 2 * diff.std(ddof=1) / np.sqrt(len(diff)) + 0.02


def test_uniform_weighting_is_standard_mad():
    # The paper's "uniform weight" ablation reduces AceMAD to Decentralized MAD (same agents, same seed).
    np.testing.assert_array_equal(
        accuracy("acemad", weighting="uniform", weight_exponent=1.0), accuracy("decentralized", roster="acemad")
    )


def test_symmetric_updating_is_a_martingale():
    params = SimParams(insight_susceptibility=SimParams().crowd_susceptibility)
    recs = run_batch(ITEMS, SimPopulation(params, seed=4), DebateConfig(method="decentralized", rounds=5), [0] * 400)
    bt = A.belief_in_truth(A.stack(recs))
    d = bt[:, -1] - bt[:, 0]
    assert abs(d.mean()) < 3 * d.std(ddof=1) / np.sqrt(len(d)) + 1e-3


# ----------------------------------------------------------------------------- runner + re-scoring
def test_a_run_is_one_canonical_file_and_refuses_other_questions(tmp_outputs):
    cfgs = [DebateConfig(method="acemad"), DebateConfig(method="majority")]
    d = run_experiment("exp", ITEMS[:30], cfgs, SimPopulation(), progress=False)
    assert not (d / "transcripts.jsonl").exists() and (d / "transcripts.jsonl.gz").exists()
    meta = json.loads((d / "meta.json").read_text())
    assert meta["synthetic"] is True and meta["n_questions"] == 30
    assert set(meta["methods"]) == {"AceMAD (T=3)", "Majority Voting"}
    with pytest.raises(ValueError, match="different data_hash"):
        run_experiment("exp", ITEMS[:10], cfgs, SimPopulation(), progress=False)


def test_a_completed_run_grows_by_a_method_and_a_rerun_writes_nothing(tmp_outputs, monkeypatch):
    # adding a method runs only that method and compresses the whole again; a rerun rewrites nothing
    monkeypatch.setattr(runner, "BATCH", 3)  # several batches per method
    a, b = DebateConfig(method="majority"), DebateConfig(method="acemad", rounds=2)
    d = run_experiment("grow", ITEMS[:8], [a], SimPopulation(), progress=False)
    first = transcript_bytes(d / "transcripts.jsonl")
    calls: list = []
    monkeypatch.setattr(runner, "run_batch", lambda qs, p, c, r: calls.extend([c] * len(qs)) or run_batch(qs, p, c, r))
    run_experiment("grow", ITEMS[:8], [a, b], SimPopulation(), progress=False)
    assert {c.label for c in calls} == {b.label} and len(calls) == 8  # Majority Voting was not run again
    assert not (d / "transcripts.jsonl").exists()
    both = transcript_bytes(d / "transcripts.jsonl.gz")
    assert both.startswith(first) and both.count(b"\n") == 16
    _, recs = load_run("grow")
    assert [r["method"] for r in recs] == [a.label] * 8 + [b.label] * 8
    stat = (d / "transcripts.jsonl.gz").stat()
    run_experiment("grow", ITEMS[:8], [a, b], SimPopulation(), progress=False)
    assert len(calls) == 8 and (d / "transcripts.jsonl.gz").stat().st_ino == stat.st_ino  # not rewritten
    assert transcript_bytes(d / "transcripts.jsonl") == both
    # run_and_load (what Setup.run uses) returns what load_run reads back (the same keys, values and types), the
    # records it made as made, the others as read from the file
    c = DebateConfig(method="sparse", rounds=2)
    for cfgs in ([a, b, c], [a, b, c], [b]):
        got = run_and_load("grow", ITEMS[:8], cfgs, SimPopulation(), progress=False)
        assert json.dumps(got, sort_keys=True) == json.dumps(load_run("grow"), sort_keys=True)


def test_runs_in_batches_of_7_and_of_600_write_the_same_file(tmp_outputs, monkeypatch):
    items = make_items(700, k=4, seed=6)
    cfgs = [DebateConfig(method="acemad"), DebateConfig(method="centralized"), DebateConfig(method="single")]
    files = []
    for size in (7, 600):
        monkeypatch.setattr(runner, "BATCH", size)
        d = runner.run_experiment(f"batch{size}", items, cfgs, SimPopulation(seed=1), repeats=2, progress=False)
        files.append((d / "transcripts.jsonl.gz").read_bytes())
    assert files[0] == files[1]


def test_rescoring_reproduces_the_engine_and_changes_with_eta():
    pop = SimPopulation(seed=9)
    recs = run_batch(ITEMS[:200], pop, DebateConfig(method="acemad", rounds=5), [0] * 200)
    arr, answers = A.stack(recs), lambda recs: np.array([r["labels"].index(r["final"]["answer"]) for r in recs])
    stored = answers(recs)
    np.testing.assert_array_equal(A.rescore(arr, eta=2.0), stored)
    short = run_batch(ITEMS[:200], pop, DebateConfig(method="acemad", rounds=2), [0] * 200)
    np.testing.assert_array_equal(A.rescore(arr, eta=2.0, rounds=2), answers(short))
    assert (A.rescore(arr, eta=16.0) != stored).any()
    every_t = A.decisions(arr, eta=[2.0, 16.0])  # (eta, B, T): the same decisions, sliced per round
    for t in (1, 2, 5):
        np.testing.assert_array_equal(every_t[0, :, t - 1], A.rescore(arr, eta=2.0, rounds=t))
        np.testing.assert_array_equal(every_t[1, :, t - 1], A.rescore(arr, eta=16.0, rounds=t))


def test_rescoring_gives_no_answer_where_the_engine_gives_none():
    recs = run_batch(ITEMS[:4], SimPopulation(seed=3), DebateConfig(method="acemad", rounds=2), [0] * 4)
    for e in recs[0]["rounds"][-1]:  # nobody's final commitment parsed
        e["parse_failure"] = True
    arr = A.stack(recs)
    assert A.rescore(arr)[0] == -1 and A.decisions(arr)[0, 0] >= 0
    assert A.reweighted_records(recs, {"full": "peer_prediction"})[0]["final"] == {"answer": None, "correct": False}


@pytest.fixture(scope="module")
def acemad200() -> list[dict]:
    return run_batch(ITEMS[:200], SimPopulation(seed=9), DebateConfig(method="acemad"), [0] * 200)


def test_shuffled_scores_are_acemads_decision_when_every_score_is_equal(acemad200):
    arr = A.stack(acemad200)
    shuffled = A.shuffled_decisions(arr, n_perm=5)
    assert shuffled.shape == (5, 200)
    assert (shuffled != A.rescore(arr)).any()  # unequal scores: giving them to other agents changes decisions
    arr.Q = B.peer_mean(arr.P)  # every agent predicts its peers exactly: every score is 1, every weight equal
    np.testing.assert_array_equal(A.shuffled_decisions(arr, n_perm=5), np.broadcast_to(A.rescore(arr), (5, 200)))


def test_an_agent_whose_forecast_failed_keeps_its_place_and_its_score_under_the_shuffle(acemad200):
    """The control gives AceMAD's own weights to other agents: a failed q scores as AceMAD scores it (the round's
    worst) and its agent is not moved; with every q failed nobody moves, so every draw decides as AceMAD does."""
    recs = json.loads(json.dumps(acemad200[:40]))
    for r in recs:
        for e in (e for rnd in r["rounds"] for e in rnd):
            e["q_parse_failure"] = True
    arr = A.stack(recs)
    assert not arr.forecast_valid.any()
    np.testing.assert_array_equal(A.shuffled_decisions(arr, n_perm=5), np.broadcast_to(A.rescore(arr), (5, 40)))


def test_shuffled_scores_are_seeded_by_question_not_by_batch_order(acemad200):
    recs = acemad200
    arr, rev = A.stack(recs), A.stack(recs[::-1])
    a = A.shuffled_decisions(arr, seed=1)
    np.testing.assert_array_equal(a, A.shuffled_decisions(arr, seed=1))
    np.testing.assert_array_equal(a[:, ::-1], A.shuffled_decisions(rev, seed=1))
    assert (a != A.shuffled_decisions(arr, seed=2)).any()
    out = A.shuffled_records(recs, seed=1)
    np.testing.assert_allclose([r["final"]["correct"] for r in out], (a == arr.truth).mean(0))
    assert {r["method"] for r in out} == {A.SHUFFLED}
    # notebook 09 stacks a run once for both of its re-decisions (stacked=): the same records, other records refused
    assert A.shuffled_records(recs, seed=1, stacked=A.stack(recs, 1)) == out
    uniform = A.reweighted_records(recs, {"u": "uniform"}, seed=1)
    assert A.reweighted_records(recs, {"u": "uniform"}, seed=1, stacked=A.stack(recs, 1)) == uniform
    with pytest.raises(ValueError):
        A.shuffled_records(recs, seed=1, stacked=rev)


# ----------------------------------------------------------------------------- agent thread pool
def test_agent_error_is_raised_only_after_every_agent_finished():
    """A failing agent's peers finish (their replies cached) before the question is reported failed."""
    failed, checked, done = threading.Event(), threading.Event(), threading.Event()

    def act(i):
        if i == 0:
            failed.set()
            raise RuntimeError("agent 0 failed")
        failed.wait(30)  # still running when agent 0 fails, and until the test checked (at most 1 s):
        checked.wait(1.0)  # a map_agents that raised at once is checked before this peer could end
        done.set()
        return i

    with pytest.raises(RuntimeError):
        map_agents(act, [0, 1])
    assert done.is_set()
    checked.set()
    assert map_agents(lambda i: i * 2, list(range(7))) == [0, 2, 4, 6, 8, 10, 12]  # order kept


def test_agent_pool_works_in_a_forked_child():
    """The shared pool's threads do not survive fork(): a child gets a new pool, not a queue no thread runs."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    assert map_agents(lambda i: i, [1, 2, 3]) == [1, 2, 3]  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            signal.alarm(20)  # a hang is killed by SIGALRM (and fails below)
            code = 0 if map_agents(lambda i: i * 2, [1, 2, 3]) == [2, 4, 6] else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
