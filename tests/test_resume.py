"""Crash and resume: a run SIGKILLed or Ctrl-C'd mid-way and resumed ends with the records of an uninterrupted run,
loses and duplicates nothing, and never asks again for a call it had answered and cached. The runner works in a
subprocess (tests/resume_worker.py) against a fault-injecting fake server whose answer depends only on the request.
Records are compared without their `usage` counters (cache hits and retries legitimately differ). The synthetic
population's fast paths (batches of arrays, the paused collector, the line parser) keep every result."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.llm_agent import LLMAgent, LLMPopulation
from acemad_utils.agents.sim import make_items
from acemad_utils.data import transcripts
from acemad_utils.data.transcripts import gc_paused, parse_line, parse_scalars, scalars, transcript_bytes
from acemad_utils.experiments import runner
from acemad_utils.experiments.runner import Appender
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.schema import Agent, AgentSpec, Population, Step
from tests import resume_worker as W
from tests.fake_openai import FakeOpenAI, FaultInjector

WORKER = Path(__file__).resolve().parent / "resume_worker.py"
N = 30  # questions
KILL_AFTER = 5  # records on disk when the worker is killed
PLAN = dict(rate=0.3, seed=31, max_faults_per_request=2, slow_delay=1.6)  # 2 < the worker's max_attempts


def worker(root: Path, url: str, cache: Path, name: str = "resume", bar: bool = False) -> subprocess.Popen:
    env = {**os.environ, "ACEMAD_SMOKE": "1", "OPENAI_API_KEY": "sk-test-resume-0000", "RESUME_PROGRESS": str(int(bar))}
    cmd = [sys.executable, str(WORKER), str(root), name, url, str(cache), str(N), "4"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for_records(proc: subprocess.Popen, path: Path, n: int = KILL_AFTER) -> None:
    """Poll (bounded) until n records are on disk; the worker must still be running."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the worker ended before it could be stopped: " + proc.stderr.read()[-2000:]


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def transcript(root: Path, name: str = "resume") -> Path:
    return root / "outputs" / "smoke" / "runs" / name / "transcripts.jsonl"


def strip_usage(rec: dict) -> str:
    rec = json.loads(json.dumps(rec))
    for e in [rec, *(e for r in rec.get("rounds", []) for e in r), *rec.get("runs", []), *rec.get("moderator", [])]:
        e.pop("usage", None)
    return json.dumps(rec, sort_keys=True, ensure_ascii=False)


def scope_of_seed() -> dict:
    """Per-call seed -> call scope of every call the worker's debate can make (a request body tells its call)."""
    agent = LLMAgent(AgentSpec(), client=None, seed=W.RUN_SEED)
    out = {}
    for q in W.questions(N):
        for i in range(W.N_AGENTS):
            for t in range(1, W.ROUNDS + 1):
                for kind in ("argue", "commit", "repair"):
                    scope = f"{q.id}|agent={i}|round={t}|repeat=0|role=debater|{kind}"
                    seed = agent.call_config(scope, None).seed
                    assert seed not in out
                    out[seed] = scope
    return out


def cache_key(body: dict, scopes: dict) -> str:
    """The cache key the client computed for this request (client.LLMClient.generate)."""
    rf = body.get("response_format")
    fmt = None if rf is None else {"schema": rf["json_schema"]["schema"]}
    params = {k: body[k] for k in ("temperature", "seed", "max_tokens", "top_p") if k in body}
    scope = scopes[body["seed"]]
    return ResponseCache.key(model=body["model"], kind="local-llama.cpp", params=params, messages=body["messages"],
                             fmt=fmt, scope=scope)  # fmt: skip


def complete(bodies: list) -> list:
    """Requests that arrived whole (one cut off by the SIGKILL was never answered, so it cannot be cached)."""
    return [b for b in bodies if "model" in b and "messages" in b]


