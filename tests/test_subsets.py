"""Challenging subsets: pure statistics on hand-built records, builds on the synthetic population, files."""

from __future__ import annotations

import itertools
import json
import shutil
from collections import Counter
from fractions import Fraction

import pandas as pd
import pytest

from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data import benchmarks as D
from acemad_utils.data import transcripts
from acemad_utils.experiments import subsets as S
from acemad_utils.protocol.schema import Question
from tests.fake_openai import FakeOpenAI

ITEMS = make_items(40, k=4, seed=3)


def rec(answers, truth="A", labels=("A", "B", "C", "D"), qid="q1"):
    """A Single Agent record by hand: `answers` holds one label (or None = parse failure) per run."""
    return {
        "question_id": qid,
        "benchmark": "hand",
        "labels": list(labels),
        "answer": truth,
        "runs": [{"answer": a, "correct": a == truth, "parse_failure": a is None} for a in answers],
    }


# ----------------------------------------------------------------------------- pure functions
def test_item_stats_counts_wrong_answers_and_parse_failures_and_model_slugs_are_folder_names():
    s = S.item_stats(rec(["A", "C", "C", None, "B"]))
    assert s["accuracy"] == 0.2 and s["n_runs"] == 5 and s["parse_failures"] == 1
    assert s["wrong"] == {"B": 1, "C": 2} and s["top_distractor"] == "C"
    assert sum(s["wrong"].values()) + s["parse_failures"] == round(s["n_runs"] * (1 - s["accuracy"]))
    tie = S.item_stats(rec(["D", "B", "D", "B", "A"]))
    assert tie["top_distractor"] == "B"  # ties go to the earlier label
    assert S.item_stats(rec([None] * 5))["top_distractor"] is None
    assert S.model_slug("meta-llama/Llama-3 8B:q4") == "meta-llama-Llama-3-8B-q4"
    assert S.model_slug("gpt-4o-mini", synthetic=True) == "synthetic-population"


def test_expected_top_count_matches_brute_force():
    for n, m in [(1, 3), (3, 3), (4, 2), (5, 4), (5, 9), (3, 1), (0, 3)]:
        brute = Fraction(sum(max(Counter(s).values(), default=0) for s in itertools.product(range(m), repeat=n)), m**n)
        assert S.expected_top_count(n, m) == brute
    assert S.expected_top_count(3, 3) == Fraction(17, 9)  # 6 all-distinct (1), 18 pairs (2), 3 triples (3) of 27


def test_misconception_share_on_a_hand_built_example():
    stats = [
        S.item_stats(r)
        for r in (
            rec(["C", "C", "C", "A", "B"], qid="a"),  # 4 wrong, top C holds 3
            rec(["B", "D", None, "A", "A"], qid="b"),  # 2 wrong (+1 failure, not counted), top holds 1
            rec(["Y", "Y", "Y", "X", "Y"], truth="X", labels=("X", "Y"), qid="c"),  # binary: 4 wrong, all on Y
        )
    ]
    share, ref, n_wrong = S.misconception_share(stats)
    assert n_wrong == 10 and share == pytest.approx((3 + 1 + 4) / 10)
    # uniform reference: E[top count] of 4 answers on 3 options, 2 answers on 3 options, 4 answers on 1 option
    expect = (S.expected_top_count(4, 3) + Fraction(4, 3) + 4) / 10
    assert ref == pytest.approx(float(expect))
    assert S.misconception_share([S.item_stats(rec(["A"] * 5))]) == (None, None, 0)


# ----------------------------------------------------------------------------- builds
def test_build_on_synthetic_items_is_deterministic_round_trips_and_names_a_changed_item(smoke_outputs):
    pop = SimPopulation(seed=1)
    res = S.build_subset("synthetic", ITEMS, pop, "anything", progress=False)
    assert res.kept, "the synthetic population should produce some challenging items"
    for k in res.kept:
        assert k["accuracy"] < 0.4 and k["synthetic"] is True
        assert sum(k["wrong"].values()) + k["parse_failures"] == round(k["n_runs"] * (1 - k["accuracy"]))
    assert {k["id"] for k in res.kept} == {s["id"] for s in res.stats if s["accuracy"] < 0.4}
    share, ref, _ = S.misconception_share(res.kept)
    assert res.summary["misconception_share"] == share and res.summary["uniform_reference"] == ref
    assert res.summary["synthetic"] is True and res.model_slug == "synthetic-population"
    assert res.path == smoke_outputs / "outputs" / "smoke" / "subsets" / "synthetic-population" / "synthetic.jsonl"
    # The shared trap makes errors systematic: far more concentrated than random errors would be.
    assert res.summary["misconception_share"] > res.summary["uniform_reference"]
    first = res.path.read_bytes()
    meta1 = json.loads((res.path.parent / "meta.json").read_text())
    runner_dir = transcripts.run_dir("subset_synthetic-population_synthetic")
    assert (runner_dir / "transcripts.jsonl.gz").exists()
    shutil.rmtree(runner_dir)  # rebuild from scratch (not just resumed): same bytes
    res2 = S.build_subset("synthetic", ITEMS, pop, "anything", progress=False)
    assert res2.path.read_bytes() == first
    meta2 = json.loads((res.path.parent / "meta.json").read_text())
    for m in (meta1, meta2):
        m["benchmarks"]["synthetic"].pop("date")
    assert meta1 == meta2 and meta1["synthetic"] is True
    back = S.load_subset("synthetic", "synthetic-population", ITEMS)
    assert [q.id for q in back] == [k["id"] for k in res.kept]
    victim = res.kept[0]["id"]
    changed = [
        Question.from_dict({**q.to_dict(), "question": q.question + " (edited)"}) if q.id == victim else q
        for q in ITEMS
    ]
    with pytest.raises(D.DataError, match=f"'{victim}' changed upstream"):
        S.load_subset("synthetic", "synthetic-population", changed)
    with pytest.raises(D.DataError, match=f"'{victim}' is not in"):
        S.load_subset("synthetic", "synthetic-population", [q for q in ITEMS if q.id != victim])


