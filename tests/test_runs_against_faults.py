"""Debate runs against a fake endpoint failing in every ordinary way of paid APIs (tests/fake_openai.FaultInjector) at
a 30% rate: every question ends answered or failed with its reason, the counts reach the run summary, no fault is
ever scored as correct, and a trickling endpoint is cut off by the deadlines."""

from __future__ import annotations

import json
import random
import threading

import numpy as np
import openai
import pytest

from acemad_utils.agents.client import CallDeadlineExceeded, GarbledResponse, LLMClient
from acemad_utils.agents.health import EndpointDown
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.sim import make_items
from acemad_utils.data import paths as P
from acemad_utils.data import transcripts
from acemad_utils.experiments import runner
from acemad_utils.experiments.profiles import parse_sets, run_key
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.schema import RECORD_USAGE_KEYS
from tests.fake_openai import CONTENT_FAULTS, FAULTS, HTTP_FAULTS, FakeOpenAI, FaultInjector, Reply, request_info

KEY = "sk-test-faults-0000"
SLOW = 1.5  # seconds a "slow" fault waits: past the client's timeout


def population(srv, tmp_path, **kw) -> LLMPopulation:
    # A client timeout below the fake's slow replies and a few attempts: faults cost little wall time.
    kw = dict(timeout=1.0, max_attempts=4, max_concurrency=8) | kw
    return LLMPopulation(model="fake-debater", base_url=srv.url, api_key=KEY, cache=str(tmp_path / "llm.sqlite"), **kw)


def truth_of(items):
    by_text = {q.question: q.answer for q in items}
    return lambda info: by_text.get(info["question"])


def entries(rec):
    return [e for r in rec.get("rounds", []) for e in r] + rec.get("runs", []) + rec.get("moderator", [])


def valid_distribution(p) -> bool:
    a = np.asarray(p, dtype=float)
    return bool(np.all(np.isfinite(a)) and np.all(a >= 0) and abs(a.sum() - 1) < 1e-9)


# ----------------------------------------------------------------------------- the injector itself
def _bodies(n):
    out = []
    for i, q in enumerate(make_items(n, k=4, seed=3)):
        ask = "Output JSON only" if i % 2 else "Argue"
        user = f"Question: {q.question}\n\nOptions:\n{q.options_str()}\n\n{ask}: ..."
        body = {"model": "m", "seed": i, "messages": [{"role": "user", "content": user}]}
        if i % 2:
            props = {"self_prob": {"type": "object", "properties": {k: {"type": "number"} for k in q.labels}}}
            schema = {"name": "r", "schema": {"properties": props}}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        out.append(body)
    return out


def test_injector_is_seeded_by_content_not_by_arrival_order():
    bodies = _bodies(3000)
    a, b = FaultInjector(0.3, seed=7), FaultInjector(0.3, seed=7)

    def replies(plan, bodies):
        return {json.dumps(x, sort_keys=True): (r.kind, r.content, r.status) for n, x in enumerate(bodies)
                for r in [plan(x, n)]}  # fmt: skip

    first = replies(a, bodies)
    second = replies(b, random.Random(0).sample(bodies, len(bodies)))
    assert first == second and a.injected == b.injected
    # the configured rate, every kind injected, content faults only on structured requests
    assert a.requests == 3000 and abs(a.total_injected / a.requests - 0.3) < 0.03
    assert set(a.injected) == set(FAULTS)
    assert all(r[0] not in CONTENT_FAULTS for x, r in first.items() if "response_format" not in x)
    # another seed, other faults
    c = FaultInjector(0.3, seed=8)
    assert [c(x, n).kind for n, x in enumerate(bodies[:200])] != [v[0] for v in list(first.values())[:200]]


def test_injector_caps_faults_per_request_and_keeps_content_across_retries():
    plan = FaultInjector(0.9, seed=1, max_faults_per_request=2, mix={"server_error": 1, "prose": 0})
    body = _bodies(2)[1]
    replies = [plan(body, n) for n in range(5)]
    # attempts 0 and 1 may fail, attempt 2 on never does; the content is the same whenever it gets through
    assert all(r.kind == "ok" for r in replies[2:]) and len({r.content for r in replies if r.kind == "ok"}) == 1
    assert plan.attempts[next(iter(plan.attempts))] == 5