def cache_keys(path: Path) -> set:
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return {k for (k,) in con.execute("SELECT key FROM responses")}
    finally:
        con.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[list, dict, int]:
    """An uninterrupted run (a fresh server with the same fault plan, a fresh cache): records, summary, requests."""
    root = tmp_path_factory.mktemp("reference")
    with FakeOpenAI(FaultInjector(**PLAN)) as srv:
        summary = finish(worker(root, srv.url, root / "cache.sqlite"))
        return transcripts.read_jsonl(transcript(root)), summary, srv.count


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, reference):
    scopes = scope_of_seed()
    root_a, cache_a = tmp_path / "killed", tmp_path / "cache_killed.sqlite"
    with FakeOpenAI(FaultInjector(**PLAN)) as srv:
        # --- phase 1: start, wait until some (not all) records are on disk, SIGKILL
        proc, path = worker(root_a, srv.url, cache_a), transcript(root_a)
        wait_for_records(proc, path)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        before = path.read_bytes().count(b"\n")
        assert KILL_AFTER <= before < N, before
        deadline = time.monotonic() + 30  # the server finishes replies to the dead process (counted, not used)
        while srv.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        bodies1 = list(srv.requests)
        cached1 = cache_keys(cache_a)  # what phase 1 answered and stored: never to be asked again
        sent1 = {cache_key(b, scopes) for b in complete(bodies1)}
        assert cached1 and cached1 <= sent1  # the reconstruction of cache keys from request bodies is exact

        # --- phase 2: resume to the end
        summary2 = finish(worker(root_a, srv.url, cache_a))
        bodies2 = srv.requests[len(bodies1) :]
    repeated = [b for b in complete(bodies2) if cache_key(b, scopes) in cached1]
    assert repeated == []  # nothing answered and cached in phase 1 went over the wire again

    ref, summary_b, reference_requests = reference
    final = transcripts.read_jsonl(path)
    ids = [r["question_id"] for r in final]
    assert ids == [q.id for q in W.questions(N)]  # none lost, none duplicated, canonical order
    assert all(r["status"] == "ok" for r in final + ref)
    assert [strip_usage(r) for r in final] == [strip_usage(r) for r in ref]
    assert transcript_bytes(path).endswith(b"\n") and b"\n\n" not in transcript_bytes(path)
    # the resumed run paid only for what the killed one had not done
    assert summary2["session"]["network_calls"] < reference_requests
    assert summary2["session"]["cache_hits"] > 0 and summary2["ok"] == N == summary_b["ok"]
    assert summary2["parse_failures"] == summary_b["parse_failures"]
    assert summary2["correct"] == summary_b["correct"]


