"""The inspect_ai solvers under an eval as researchers run it: concurrency, model roles, spans, inspect's cache, the
paired re-decisions scorer, failing samples, and the command line through the package's entry point."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra: pip install -e '.[inspect]'")
from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import _model as inspect_model  # noqa: E402
from inspect_ai.model import get_model  # noqa: E402
from inspect_ai.scorer import choice  # noqa: E402

from acemad_utils.command import main  # noqa: E402
from acemad_utils.data import paths as P  # noqa: E402
from acemad_utils.data.transcripts import read_jsonl  # noqa: E402
from acemad_utils.integrations import inspect_ai as solvers  # noqa: E402
from acemad_utils.integrations.inspect_ai import STORE_KEY, acemad, decisions  # noqa: E402
from acemad_utils.protocol.prompts import PERSONAS  # noqa: E402
from tests.fake_openai import FakeOpenAI, FaultInjector, error  # noqa: E402

KEY = "sk-fake-inspect"
MODEL = "openai-api/fake/fake-model"
pytestmark = pytest.mark.slow  # each test runs an eval: seconds to a minute on a loaded 2-core machine


class Gate:
    """Holds every request until `n` have arrived (at most `wait` s), then answers with `plan`: the server's
    max_in_flight reaches n only when the client overlapped n calls (no timing assumption)."""

    def __init__(self, plan, n: int, wait: float = 60.0):
        self.plan, self.n, self.wait, self.arrived = plan, n, wait, 0
        self.cv = threading.Condition()

    def __call__(self, body, n):
        with self.cv:
            self.arrived += 1
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.arrived >= self.n, timeout=self.wait)
        return self.plan(body, n)


def debate(n: int, rounds: int = 2, agents: int = 3, *, before=(), scorer=None, **kw) -> Task:
    """n colour questions (after the samples `before`) for AceMAD's solver, scored by choice() unless told."""
    data = [Sample(input=f"Question {i}: which colour?", choices=["red", "green", "blue"], target="ABC"[i % 3],
                   id=f"s{i}") for i in range(n)]  # fmt: skip
    return Task(dataset=[*before, *data], solver=acemad(rounds=rounds, agents=agents, **kw), scorer=scorer or choice())


def run_eval(task, tmp_path, *, limit: float = 600.0, **kw):
    """inspect's eval in a daemon thread: a frozen eval fails the test after `limit` s instead of hanging it."""
    out: dict = {}
    go = lambda: out.update(logs=inspect_eval(task, model=MODEL, log_dir=str(tmp_path / "logs"), display="none", **kw))
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"the eval made no end within {limit} s"
    (log,) = out["logs"]
    return log


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("FAKE_API_KEY", KEY)
    # Each test starts clean: the OS may give a fake server the port, so the URL, of an earlier test's server, and
    # what is kept per URL would carry over: inspect's memoized model (with that test's key) and the structured-output
    # mode the solvers settled for that server.
    monkeypatch.setattr(inspect_model, "_models", {})
    monkeypatch.setattr(solvers, "_MODES", {})
    monkeypatch.setattr(solvers, "_PROBING", {})


def test_more_samples_than_threads_finish_with_calls_overlapping(tmp_path):
    n = 40  # asyncio's default executor has min(32, cores + 4) threads; every sample debates at once
    with FakeOpenAI(Gate(FaultInjector(rate=0.0), 16)) as srv:
        log = run_eval(debate(n), tmp_path, max_samples=n, max_connections=16, model_base_url=srv.url)
        assert srv.count == n * 2 * 3 * 2  # every agent of every round: argue and commit
        assert srv.max_in_flight == 16  # more than one sample's 3 agents at once, never above max_connections
    assert log.status == "success" and len(log.samples) == n


def test_the_agents_of_a_round_call_at_once(tmp_path):
    with FakeOpenAI(Gate(FaultInjector(rate=0.0), 5)) as srv:
        assert run_eval(debate(1, 1, 5), tmp_path, model_base_url=srv.url).status == "success"
        assert srv.max_in_flight == 5