TORN = '{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess'
HEAD = b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", '
GARBLED = {  # name: (reply, what the final error must say the endpoint sent)
    # (the SDK decodes a body in the charset it guesses: binary garbage is quoted as whatever that gives)
    "not_json": (Reply(raw=b"\x00\xff garbage"), "whose body is not JSON: '"),
    "truncated": (Reply(raw=TORN.encode()), f"whose body is not JSON: '{TORN}'"),
    "html_page": (Reply(raw=b"<html>502 Bad Gateway</html>", headers={"Content-Type": "text/html"}),
                  "whose body is not JSON: '<html>502 Bad Gateway</html>'"),
    "html_as_json": (Reply(raw=b"<html>" + b"x" * 300 + b"</html>"),
                     "whose body is not JSON: '<html>" + "x" * 194 + "'... (313 characters)"),
    "empty": (Reply(raw=b""), "whose body is not JSON: an empty body"),
    "no_choices": (Reply(raw=HEAD + b'"choices": []}'),
                   """with no choices: '{"id":"x","choices":[],"created":0,"model":"m","object":"chat.completion"}'"""),
    "a_list": (Reply(raw=b"[1, 2]"), "whose JSON body is not a chat completion: '[1, 2]'"),
    "no_message": (Reply(raw=HEAD + b'"choices": [{"index": 0, "finish_reason": "stop"}]}'),
                   "whose first choice has no message"),
    "echoes_key": (Reply(raw=f"<html>proxy error for Bearer {KEY}</html>".encode()),
                   "whose body is not JSON: '<html>proxy error for Bearer ***</html>'"),  # quoted redacted
}  # fmt: skip


@pytest.mark.parametrize("name", GARBLED)
def test_garbled_2xx_bodies_are_retried_never_returned(name):
    """Retried (a proxy's error page is often transient); when the attempts run out, a GarbledResponse that
    quotes what the endpoint sent (first 200 characters, redacted), never a raw JSONDecodeError."""
    reply, said = GARBLED[name]
    with FakeOpenAI([reply], default="fine") as srv:
        c = LLMClient("m", srv.url, KEY, max_attempts=3)
        assert c.generate([{"role": "user", "content": "hi"}]).text == "fine"
        assert (c.stats()["retries"], srv.count) == (1, 2)
    with FakeOpenAI(default=reply) as srv:  # never a usable body: a clear error, no text
        c = LLMClient("m", srv.url, KEY, max_attempts=2)
        with pytest.raises(GarbledResponse) as exc:
            c.generate([{"role": "user", "content": "hi"}])
        msg = str(exc.value)
        assert msg.startswith(f"the endpoint {srv.url} answered a chat completion with a 2xx reply {said}"), msg
        assert msg.endswith("(2 attempts; a proxy or server that is not an OpenAI-compatible /v1 endpoint answers "
                            "like this: check BASE_URL / OPENAI_BASE_URL)")  # fmt: skip
        assert exc.value.__cause__ is None and "\n" not in msg and KEY not in msg
        assert c.stats()["failures"] == 1 and srv.count == 2


# ----------------------------------------------------------------------------- a long run under 30% faults
N_QUESTIONS = 50