def test_a_subset_decided_in_memory_is_the_written_runs_subset(smoke_outputs):
    """The map's populations decide their subsets from the engine's arrays (write_run=False): the same kept items and
    per-item statistics as the written run's records give, no run written; an endpoint's subset is always written."""
    pop, qs = SimPopulation(seed=2), make_items(60, k=5, seed=5, benchmark="other")
    written = S.build_subset("other", qs, pop, "x", progress=False)
    shutil.rmtree(written.path.parent)
    memory = S.build_subset("other", qs, SimPopulation(seed=2, texts=False), "x", progress=False, write_run=False)
    assert memory.stats == written.stats and memory.kept == written.kept and memory.path.read_bytes()
    assert memory.summary["experiment"] is None and written.summary["experiment"] == "subset_synthetic-population_other"
    runs = transcripts.run_dir("subset_synthetic-population_other")
    shutil.rmtree(runs)
    S.build_subset("other", qs, SimPopulation(seed=2, texts=False), "x", progress=False, write_run=False)
    assert not runs.exists()  # nothing written under outputs/runs
    with FakeOpenAI(lambda body, n: '{"self_prob": {"B": 100}}') as srv:
        endpoint = LLMPopulation(model="m", base_url=srv.url, api_key="sk-test", cache=smoke_outputs / "c.sqlite")
        with pytest.raises(ValueError, match="only for a synthetic population"):
            S.build_subset("other", qs, endpoint, "m", progress=False, write_run=False)
        assert srv.count == 0  # refused before any call


def test_smoke_mode_decides_where_files_go(smoke_outputs, monkeypatch):
    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    res = S.build_subset("synthetic", ITEMS[:10], SimPopulation(), "x", progress=False)
    assert res.path.parent == smoke_outputs / "outputs" / "smoke" / "subsets" / "synthetic-population"
    assert not (smoke_outputs / "data").exists()
    assert not (smoke_outputs / "outputs" / "runs").exists()  # transcripts too
    monkeypatch.setenv("ACEMAD_SMOKE", "0")
    res = S.build_subset("synthetic", ITEMS[:10], SimPopulation(), "x", progress=False)
    assert res.path.parent == smoke_outputs / "data" / "subsets" / "synthetic-population"


def test_meta_merges_benchmarks_and_table_and_refuses_another_benchmarks_items(smoke_outputs):
    pop = SimPopulation()
    S.build_subset("synthetic", ITEMS, pop, "x", progress=False)
    other = make_items(20, k=5, seed=4, benchmark="other")
    S.build_subset("other", other, pop, "x", limit=15, progress=False)
    meta = json.loads((S.subsets_root() / "synthetic-population" / "meta.json").read_text())
    assert set(meta["benchmarks"]) == {"synthetic", "other"} and meta["benchmarks"]["other"]["n_items_in"] == 15
    assert meta["benchmarks"]["other"]["data_hash"] == D.data_hash(other[:15])
    t = S.subset_table("synthetic-population")
    assert isinstance(t, pd.DataFrame) and list(t.index) == ["other", "synthetic"]
    assert t.loc["synthetic", "items_in"] == 40 and bool(t["synthetic"].all())
    assert t.loc["synthetic", "kept_pct"] == pytest.approx(100 * t.loc["synthetic", "kept"] / 40)
    with pytest.raises(ValueError):
        S.build_subset("arc_challenge", ITEMS, SimPopulation(), "x", progress=False)


def test_build_against_an_endpoint_keeps_the_items_it_gets_wrong(smoke_outputs):
    items = make_items(12, k=4, seed=5, benchmark="logiqa")
    with FakeOpenAI(lambda body, n: '{"self_prob": {"B": 100}}') as srv:  # always answers B
        pop = LLMPopulation(model="fake/model-1", base_url=srv.url, api_key="sk-test", cache=smoke_outputs / "c.sqlite")
        res = S.build_subset("logiqa", items, pop, "fake/model-1", progress=False)
    assert res.model_slug == "fake-model-1"
    assert [k["id"] for k in res.kept] == [q.id for q in items if q.answer != "B"]
    assert all(k["wrong"] == {"B": 5} and k["synthetic"] is False for k in res.kept)
    assert res.summary["endpoint_kind"] == "local-llama.cpp" and res.summary["misconception_share"] == 1.0