def test_skeptic_role_calls_its_own_model_and_every_call_has_its_span(tmp_path, monkeypatch):
    monkeypatch.setenv("SECOND_API_KEY", KEY)
    skeptic = PERSONAS["Skeptic"]
    with FakeOpenAI(FaultInjector(rate=0.0)) as first, FakeOpenAI(FaultInjector(rate=0.0)) as second:
        roles = {"skeptic": get_model("openai-api/second/other-model", base_url=second.url)}
        log = run_eval(debate(2, scorer=[choice(), decisions()]), tmp_path, model_base_url=first.url, model_roles=roles)
        systems = lambda srv: {r["messages"][0]["content"] for r in srv.requests}
        assert systems(second) == {skeptic} and second.count == 2 * 2 * 2  # 1 Skeptic, 2 rounds, 2 calls, 2 samples
        assert skeptic not in systems(first) and first.count == 2 * 2 * 2 * 2
    assert log.status == "success"
    correct = []
    for s in log.samples:
        spans = {e.id: e.name for e in s.events if e.event == "span_begin" and e.type == "acemad"}
        calls = [e for e in s.events if e.event == "model"]
        assert len(calls) == len(spans) == 2 * 3 * 2 and {e.span_id for e in calls} == set(spans)
        assert "round 2 · agent 2 · commit" in spans.values()
        # the transcript's record and the scorer: AceMAD's own decision beside its re-decisions
        meta, rec = s.metadata[STORE_KEY], s.store[STORE_KEY]
        assert meta["decisions"]["acemad"] == rec["final"]["answer"] == meta["answer"]
        assert len(meta["decisions"]["shuffled"]) > 1
        value = s.scores["decisions"].value
        names = {"acemad", "uniform", "self_belief", "surprisingly_popular", "majority_round1", "shuffled"}
        assert set(value) == names | {"premise_lift"} and -1 <= value["premise_lift"] <= 1
        assert value["acemad"] == float(rec["final"]["correct"])
        assert s.scores["choice"].value == ("C" if rec["final"]["correct"] else "I")
        assert all(e["weight"] is not None and e["q"] is not None for r in rec["rounds"] for e in r)
        assert json.loads(json.dumps(rec)) == rec  # the stored debate is plain JSON (the log holds it)
        correct.append(rec["final"]["correct"])
    metrics = {sc.name: sc.metrics["accuracy"].value for sc in log.results.scores if sc.name != "premise_lift"}
    assert metrics["acemad"] == metrics["choice"] == pytest.approx(sum(correct) / len(correct))
    assert not list(P.outputs("runs", create=False).glob("inspect*"))  # inspect's log holds the run, not outputs/


def test_commitments_ask_for_their_schema_as_the_commands_do_and_a_refused_mode_steps_down(tmp_path):
    """json_schema first (inspect's response_schema), as the engine's own client; a server that refuses it the way
    llama-cpp-python's does (a 500, which inspect would retry) gets json_object with the schema, its grammar."""
    refusal = error(500, "('body', 'response_format', 'type') Input should be 'text' or 'json_object'")
    model, refused = FaultInjector(rate=0.0), []

    def no_json_schema(body, n):
        if (body.get("response_format") or {}).get("type") == "json_schema":
            refused.append(n)
            return refusal
        return model(body, n)

    with FakeOpenAI(FaultInjector(rate=0.0)) as srv:
        assert run_eval(debate(4), tmp_path, max_samples=2, model_base_url=srv.url).status == "success"
        formats = [b["response_format"] for b in srv.requests if "response_format" in b]
    assert len(formats) == 4 * 2 * 3 and {f["type"] for f in formats} == {"json_schema"}  # every commitment
    first = formats[0]["json_schema"]
    assert first["strict"] and "peer_prediction" in first["schema"]["properties"]
    with FakeOpenAI(no_json_schema) as srv:
        log = run_eval(debate(4), tmp_path, max_samples=2, model_base_url=srv.url)
        later = [b["response_format"] for b in srv.requests if "response_format" in b][len(refused) :]
    # one probe (the openai SDK's own 2 retries, not inspect's), not one per commitment in flight (2 samples x 3
    # agents): the others wait for its answer
    assert log.status == "success" and 1 <= len(refused) <= 3
    assert len(later) == 4 * 2 * 3 and all(f["type"] == "json_object" and f["schema"] for f in later)
    assert not any(e["parse_failure"] for s in log.samples for r in s.store[STORE_KEY]["rounds"] for e in r)


def test_a_mode_accepted_earlier_and_refused_later_steps_down_instead_of_failing(tmp_path):
    """The accepted mode is kept per URL, and a server restarted there (or another one given the port) may refuse
    it: the sample steps down a mode, as LLMClient does."""
    model, accepted = FaultInjector(rate=0.0), []

    def restarted_without_json_schema(body, n):
        if (body.get("response_format") or {}).get("type") == "json_schema":
            if len(accepted) >= 2 * 3:  # the first sample's commitments: 2 rounds x 3 agents
                return error(400, "response_format: json_schema is not supported by this server")
            accepted.append(n)
        return model(body, n)

    with FakeOpenAI(restarted_without_json_schema) as srv:
        log = run_eval(debate(3), tmp_path, max_samples=1, model_base_url=srv.url)
        formats = [b["response_format"]["type"] for b in srv.requests if "response_format" in b]
    assert log.status == "success" and all(s.error is None for s in log.samples)
    assert formats[:6] == ["json_schema"] * 6  # the first sample's commitments
    # then json_object for the other two samples' 12; the refused json_schema requests are at most the 3 a round's
    # agents sent at once, and may arrive between the others' retries (order is arrival order)
    tail = formats[6:]
    assert tail.count("json_object") == 2 * 2 * 3 and 1 <= tail.count("json_schema") <= 3 and len(tail) <= 15