def test_50_questions_complete_under_30_percent_faults(tmp_outputs):
    items = make_items(N_QUESTIONS, k=4, seed=11)
    truth = truth_of(items)
    doomed = {items[3].question, items[7].question}  # every argument call fails: the question must fail
    garbled = {items[5].question, items[9].question}  # every commitment is prose: all parse failures

    def force(body, info):
        if info["question"] in doomed and not info["structured"]:
            return "server_error"
        if info["question"] in garbled and info["structured"]:
            return "prose"
        return None

    plan = FaultInjector(0.3, seed=2024, truth=truth, truth_rate=0.5, force=force, slow_delay=SLOW)
    cfg = DebateConfig(method="acemad", n_agents=3, rounds=2)
    with FakeOpenAI(plan) as srv:
        pop = population(srv, tmp_outputs, breaker=10**6)  # under load real timeouts could trip it (tested below)
        runner.run_experiment("faults", items, [cfg], pop, workers=8, progress=False)
        meta, recs = transcripts.load_run("faults")
        session = pop.usage()
        n_requests = srv.count

        # --- every question exactly once, answered or explicitly failed with its reason
        assert [r["question_id"] for r in recs] == [q.id for q in items]
        assert {r["status"] for r in recs} <= {"ok", "failed"}
        failed = [r for r in recs if r["status"] == "failed"]
        none = dict(answer=None, correct=False, oracle_any_agent_correct=False, tie=False)
        assert all(r["error"] and r["final"] == none and "rounds" not in r for r in failed)  # nothing half-done
        by_q = {q.question: r for q, r in zip(items, recs)}
        assert all(by_q[t]["status"] == "failed" and "500" in by_q[t]["error"] for t in doomed)

        # --- ok records: valid beliefs everywhere; parse failures flagged and never an answer
        ok = [r for r in recs if r["status"] == "ok"]
        assert ok and all(valid_distribution(e["p"]) and (e["q"] is None or valid_distribution(e["q"]))
                          for r in ok for e in entries(r))  # fmt: skip
        for r in map(by_q.get, garbled):
            assert r["status"] == "ok" and all(e["parse_failure"] for e in entries(r))
            assert r["final"]["answer"] is None
            assert r["final"]["correct"] is r["final"]["oracle_any_agent_correct"] is False
        for r in ok:
            truth_i = r["labels"].index(r["answer"])
            final_valid = [e for e in r["rounds"][-1] if not e["parse_failure"]]
            if not final_valid:  # only uniform fallbacks left: no answer, whatever a tie-break would say
                assert r["final"]["answer"] is None and r["final"]["correct"] is False
            if r["final"]["correct"]:  # the truth won on the beliefs of agents whose commitment parsed
                assert any(e["p"][truth_i] > 0 for e in final_valid)
            if r["final"]["oracle_any_agent_correct"]:
                assert any(not e["parse_failure"] and int(np.argmax(e["p"])) == truth_i for e in entries(r))
            for e in entries(r):  # a failed commitment carries no weight into the decision
                if e["parse_failure"]:
                    assert e["p"] == [0.25] * 4 and e["usage"]["parse_failures"] == 1

        # --- counts: per agent entry -> per record -> run summary; client counters = what the server saw
        s = meta["summary"]
        assert (s["questions"], s["expected"], s["records"], s["missing"]) == (N_QUESTIONS,) * 3 + (0,)
        assert s["ok"] == len(ok) and s["failed"] == len(failed) >= 2 and s["ok"] + s["failed"] == N_QUESTIONS
        assert [e["question_id"] for e in s["errors"]] == [r["question_id"] for r in failed]
        for k in RECORD_USAGE_KEYS:
            assert s[k] == sum(r["usage"][k] for r in recs)
            assert all(r["usage"][k] == sum(e["usage"].get(k, 0) for e in entries(r)) for r in ok)
        assert s["parse_failures"] == sum(e["parse_failure"] for r in ok for e in entries(r)) >= 2 * 3 * 2
        assert s["retries"] > 0 and s["repairs"] >= s["parse_failures"] and s["correct"] > 0
        sess = s["session"]
        assert sess["network_calls"] == session["network_calls"] >= n_requests
        assert sess["retries"] == session["retries"] and sess["failures"] == session["failures"] >= 2
        # each transport fault costs one failed attempt; load may add some the server never saw
        spurious = sess["retries"] + sess["failures"] - sum(plan.injected[k] for k in HTTP_FAULTS)
        assert spurious >= 0 and sess["network_calls"] - n_requests <= spurious
        assert s["retries"] <= sess["retries"]  # records do not hold the retries of calls in failed questions
        assert set(plan.injected) == set(FAULTS) and 0.25 < plan.total_injected / plan.requests < 0.45

        # --- resume: failed questions are retried; nothing answered and cached is asked again
        plan.rate, plan.force = 0.0, None
        before = srv.count
        runner.run_experiment("faults", items, [cfg], pop, workers=8, progress=False)
        meta2, recs2 = transcripts.load_run("faults")
        assert all(r["status"] == "ok" for r in recs2) and meta2["summary"]["failed"] == 0
        failed_ids = {f["question_id"] for f in failed}
        assert [r for r in recs2 if r["question_id"] not in failed_ids] == ok  # ok records untouched, byte for byte
        again = {request_info(b)["question"] for b in srv.requests[before:]}
        assert again and again <= {q.question for q in items if q.id in failed_ids}  # only the failed ones again