# ----------------------------------------------------------------------------- torn lines, in process
def test_torn_last_line_is_dropped_and_recomputed_from_the_cache(fake_server, tmp_outputs):
    items = make_items(6, k=3, seed=4)
    cfg = DebateConfig(method="acemad", n_agents=2, rounds=2)
    srv = fake_server
    pop = LLMPopulation(model="m", base_url=srv.url, api_key="sk-test", cache=str(tmp_outputs / "c.sqlite"))
    d = runner.run_experiment("torn", items, [cfg], pop, workers=2, progress=False)
    path = d / "transcripts.jsonl"
    clean = transcript_bytes(path)
    lines = clean.splitlines(keepends=True)
    # a crash while writing record 5 of a run that never completed: records 1-4 whole, then half a line
    (d / "transcripts.jsonl.gz").unlink()
    path.write_bytes(b"".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    n = srv.count
    with pytest.warns(UserWarning, match="torn"):
        runner.run_experiment("torn", items, [cfg], pop, workers=2, progress=False)
    assert srv.count == n  # records 5 and 6 were rebuilt from the cache, no new request
    after = transcript_bytes(path)
    recs = transcripts.read_jsonl(path)
    assert [r["question_id"] for r in recs] == [q.id for q in items]
    assert [strip_usage(r) for r in recs] == [strip_usage(json.loads(x)) for x in lines]
    assert after.count(b"\n") == 6 and all(json.loads(x) for x in after.splitlines())
    assert all(r["usage"]["cache_hits"] == r["usage"]["calls"] for r in recs[4:])


def test_corrupt_lines_are_dropped_never_parsed_as_data_and_a_torn_tail_never_glues_to_the_next_line(tmp_path):
    good = {"question_id": "q", "config_hash": "h", "repeat": 0, "status": "ok"}
    path = tmp_path / "t.jsonl"
    line = json.dumps(good).encode()
    path.write_bytes(line + b'\n{"question_id": "q2", "conf\n42\n[1]\n\xff\xfe\n' + line[:-1])
    with pytest.warns(UserWarning) as w:
        recs = transcripts.read_jsonl(path)
    assert recs == [good] and len(w) == 5
    # appending after a torn line starts a new line; a record that lost only its newline keeps its line
    whole = json.dumps(good).encode()
    for before, after in ((b'{"b": ', b'{"b": \n'), (whole, whole + b"\n"), (b"", b"")):
        path.write_bytes(before)
        out = Appender(path)
        out.write_many([whole])
        out.close()
        assert path.read_bytes() == after + whole + b"\n"


# ----------------------------------------------------------------------------- Ctrl-C
def interrupt(proc: subprocess.Popen, path: Path, presses: int) -> tuple[str, str]:
    """SIGINT the worker `presses` times once KILL_AFTER records are on disk; its (stdout, stderr). A second press
    is sent only after the worker answered the first on stderr (two signals sent at once may arrive as one)."""
    wait_for_records(proc, path)
    os.kill(proc.pid, signal.SIGINT)
    first = proc.stderr.readline() if presses == 2 else ""
    if first.startswith("interrupt: finishing"):
        os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=400)  # a bound: the questions in flight finish first, slowly under load
    return out, first + err


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_the_ctrl_c_message_starts_its_own_line_under_a_progress_bar(tmp_path):
    """On a terminal the bar is redrawn with a carriage return: a message glued to its end would be overwritten."""
    root = tmp_path / "bar"
    with FakeOpenAI(FaultInjector(**PLAN)) as srv:
        _, err = interrupt(worker(root, srv.url, tmp_path / "cache.sqlite", bar=True), transcript(root), presses=1)
    assert "it/s]" in err or "q/s]" in err, err[-2000:]  # the bar was drawn
    assert any(x.startswith("interrupt: finishing ") for x in re.split(r"[\r\n]", err)), err[-2000:]


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_then_resume_equals_an_uninterrupted_run(tmp_path, presses, reference):
    """One Ctrl-C lets the questions in flight finish, two stop at once; either way exit 130 with one line, whole
    records only, a summary counting exactly them, and a resume that ends where an uninterrupted run does."""
    root, cache = tmp_path / "interrupted", tmp_path / "cache.sqlite"
    path = transcript(root)
    with FakeOpenAI(FaultInjector(**PLAN)) as srv:
        out, err = interrupt(worker(root, srv.url, cache), path, presses)
        raw = path.read_bytes()
        lines = err.strip().splitlines()
        saved = raw.count(b"\n")
        assert lines[-1] == f"interrupted: {saved} of {N} records saved; rerun to resume", err[-3000:]
        assert "Traceback" not in err and "Exception in thread" not in err and out == ""
        assert all(x.startswith("interrupt: finishing ") for x in lines[:-1]) and len(lines) <= 2, err
        assert raw.endswith(b"\n") and KILL_AFTER <= saved < N
        recs = [json.loads(x) for x in raw.splitlines()]  # every line whole: json.loads raises otherwise
        meta = json.loads((path.parent / "meta.json").read_text())
        s = meta["summary"]
        assert s["interrupted"] is True and s["records"] == s["ok"] == saved == len(recs) and s["expected"] == N
        assert s["missing"] == N - saved and s["questions"] == len({r["question_id"] for r in recs})
        resumed = finish(worker(root, srv.url, cache))
    assert resumed["ok"] == N and "interrupted" not in resumed
    assert "interrupted" not in json.loads((path.parent / "meta.json").read_text())["summary"]
    final = transcripts.read_jsonl(path)
    assert [r["question_id"] for r in final] == [q.id for q in W.questions(N)]
    assert [strip_usage(r) for r in final] == [strip_usage(r) for r in reference[0]]


class Fixed(Agent):
    def act(self, turn):
        p = np.arange(1.0, len(turn.question.options) + 1) + turn.agent + turn.round
        return Step(f"{turn.agent}", p / p.sum(), p / p.sum() if turn.want_peer_prediction else None)


class FixedPopulation(Population):
    """Fixed beliefs: one question at a time in this thread (not batched), or in the question pool (concurrent)."""

    synthetic, name = True, "fixed"

    def __init__(self, seed=0, concurrent=False):
        self.seed, self.concurrent = seed, concurrent

    def agents(self, specs, question, repeat=0):
        return [Fixed() for _ in specs]


