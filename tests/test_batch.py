"""CALLS_VIA batch against tests/fake_openai.py's Batch API: the synchronous run's transcripts despite error lines,
missing lines and an expired batch; a process killed while it polls submits nothing twice; export/import round-trip."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from acemad_utils.agents import batch as BA
from acemad_utils.agents import budget as B
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import BatchUnsupported
from acemad_utils.agents.tokenmodel import most_prompt_tokens
from acemad_utils.data.transcripts import read_jsonl
from acemad_utils.experiments import profiles
from acemad_utils.experiments.runner import BudgetStop, run_experiment
from tests import batch_worker as W
from tests.fake_openai import FakeOpenAI, FaultInjector, Reply, completion_body

WORKER = Path(__file__).resolve().parent / "batch_worker.py"
N = 30


def _no_usage(x):
    if isinstance(x, dict):
        return {k: _no_usage(v) for k, v in x.items() if k != "usage"}
    return [_no_usage(v) for v in x] if isinstance(x, list) else x


def strip_usage(path: Path) -> list:
    """A run's records without usage counters (how a reply was obtained), in a fixed order."""
    recs = [_no_usage(r) for r in read_jsonl(path)]
    return sorted(recs, key=lambda r: (r["question_id"], r["method"], r.get("repeat", 0)))


def sync_run(root: Path, n: int = N):
    with FakeOpenAI(FaultInjector(rate=0.0)) as srv:
        pop = W.population(srv.url, str(root / "sync.sqlite"), "sync")
        d = run_experiment("sync", W.questions(n), [W.config()], pop, workers=4, progress=False)
        return d, srv.count, pop.usage()


def test_a_batch_run_writes_the_transcripts_of_the_synchronous_run(full_outputs):
    ref, n_sync, sync_usage = sync_run(full_outputs)
    flaky = lambda cid, body, attempt: attempt == 0 and cid[0] in "01"  # (~1/8 of the lines, once)
    gone = lambda cid, body, attempt: attempt == 0 and cid[0] in "23"
    error = lambda c, b, a: "injected server error" if flaky(c, b, a) else None
    with FakeOpenAI(
        FaultInjector(rate=0.0), batch_delay=0.05, expire={1}, batch_error=error, batch_missing=gone
    ) as srv:
        pop = W.population(srv.url, str(full_outputs / "batch.sqlite"), "batch")
        d = run_experiment("batch", W.questions(N), [W.config()], pop, workers=4, progress=False)
        lines = list(srv.batch_lines)
        statuses = Counter(b["status"] for b in srv.batches.values())
        expired = {json.loads(x)["custom_id"] for b in srv.batches.values() if b["status"] == "expired"
                   for x in srv.files[b["input_file_id"]].decode().splitlines()}  # fmt: skip
    assert strip_usage(d / "transcripts.jsonl") == strip_usage(ref / "transcripts.jsonl")
    assert statuses["expired"] == 1 and statuses["completed"] >= 2 * W.ROUNDS
    seen = Counter(lines)
    assert len(seen) == n_sync  # the distinct requests are the synchronous run's calls
    resent = {k for k, c in seen.items() if c > 1}
    # sent again only after an error line, a missing line or the expired batch, and then once more only
    assert resent == {k for k in seen if k[0] in "0123"} | expired
    assert max(seen.values()) <= 3
    u = pop.usage()
    assert u["failures"] == 0 and u["network_calls"] == n_sync
    # the same tokens, at the Batch API price
    assert u["prompt_tokens"] == sync_usage["prompt_tokens"]
    assert u["cost_usd"] == pytest.approx(sync_usage["cost_usd"] * 0.5)
    # MAX_USD's holds follow the counts the batches reported, not the one-token-per-byte bound held before any
    msgs, client = [{"role": "user", "content": "Which option is right? " * 20}], pop.client(None)
    held = client.estimate_cost("gpt-4o-mini", msgs, {"max_tokens": 1}, batch=True)
    assert held < client.call_cost("gpt-4o-mini", most_prompt_tokens(msgs), 1, 0, batch=True)


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_notebook_03s_methods_in_batch_mode_write_the_synchronous_transcripts(full_outputs):
    """Every config notebook 03 runs under the paper profile (the registry's), 30 questions, both modes."""
    [run] = profiles.notebook_runs("03_main_results", "paper")
    dirs = {}
    for via in ("sync", "batch"):
        with FakeOpenAI(FaultInjector(rate=0.0), batch_delay=0.01) as srv:
            pop = W.population(srv.url, str(full_outputs / f"{via}.sqlite"), via)
            dirs[via] = run_experiment(f"nb03-{via}", W.questions(N), run.configs, pop, workers=8, progress=False)
            batches = len(srv.batches)
    assert strip_usage(dirs["batch"] / "transcripts.jsonl") == strip_usage(dirs["sync"] / "transcripts.jsonl")
    assert len(read_jsonl(dirs["batch"] / "transcripts.jsonl")) >= N * len(run.configs)
    # a batch is one step of every waiting question: at least AceMAD T=5's 2T steps, far fewer than questions
    longest = max(c.rounds for c in run.configs if c.method == "acemad")
    assert 2 * longest <= batches < N