# ----------------------------------------------------------------------------- faults are never correct
def test_no_fault_is_ever_scored_as_correct(tmp_outputs):
    """Clean replies never give the truth any mass, every faulty one names it: a record can only be correct if a
    fault was scored as correct (a parse failure read as a vote, a fallback winning a tie, a failed question)."""
    items = make_items(10, k=4, seed=12)
    truth = truth_of(items)
    all_prose = {items[0].question, items[1].question}  # every commitment unreadable: uniform everywhere

    def force(body, info):
        return "prose" if info["question"] in all_prose and info["structured"] else None

    plan = FaultInjector(0.3, seed=99, truth=truth, truth_rate=0.0, force=force, slow_delay=SLOW)
    configs = [DebateConfig(method="acemad", n_agents=3, rounds=2), DebateConfig(method="majority", n_agents=3),
               DebateConfig(method="decentralized", n_agents=3, rounds=2),
               DebateConfig(method="decentralized", n_agents=3, rounds=1, mad_aggregator="plurality", name="Du vote"),
               DebateConfig(method="centralized", n_agents=3, rounds=1),
               DebateConfig(method="single", single_runs=2)]  # fmt: skip
    with FakeOpenAI(plan) as srv:
        pop = population(srv, tmp_outputs)
        runner.run_experiment("never_correct", items, configs, pop, workers=8, progress=False)
        meta, recs = transcripts.load_run("never_correct")
    assert len(recs) == len(items) * len(configs)
    assert plan.total_injected > 0 and {"prose", "wrong_schema", "unknown_label"} <= set(plan.injected)
    fallbacks = 0
    for r in recs:
        assert r["final"]["correct"] in (False, 0.0), (r["method"], r["question_id"])
        assert r["final"]["answer"] != r["answer"] and r["final"]["oracle_any_agent_correct"] is False
        for e in entries(r):
            assert e.get("correct") in (None, False)
            if e["parse_failure"]:  # the fallback gives the truth mass 1/4, and still never counts
                fallbacks += 1
                assert e["p"][r["labels"].index(r["answer"])] == 0.25
    assert fallbacks >= 2 * 3  # at least the all-prose questions' agents
    all_failed = [r for r in recs if r["status"] == "ok" and all(e["parse_failure"] for e in entries(r))]
    assert all_failed and all(r["final"]["answer"] is None for r in all_failed)
    assert meta["summary"]["correct"] == 0


# ----------------------------------------------------------------------------- a trickling endpoint
TRICKLE = 0.2  # seconds between two bytes: every gap is far below the client's timeout, the whole reply ~1 min


def ended(fn, within: float):
    """fn()'s result or exception, asserting it ended within `within` s (far above docs/faults.md's bound)."""
    out: list = []

    def run():
        try:
            out.append(fn())
        except Exception as e:  # noqa: BLE001 (the test looks at whichever error it is)
            out.append(e)

    t = threading.Thread(target=run, daemon=True)  # a call that never ends fails the test, never hangs it
    t.start()
    t.join(within)
    assert not t.is_alive(), f"still running after {within} s: the deadline did not end it"
    return out[0]