def test_ctrl_c_in_a_sequential_run(tmp_outputs, monkeypatch):
    """One question after the other in this thread: a Ctrl-C during the third lets it finish, saves it and stops; the
    resume completes to the bytes of an uninterrupted run."""
    items = make_items(8, k=4, seed=2)
    cfg = DebateConfig(method="acemad", n_agents=3, rounds=2)
    real, calls = runner.run_question, []

    def run_question(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # delivered to this (the main) thread, mid-question
        return real(*a, **kw)

    monkeypatch.setattr(runner, "run_question", run_question)
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN in a background job of a script
    with pytest.raises(runner.RunInterrupted) as e:
        runner.run_experiment("seq", items, [cfg], FixedPopulation(), progress=False)
    assert str(e.value) == "interrupted: 3 of 8 records saved; rerun to resume" and len(calls) == 3
    assert signal.getsignal(signal.SIGINT) is before  # the runner's handler is gone again
    d = transcripts.run_dir("seq")
    assert json.loads((d / "meta.json").read_text())["summary"]["interrupted"] is True
    assert (d / "transcripts.jsonl").read_bytes().count(b"\n") == 3
    runner.run_experiment("seq", items, [cfg], FixedPopulation(), progress=False)
    assert len(calls) == 8  # the three saved questions were not run again
    resumed = transcript_bytes(d / "transcripts.jsonl")
    monkeypatch.setattr(runner, "run_question", real)
    runner.run_experiment("seq_ref", items, [cfg], FixedPopulation(), progress=False)
    assert resumed == transcript_bytes(runner.run_dir("seq_ref") / "transcripts.jsonl")


def test_a_second_ctrl_c_never_raises_inside_the_pools_wait(tmp_outputs, monkeypatch):
    """Both presses land while the main thread waits on the question pool: raised there, the exception could leave
    the waiter's lock held and the question threads hang the process's exit. The loop notices the second press."""
    real_wait, inside = runner.wait, []

    def wait(fs, timeout=None, return_when=None):  # the two signals arrive while the pool is waited on
        if not inside:
            handler = signal.getsignal(signal.SIGINT)
            try:
                handler(signal.SIGINT, None)
                handler(signal.SIGINT, None)
                inside.append("no raise")
            except KeyboardInterrupt:
                inside.append("raised inside wait()")
                raise
        return real_wait(fs, timeout=timeout, return_when=return_when)

    monkeypatch.setattr(runner, "wait", wait)
    cfg, pop = DebateConfig(method="acemad", n_agents=3, rounds=2), FixedPopulation(concurrent=True)
    with pytest.raises(runner.RunInterrupted, match="rerun to resume"):
        runner.run_experiment("pool", make_items(40, k=4, seed=2), [cfg], pop, workers=4, progress=False)
    assert inside == ["no raise"]


# ----------------------------------------------------------------------------- the synthetic population's fast paths
BATCHED = """
import os, sys
os.environ["ACEMAD_ROOT"] = sys.argv[1]
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.experiments import runner
from acemad_utils.protocol.config import DebateConfig
runner.BATCH = 16  # many batches: the interrupt lands between two of them
cfg = [DebateConfig(method="acemad", n_agents=15, rounds=5), DebateConfig(method="decentralized", n_agents=15)]
try:
    runner.run_experiment("pool", make_items(1500, k=5, seed=9), cfg, SimPopulation(seed=1), progress=False)
except runner.RunInterrupted as e:
    print(e, file=sys.stderr)
    sys.exit(130)
"""


def batched(root: Path) -> subprocess.Popen:
    cmd, env = [sys.executable, "-c", BATCHED, str(root)], {**os.environ, "ACEMAD_SMOKE": "0"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_ctrl_c_in_a_batched_run_then_resume(tmp_path):
    """SIGINT mid-run: whole lines only, exit 130 with the one-line message; the resume ends with the bytes of an
    uninterrupted run."""
    path = tmp_path / "interrupted/outputs/runs/pool/transcripts.jsonl"
    proc = batched(tmp_path / "interrupted")
    wait_for_records(proc, path, 200)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    raw, last = path.read_bytes(), err.strip().splitlines()[-1]
    assert last == f"interrupted: {len(raw.splitlines())} of 3000 records saved; rerun to resume", err
    assert "Traceback" not in err and raw.endswith(b"\n")
    assert all(json.loads(line)["status"] == "ok" for line in raw.splitlines())  # whole records only
    assert batched(tmp_path / "interrupted").wait(timeout=300) == 0
    assert batched(tmp_path / "reference").wait(timeout=300) == 0
    assert transcript_bytes(path) == transcript_bytes(tmp_path / "reference/outputs/runs/pool/transcripts.jsonl")


def test_gc_paused_restores_the_collector_and_freezes_what_was_loaded():
    with gc_paused():
        assert not gc.isenabled()
        loaded = [[float(i)] for i in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() >= len(loaded)  # the loaded lists are never scanned again
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector that was off stays off
    finally:
        gc.enable()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=6))
@settings(max_examples=100, deadline=None)
def test_parse_line_gives_what_json_loads_gives(rec):
    """Every line json.dumps writes (NaN, Infinity, lone surrogates, big integers included) parses to what json.loads
    gives (NaN compared by its repr)."""
    line = json.dumps(rec, ensure_ascii=False, sort_keys=True)
    for raw in (line, line.encode("utf-8", "surrogatepass")):
        try:
            expected = json.loads(raw)
        except ValueError:
            with pytest.raises(ValueError):
                parse_line(raw)
            continue
        assert repr(parse_line(raw)) == repr(expected)


RECORD_KEYS = st.sampled_from(["answer", "final", "method", "rounds", "usage", "labels", "repeat", "error", "other"])


@given(st.dictionaries(RECORD_KEYS, JSON_VALUES, max_size=8))
@settings(max_examples=200, deadline=None)
def test_a_lean_read_gives_the_records_scalars_as_a_whole_read_does(rec):
    """parse_scalars (notebook 08's read) gives scalars(parse_line(line)): the same keys in the same order, whatever
    kind of value each known key holds and whatever other key a line has."""
    line = json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogatepass")
    try:
        expected = scalars(json.loads(line))
    except ValueError:
        with pytest.raises(ValueError):
            parse_scalars(line)
        return
    assert repr(parse_scalars(line)) == repr(expected)


def test_after_a_second_ctrl_c_the_questions_in_flight_send_no_new_call(tmp_outputs, monkeypatch):
    """The process's exit waits for the question threads: stopped, each ends at its next call instead of debating on
    to its last (12 calls a question here); a later run of the same population calls again."""
    model, presses = FaultInjector(rate=0.0), []

    def slow(body, n):
        if n == 5 and not presses:  # the first round's 6 calls (2 questions x 3 agents) are out: Ctrl-C twice
            presses.append(signal.getsignal(signal.SIGINT))
            for _ in range(2):
                presses[0](signal.SIGINT, None)
        return replace(model(body, n), delay=1.0 if n <= 5 else 0.0)

    cfg = DebateConfig(method="acemad", n_agents=3, rounds=2)
    with FakeOpenAI(slow) as srv:
        pop = LLMPopulation(model="fake-model", base_url=srv.url, api_key="sk-fake", preflight=False)
        with pytest.raises(runner.RunInterrupted):
            runner.run_experiment("stopped", make_items(8, k=4, seed=3), [cfg], pop, workers=2, progress=False)
        for t in [t for t in threading.enumerate() if t.name.startswith("question")]:
            t.join(30)
        assert srv.count <= 2 * 3 + 2 * 3  # the 6 calls out when it stopped, a few more at most (else 2 x 12)
        again = runner.run_experiment("again", make_items(2, k=4, seed=4), [cfg], pop, workers=2, progress=False)
    assert [r["status"] for r in transcripts.read_jsonl(again / transcripts.COMPRESSED)] == ["ok", "ok"]


def test_a_resume_keeps_each_endpoints_answers_whatever_order_its_role_endpoints_first_called_in():
    """Role endpoints are made at their first call, in whatever order the threads reach them: meta.json matches
    each by its id, so one endpoint's mode never lands on another's entry."""
    urls = ["http://u:pw@127.0.0.1:1/v1?key=s3cret", "http://127.0.0.1:2/v1"]
    ids = []
    for order in (urls, urls[::-1]):
        pop = LLMPopulation("m", "http://127.0.0.1:3/v1", "sk-x", preflight=False)
        for url in order:
            pop.client(url)
        ids.append({e["id"] for e in pop.describe()["endpoints"]})
        assert "s3cret" not in json.dumps(pop.describe()) and "pw" not in json.dumps(pop.describe())
    assert ids[0] == ids[1] and len(ids[0]) == 3 and "run" in ids[0]

    def entry(i, **found):
        return {"id": i, "endpoint": "local-llama.cpp", "max_concurrency": 8} | found

    before = {"endpoints": [entry("run", model="m", structured_output="json_object"),
                            entry("a", model="ma", structured_output="json_schema"),
                            entry("b", model="mb", structured_output="text")]}  # fmt: skip
    now = {"endpoints": [entry("run"), entry("b"), entry("a")]}  # a resume that has called nothing yet
    got = runner.how_answered(now, before)["endpoints"]
    assert [(e["id"], e["model"], e["structured_output"]) for e in got] == [
        ("run", "m", "json_object"), ("b", "mb", "text"), ("a", "ma", "json_schema")]  # fmt: skip
    # a meta.json written before endpoints had ids: matched by position, as before
    legacy = runner.how_answered({"endpoints": [{"endpoint": "k"}]}, {"endpoints": [{"endpoint": "k", "model": "x"}]})
    assert legacy["endpoints"] == [{"endpoint": "k", "model": "x"}]