def test_a_request_failing_in_every_batch_fails_its_question_with_the_reason(full_outputs):
    doomed = W.questions(4)[0].id

    def error(cid, body, attempt):
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return "model overloaded" if W.questions(4)[0].question in user else None

    with FakeOpenAI(FaultInjector(rate=0.0), batch_error=error) as srv:
        pop = W.population(srv.url, str(full_outputs / "c.sqlite"), "batch")
        d = run_experiment("fail", W.questions(4), [W.config()], pop, workers=2, progress=False)
        per_line = Counter(srv.batch_lines)
    recs = {r["question_id"]: r for r in read_jsonl(d / "transcripts.jsonl")}
    assert recs[doomed]["status"] == "failed" and "model overloaded" in recs[doomed]["error"]
    assert all(r["status"] == "ok" for q, r in recs.items() if q != doomed)
    assert max(per_line.values()) == W.BATCH["max_attempts"]  # retried in the next batches, then given up


def _worker(root: Path, url: str, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("ACEMAD_MAX_USD", None)
    return subprocess.Popen([sys.executable, str(WORKER), str(root), "killed", url, str(cache), str(N)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


def recorded_batches(cache: Path) -> set[str]:
    """The batch ids a worker has written to its cache (read only; none until its batches table exists)."""
    if not cache.exists():
        return set()
    with closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as conn:
        try:
            return {row[0] for row in conn.execute("SELECT id FROM batches")}
        except sqlite3.OperationalError:  # no table yet, or the worker is writing: ask again
            return set()


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_a_process_killed_while_polling_resumes_the_batch_and_submits_nothing_twice(full_outputs):
    ref, n_sync, _ = sync_run(full_outputs)
    cache = full_outputs / "killed.sqlite"
    with FakeOpenAI(FaultInjector(rate=0.0), batch_delay=1.5) as srv:
        proc = _worker(full_outputs, srv.url, cache)
        # until the worker has submitted its batch and recorded it in its cache (then it polls)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (srv.batches and set(srv.batches) <= recorded_batches(cache)):
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)  # polling a condition, not waiting a guessed time
        assert srv.batches and set(srv.batches) <= recorded_batches(cache), "no batch submitted and recorded"
        assert [b["status"] for b in srv.batches.values()] == ["in_progress"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        first = list(srv.batch_lines)
        assert len(first) == N * W.N_AGENTS  # round 1's arguments, one batch
        proc = _worker(full_outputs, srv.url, cache)
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        lines = list(srv.batch_lines)
    assert len(lines) == len(set(lines)) == n_sync  # every call submitted exactly once over both processes
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["ok"] == N and summary["failed"] == 0
    assert strip_usage(full_outputs / "outputs/runs/killed/transcripts.jsonl") == strip_usage(ref / "transcripts.jsonl")


def test_export_and_import_round_trip_through_the_cache(full_outputs, capsys):
    assert BA.main(["--cache", str(full_outputs / "empty.sqlite"), "status"]) == 0
    assert capsys.readouterr().out.startswith("no batches recorded in ")
    cache_path = full_outputs / "c.sqlite"
    cache = ResponseCache(cache_path)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    BA.record_batch(cache, "batch_x", "openai", [{"key": k, "model": "gpt-4o-mini", "mode": None, "body": body}
                                                 for k in ("k1", "k2")])  # fmt: skip
    out = full_outputs / "requests.jsonl"
    assert BA.main(["--cache", str(cache_path), "export", str(out)]) == 0
    reqs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["custom_id"] for r in reqs] == ["k1", "k2"] and reqs[0]["url"] == "/v1/chat/completions"
    assert reqs[0]["body"] == body
    ok = {"custom_id": "k1", "response": {"status_code": 200, "body": {
        "choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}},
    }}}  # fmt: skip
    bad = {"custom_id": "k2", "response": None, "error": {"code": "server_error", "message": "no"}}
    stranger = dict(ok, custom_id="not-ours")
    (full_outputs / "output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in (ok, bad, stranger)) + '{"torn')
    assert BA.main(["--cache", str(cache_path), "import", str(full_outputs / "output.jsonl")]) == 0
    assert "stored 1 replies" in capsys.readouterr().out
    v = cache.get("k1")
    assert v["text"] == "hello" and v["batch"] is True and v["prompt_tokens"] == 5
    assert cache.get("k2") is None and cache.get("not-ours") is None


def test_an_imported_empty_reply_that_was_billed_counts_as_paid_once_however_often_it_is_imported(full_outputs, capsys):
    cache_path = full_outputs / "c.sqlite"
    cache = ResponseCache(cache_path)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    BA.record_batch(cache, "batch_x", "openai", [{"key": k, "model": "gpt-4o-mini", "mode": None, "body": body}
                                                 for k in ("k1", "k2")])  # fmt: skip
    empty = lambda key, usage: {"id": f"batch_req_{key}", "custom_id": key, "response": {"status_code": 200, "body": {
        "choices": [{"message": {"content": ""}, "finish_reason": "length"}], "usage": usage}}}  # fmt: skip
    lines = [empty("k1", {"prompt_tokens": 1_000_000, "completion_tokens": 0}), empty("k2", None)]
    (full_outputs / "output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    for _ in range(2):  # imported twice: billed once
        assert BA.main(["--cache", str(cache_path), "import", str(full_outputs / "output.jsonl")]) == 0
        assert "2 error line(s) (1 of them empty replies that were billed" in capsys.readouterr().out
    assert cache.get("k1") is None and len(cache) == 0  # nothing to store: a rerun asks again
    assert cache.spending(0)[0] == pytest.approx(0.15 / 2)  # 1M prompt tokens at gpt-4o-mini's Batch API price


def test_a_billed_empty_batch_reply_counts_against_max_usd_within_the_run(full_outputs, monkeypatch):
    """The first reply is empty but billed for 1M prompt tokens ($0.075 at the batch rate): the hold is settled at
    that, so the next batch no longer fits under MAX_USD $0.05 and the run stops instead of sending it."""
    monkeypatch.setenv(B.ENV_MAX, "0.05")
    inner, billed = FaultInjector(rate=0.0), []

    def script(body, n):
        if billed:
            return inner(body, n)
        billed.append(n)
        return Reply(content="", prompt_tokens=1_000_000, completion_tokens=0)

    with FakeOpenAI(script) as srv:
        pop = W.population(srv.url, str(full_outputs / "c.sqlite"), "batch")
        with pytest.raises(BudgetStop, match="MAX_USD"):
            run_experiment("billed", W.questions(4), [W.config()], pop, workers=2, progress=False)
        assert len(srv.batches) == 1  # the batch after the billed reply was never submitted


def test_calls_via_files_exports_each_pass_and_imported_outputs_finish_the_run(fake_server, full_outputs):
    """The vLLM run-batch loop: each pass writes a request JSONL and stops; an outside runner answers it (here
    the fake's debate model), `batch import` stores the output, the rerun continues; the end equals the sync run."""
    ref, n_sync, _ = sync_run(full_outputs, n=6)
    model = FaultInjector(rate=0.0)
    cache = full_outputs / "files.sqlite"
    exports = 0
    srv = fake_server  # only GET /models is asked of it
    for _ in range(20):
        pop = W.population(srv.url, str(cache), "files")
        try:
            d = run_experiment("files", W.questions(6), [W.config()], pop, workers=2, progress=False)
            break
        except BA.BatchExported as e:
            exports += 1
            path = Path(str(e).split("request(s) to ")[1].split(". Run them")[0])
            out = path.with_name(path.name.replace("requests-", "output-"))
            lines = [json.loads(x) for x in path.read_text().splitlines()]
            answers = [{"custom_id": x["custom_id"], "response": {"status_code": 200, "body": completion_body(
                model(x["body"], i), x["body"], i)}} for i, x in enumerate(lines)]  # fmt: skip
            out.write_text("".join(json.dumps(x) + "\n" for x in answers))
            assert BA.main(["--cache", str(cache), "import", str(out)]) == 0
    assert srv.count == 0  # no completion was ever sent to an endpoint
    assert exports == 2 * W.ROUNDS
    assert strip_usage(d / "transcripts.jsonl") == strip_usage(ref / "transcripts.jsonl")


def test_max_usd_in_batch_mode_refuses_a_batch_that_could_pass_the_cap(fake_server, full_outputs, monkeypatch):
    """Every request of a batch is reserved (at the batch price) before the batch is submitted: a batch that
    could take the run past MAX_USD is not submitted at all, and the run ends with BudgetStop."""
    monkeypatch.setenv(B.ENV_MAX, "0.0001")  # less than the first batch (90 arguments, about $0.01 reserved)
    pop = W.population(fake_server.url, str(full_outputs / "c.sqlite"), "batch")
    with pytest.raises(BudgetStop, match="raise MAX_USD"):
        run_experiment("capped", W.questions(N), [W.config()], pop, workers=4, progress=False)
    assert fake_server.batches == {} and fake_server.batch_lines == []


def test_batch_and_files_modes_send_nothing_synchronously_to_a_loopback_endpoint(fake_server, full_outputs):
    """A 127.0.0.1 URL may be a gateway with a Batch API: batch mode uses it, files mode writes the requests and
    prints its import step with the interpreter that ran the pass (`.venv/bin/python` from the repo), as the pilot's
    closing line does, not whatever `python` is on PATH."""
    pop = W.population(fake_server.url, str(full_outputs / "c.sqlite"), "batch", kind=None)
    assert fake_server.url.startswith("http://127.0.0.1:") and pop.client(None).kind == "local-llama.cpp"
    run_experiment("loopback", W.questions(2), [W.config()], pop, workers=2, progress=False)
    assert fake_server.batch_lines and not fake_server.requests  # every call went through a batch, none synchronously
    pop = W.population(fake_server.url, str(full_outputs / "f.sqlite"), "files", kind=None)
    with pytest.raises(BA.BatchExported, match=r"wrote \d+ request\(s\)") as got:
        run_experiment("loopback-files", W.questions(2), [W.config()], pop, workers=2, progress=False)
    assert not fake_server.requests
    here = os.path.relpath(sys.executable)
    python = here if not here.startswith("..") else sys.executable
    assert f"`{python} -m acemad_utils.agents.batch --cache {full_outputs / 'f.sqlite'} import " in str(got.value)


def test_an_import_into_a_cache_that_recorded_none_of_its_requests_stops_in_one_line(full_outputs, capsys):
    """Another ACEMAD_ROOT or smoke mode names another cache: storing nothing and saying 'stored 0' made a loop."""
    out = full_outputs / "output.jsonl"
    out.write_text(json.dumps({"custom_id": "k" * 64, "response": {"status_code": 200, "body": {}}}) + "\n")
    with pytest.raises(SystemExit) as e:
        BA.main(["--cache", str(full_outputs / "other.sqlite"), "import", str(out)])
    assert str(e.value).startswith("error: none of the 1 output lines answers a request recorded in ")
    with pytest.raises(SystemExit, match="error: cannot read the output file"):
        BA.main(["--cache", str(full_outputs / "other.sqlite"), "import", str(full_outputs / "typo.jsonl")])


def test_batch_mode_refuses_an_endpoint_without_the_batch_api_in_one_line(full_outputs):
    with FakeOpenAI(FaultInjector(0.0), batch_api=False) as srv:
        with pytest.raises(BatchUnsupported) as e:
            W.population(srv.url, str(full_outputs / "c.sqlite"), "batch", kind=None)
        assert srv.count == 0
    assert "no Batch API" in str(e.value) and "CALLS_VIA=files" in str(e.value) and "\n" not in str(e.value)