def test_a_400_about_one_prompt_keeps_the_structured_mode_for_the_other_samples(tmp_path):
    """Sample s1's commitments refused for their length after json_schema has answered: s1 fails alone, and the
    next sample's commitments still ask json_schema (not json_object, then no format at all)."""
    model = FaultInjector(rate=0.0)

    def too_long_for_s1(body, n):
        if body.get("response_format") and "Question 1:" in json.dumps(body["messages"]):
            return error(400, "This model's maximum context length is 128000 tokens")
        return model(body, n)

    with FakeOpenAI(too_long_for_s1) as srv:
        log = run_eval(debate(3), tmp_path, max_samples=1, model_base_url=srv.url, fail_on_error=False)
        formats = [b["response_format"]["type"] for b in srv.requests if "response_format" in b]
        last = [b.get("response_format") for b in srv.requests if "Question 2:" in json.dumps(b["messages"])]
    assert set(formats) == {"json_schema"} and sum(f is not None for f in last) == 2 * 3  # s2: every commitment
    assert [s.error is None for s in log.samples] == [True, False, True]  # s1 alone fails, with the endpoint's 400


def test_cache_replays_every_call_and_keeps_agents_apart(fake_server, tmp_path, monkeypatch):
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "cache"))
    first = run_eval(debate(2, cache=True), tmp_path, model_base_url=fake_server.url)
    sent = fake_server.count
    second = run_eval(debate(2, cache=True), tmp_path, model_base_url=fake_server.url)
    assert sent == 2 * 2 * 3 * 2 and fake_server.count == sent  # one request per agent, round and kind; then none
    answers = lambda log: [s.store[STORE_KEY]["rounds"] for s in log.samples]
    assert answers(first) == answers(second)


def test_a_sample_that_cannot_be_debated_fails_alone_with_its_reason_and_the_paired_scorer_goes_on(
    fake_server, tmp_path
):
    """One sample not debated, one without a gold answer (no premise lift), one with a lowercase target: every
    score still has every key, so the eval has results; the lowercase target is right as choice() reads it."""
    bad = Sample(input="Which?", choices=["same", "same", "other"], target="A", id="dup")
    odd = [Sample(input="Which colour is the sky?", choices=["red", "blue"], target=t, id=f"t{t}") for t in ("", "b")]
    log = run_eval(debate(2, 1, 2, before=[bad, *odd], scorer=[choice(), decisions()]), tmp_path,
                   model_base_url=fake_server.url)  # fmt: skip
    assert log.status == "success" and len(log.samples) == 5 and log.results is not None
    (s,) = [s for s in log.samples if s.id == "dup"]
    assert s.scores["choice"].value == "I" and "repeats an option text" in s.scores["choice"].explanation
    assert all(STORE_KEY in t.store for t in log.samples if t.id != "dup")
    (low,) = [s for s in log.samples if s.id == "tb"]
    right = low.store[STORE_KEY]["final"]["correct"]
    assert right is not None and low.scores["decisions"].value["acemad"] == float(right)
    assert (low.scores["choice"].value == "C") == right
    metrics = next(sc for sc in log.results.scores if sc.name == "premise_lift").metrics
    # inspect names the metric acemad_utils/known_mean where it sees an installed package, known_mean in a checkout
    (lift,) = [m.value for name, m in metrics.items() if name.rsplit("/", 1)[-1] == "known_mean"]
    assert -1 <= lift <= 1  # the samples without a lift left out, not a NaN for the run


def test_a_time_limit_ends_a_sample_whose_endpoint_hangs(tmp_path):
    """Cancelled by inspect's time limit, the sample ends then, not when its debate would have ended."""
    with FakeOpenAI(FaultInjector(rate=0.0), mode="hang", hang_max=60) as srv:
        t0 = time.monotonic()
        log = run_eval(debate(1, 1, 2), tmp_path, model_base_url=srv.url, time_limit=3, limit=50)
    assert time.monotonic() - t0 < 45 and log.samples[0].limit is not None


def test_replies_that_never_parse_fail_the_eval_with_one_line(tmp_path):
    with FakeOpenAI(FaultInjector(rate=0.0), mode="unparseable") as srv:
        log = run_eval(debate(2, 1, 2), tmp_path, model_base_url=srv.url)
    assert log.status == "error" and "did not parse" in log.error.message and "\n" not in log.error.message.strip()