def test_a_trickling_endpoint_fails_each_attempt_by_its_deadline_then_the_call():
    """One byte every 0.2 s never trips the SDK's 1 s gap timeout; the deadline on the whole response does (~2 s)."""
    with FakeOpenAI(mode="trickle", trickle_interval=TRICKLE) as srv:
        c = LLMClient("m", srv.url, KEY, timeout=1.0, max_attempts=2, breaker=1000)
        err = ended(lambda: c.generate([{"role": "user", "content": "hi"}]), within=30)
        assert isinstance(err, CallDeadlineExceeded) and isinstance(err, openai.APITimeoutError), repr(err)
        assert srv.count == 2 and c.stats()["retries"] == 1 and c.stats()["failures"] == 1
        assert KEY not in str(err) and srv.url in c.where
        # what to change: a server answering one call at a time queues the calls in flight past the deadline
        assert "up to 8 calls in flight" in str(err) and "fewer workers (--workers, WORKERS)" in str(err)


def test_a_run_against_a_trickling_endpoint_stops_with_one_line(tmp_outputs):
    """Attempts that time out count for the circuit breaker: the run stops with EndpointDown naming the timeouts."""
    items = make_items(2, k=4, seed=5)
    with FakeOpenAI(mode="trickle", trickle_interval=TRICKLE) as srv:
        pop = population(srv, tmp_outputs, timeout=1.0, max_attempts=3, breaker=2, preflight=False)
        cfg = DebateConfig(method="acemad", n_agents=2, rounds=1)
        err = ended(lambda: runner.run_experiment("trickle", items, [cfg], pop, workers=1, progress=False), 60)
    assert isinstance(err, EndpointDown) and "timed out" in str(err) and "\n" not in str(err), repr(err)
    assert KEY not in str(err)


def test_a_question_s_calls_end_by_its_deadline(tmp_outputs):
    """question_time bounds every call of one question, retries included: it fails once its time is up."""
    items = make_items(1, k=4, seed=6)
    with FakeOpenAI(mode="trickle", trickle_interval=TRICKLE) as srv:
        pop = population(
            srv, tmp_outputs, timeout=1.0, max_attempts=100, retry_time=100.0, breaker=1000, question_time=1.5
        )
        cfg = DebateConfig(method="acemad", n_agents=2, rounds=1)
        ended(lambda: runner.run_experiment("q_deadline", items, [cfg], pop, workers=1, progress=False), 60)
        _, recs = transcripts.load_run("q_deadline")
    assert srv.count <= 2 * 2  # two agents, each: one full attempt (1 s) and one cut short at 1.5 s
    assert pop.usage()["failures"] >= 1 and all(r["status"] != "ok" for r in recs), recs


# ----------------------------------------------------------------------------- parameters per run
def test_a_set_that_shapes_the_runs_names_a_run_of_its_own():
    assert run_key("default", {"SEED": 1}) == "default.set-SEED-1"
    assert run_key("default", {"SEED": 0, "WORKERS": 2, "BASE_URL": "http://127.0.0.1:9/v1"}) == "default"
    assert run_key("default", {"BENCHMARKS": ["bbh"]}).startswith("default.set-")  # a hash: not a folder name
    same = {run_key("default", parse_sets([f"ETA={v}"])) for v in ("4", "4.0", "4e0", "+4.0E+0")}  # one value, one run
    assert same == {"default.set-ETA-4"} and parse_sets(["ETA=1e-3"]) == {"ETA": 0.001}  # YAML 1.1 reads 1e-3 as text


def test_a_set_that_shapes_the_runs_makes_new_runs_and_subsets_beside_the_profiles_own(smoke_outputs):
    single = [DebateConfig(method="single", single_runs=1)]
    seen = {}
    for profile, seed in (("default", 0), ("default.set-SEED-1", 1), ("default", 0)):
        S = Setup(profile=profile, seed=seed, benchmarks=["arc_challenge"])
        meta, records = S.run("probe", single, n_max=5)  # seed 1: other items, other subsets, a run of its own
        seen.setdefault(profile, meta["data_hash"])
        assert meta["data_hash"] == seen[profile]
    assert seen["default"] != seen["default.set-SEED-1"]
    assert (P.outputs("runs") / "default.set-SEED-1" / "probe" / "meta.json").is_file()
    assert (P.outputs("runs") / "default" / "probe" / "meta.json").is_file()