def test_a_key_the_endpoint_echoes_reaches_no_eval_log(tmp_path, monkeypatch):
    plain = "Tk4c9QmZ2vXw7LpR8nYb3HsJ6dFg1KtA5eUo0iWq"  # not key-like: only redaction by value catches it
    monkeypatch.setenv("FAKE_API_KEY", plain)
    with FakeOpenAI(FaultInjector(rate=0.0), mode="401") as srv:
        log = run_eval(debate(2, 1, 2), tmp_path, model_base_url=srv.url)
        assert f"Bearer {plain}" in srv.auth  # the endpoint got it and quoted it back
    assert log.status == "error" and "Incorrect API key provided: ***" in log.error.message
    # The errors the solver raises: the eval's and each sample's. (inspect's own model events keep the endpoint's
    # raw reply, as they do under any solver, its own generate() included.)
    errors = [log.error, *(s.error for s in log.samples or [] if s.error)]
    assert all(plain not in e.message + e.traceback + e.traceback_ansi for e in errors)


# ----------------------------------------------------------------------------- the command line
TASK_FILE = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import choice

@task
def colours():
    return Task(dataset=[Sample(input="Which colour?", choices=["red", "green", "blue"], target="B")], scorer=choice())
"""


@pytest.mark.parametrize("option", [{"calls": "bogus"}, {"seed": "abc"}, {"seed": -1}, {"cache": "yes"}])
def test_a_bad_solver_option_is_refused_when_the_solver_is_made_before_any_sample(option):
    with pytest.raises(ValueError, match=f"{next(iter(option))}=.* is not allowed"):
        acemad(**option)


@pytest.mark.parametrize("solver", ["acemad", "decentralized", "centralized", "sparse", "majority"])
def test_command_line_solver_on_a_task_that_never_imports_acemad(tmp_path, solver):
    eps = {ep.name for ep in importlib.metadata.entry_points(group="inspect_ai")}
    assert "acemad_utils" in eps, "the inspect_ai entry point is not installed: pip install -e '.[inspect]'"
    (tmp_path / "task.py").write_text(TASK_FILE)
    env = dict(os.environ, FAKE_API_KEY=KEY, SECOND_API_KEY=KEY)
    with FakeOpenAI(FaultInjector(rate=0.0)) as first, FakeOpenAI(FaultInjector(rate=0.0)) as second:
        env["SECOND_BASE_URL"] = second.url
        cmd = [str(Path(sys.executable).parent / "inspect"), "eval", "task.py", "--solver", f"acemad_utils/{solver}",
               "-S", "rounds=1", "-S", "agents=3", "--model", MODEL, "--model-base-url", first.url, "--log-dir", "logs",
               "--model-role", "skeptic=openai-api/second/other", "--model-role", "moderator=openai-api/second/other",
               "--display", "plain"]  # fmt: skip
        if solver == "majority":
            cmd.remove("rounds=1"), cmd.remove("-S")
        p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        assert first.count > 0
        # AceMAD's Skeptic and Centralized's moderator call the second endpoint; the other agents never do
        assert second.count == {"acemad": 2, "centralized": 2}.get(solver, 0)
    assert "accuracy" in p.stdout


def test_the_same_questions_and_seed_debate_as_through_the_command(tmp_path, monkeypatch):
    """Samples without ids (inspect numbers them) take the content id the command gives a question without one, and
    an epoch is the command's repeat: on a deterministic endpoint both give the same answer to every question."""
    rows = [{"question": f"Question {i}: which colour?", "options": ["red", "green", "blue"], "answer": "ABC"[i % 3]}
            for i in range(6)]  # fmt: skip
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    samples = [Sample(input=r["question"], choices=r["options"], target=r["answer"]) for r in rows]
    model = FaultInjector(rate=0.0)

    def same_model(body, n):  # inspect's SDK adds "description": null to a json_schema: the same request otherwise
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        if "description" in schema and schema["description"] is None:
            del schema["description"]
        return model(body, n)

    with FakeOpenAI(same_model) as srv:
        argv = ["run", "q.jsonl", "--model", "fake-model", "--base-url", srv.url, "--methods", "acemad", "--rounds",
                "2", "--agents", "3", "--yes"]  # fmt: skip
        assert main(argv) == 0
        log = run_eval(Task(dataset=samples, solver=acemad(rounds=2, agents=3), scorer=choice()), tmp_path,
                       model_base_url=srv.url)  # fmt: skip
    (run,) = [p for p in (tmp_path / "acemad_runs" / "runs").rglob("transcripts.jsonl.gz")]
    command = {r["question_id"]: r["final"]["answer"] for r in read_jsonl(run)}
    through_inspect = {s.metadata[STORE_KEY]["question_id"]: s.metadata[STORE_KEY]["answer"] for s in log.samples}
    assert len(command) == 6 and through_inspect == command
