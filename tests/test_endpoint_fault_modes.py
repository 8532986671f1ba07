"""Against tests/fake_openai.py's fault modes (loopback only): a fault while building subsets never poisons a checkout,
failures are counted and shown, a dead or hung endpoint stops the run with one line, one run per profile, no path
outside outputs/, bounded replies and parameter values."""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import json
import os
import re
import socket
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import openai
import pandas as pd
import pytest
from tqdm import tqdm

from acemad_utils.agents import client as C
from acemad_utils.agents.client import EndpointUnreachable, GarbledResponse, LLMClient, cap_reply
from acemad_utils.agents.health import EndpointDown, emit
from acemad_utils.data import paths as P
from acemad_utils.data.transcripts import run_dir
from acemad_utils.experiments import subsets
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.report import tables as TB
from acemad_utils.reproduce import cli as reproduce
from acemad_utils.reproduce.cli import ProfileLock, _ok_line, failed_records, failure_lines, progress_tail
from tests.conftest import CANARY_KEY as KEY
from tests.fake_openai import HOSTILE, FakeOpenAI, FaultInjector, Reply, completion

MSG = [{"role": "user", "content": "Question: x\n\nOptions:\nA. a\nB. b"}]
FAST = dict(max_attempts=4, timeout=0.5)


# ----------------------------------------------------------------------------- retries and the breaker
def test_429_with_retry_after_is_honoured_and_bounded_in_time():
    with FakeOpenAI(FaultInjector(0.0), mode="429", retry_after="0.2") as srv:
        c = LLMClient("m", srv.url, KEY, max_attempts=100, retry_time=0.5, breaker=1000)
        t0 = time.monotonic()
        with pytest.raises(openai.RateLimitError):
            c.generate(MSG)
        # Retry-After 0.2 s and a 0.5 s retry budget: a handful of attempts, not 100, each 0.2 s after the last
        assert 2 <= srv.modes["429"] <= 5 and time.monotonic() - t0 >= 0.2 * (srv.modes["429"] - 1)


@pytest.mark.parametrize("mode, says", [("401", "rejected the API key"), ("down", "could not connect")])
def test_a_failing_endpoint_trips_the_breaker_with_one_redacted_line(mode, says):
    """A 401 echoing the key, or a dead server: counted per attempt, so the third stops every later call."""
    with FakeOpenAI(FaultInjector(0.0), mode=mode) as srv:
        c = LLMClient("m", srv.url, KEY, breaker=3, **FAST)
        errors = []
        for i in range(6):
            try:
                c.generate(MSG + [{"role": "user", "content": str(i)}])
            except Exception as e:  # noqa: BLE001 (the test looks at whichever error it is)
                errors.append(e)
        assert len(errors) == 6 and isinstance(errors[-1], EndpointDown)
        line = str(errors[-1])
        assert "\n" not in line and srv.url in line and says in line and "same command" in line
        assert KEY not in line and all(KEY not in str(e) for e in errors)
        assert srv.modes[mode] == 3  # nothing sent once tripped


def test_calls_queued_behind_a_tripped_breaker_are_never_sent():
    """16 calls at once, 4 in flight, a hung endpoint, breaker 4: the first wave's timeouts trip it (a slot freed by
    one of its first 3 may still send a call), and every call still waiting for a slot then stops without sending: a
    dead endpoint stops a run in about two timeouts, not one per wave of calls."""

    def outcome(i: int) -> Exception:
        try:
            c.generate(MSG + [{"role": "user", "content": str(i)}])
        except Exception as e:  # noqa: BLE001 (the test counts which error each call ended in)
            return e
        raise AssertionError("a hung endpoint answered")

    with FakeOpenAI(FaultInjector(0.0), mode="hang", hang_max=5) as srv:
        c = LLMClient("m", srv.url, KEY, breaker=4, max_concurrency=4, max_attempts=1, timeout=0.5)
        with ThreadPoolExecutor(16) as pool:
            errors = list(pool.map(outcome, range(16)))
        sent = srv.modes["hang"]
        assert 4 <= sent <= 7 and sum(isinstance(e, EndpointDown) for e in errors) == 16 - sent


def test_a_hung_endpoint_prints_progress_and_trips_on_timeouts(tmp_path, monkeypatch):
    progress = tmp_path / "progress.log"
    monkeypatch.setenv("ACEMAD_PROGRESS_FILE", str(progress))
    monkeypatch.setenv("ACEMAD_PROGRESS_SECONDS", "0.2")
    with FakeOpenAI(FaultInjector(0.0), mode="hang", hang_max=5) as srv:
        c = LLMClient("m", srv.url, KEY, breaker=2, max_attempts=6, timeout=0.6)
        with pytest.raises(EndpointDown, match="timed out"):
            c.generate(MSG, model="role-model")  # a role's endpoint: the line names the model asked there
        srv.set_mode("ok")
    lines = progress.read_text().splitlines()
    assert lines and all("1 in flight (oldest" in x and srv.url in x for x in lines), lines
    assert all(x.startswith("[calls] role-model at ") for x in lines), lines
    assert "0 answered, " in lines[0]


def test_every_call_has_max_tokens_and_huge_replies_are_cut_with_a_mark(tmp_path):
    with FakeOpenAI(FaultInjector(0.0), mode="huge", huge_bytes=300_000) as srv:
        c = LLMClient("m", srv.url, KEY, cache=str(tmp_path / "c.sqlite"), max_reply_bytes=10_000, **FAST)
        r = c.generate(MSG)
        again = c.generate(MSG)
    assert all(b.get("max_tokens") == c.max_tokens for b in srv.requests)
    for x in (r, again):
        assert len(x.text.encode()) <= 10_000 and "reply truncated by acemad" in x.text and "300000 bytes" in x.text
    assert r.finish_reason == "length" and again.cached
    cut, was_cut = cap_reply("é" * 100, 101)  # 200 bytes; the mark leaves room for an odd number of bytes
    assert was_cut and cut.startswith("é") and "\ufffd" not in cut and len(cut.encode()) <= 101


def test_hostile_text_mode_reaches_the_reply_intact():
    with FakeOpenAI(FaultInjector(0.0), mode="hostile") as srv:
        assert HOSTILE in LLMClient("m", srv.url, KEY, **FAST).generate(MSG).text


# ----------------------------------------------------------------------------- a failure is never data
CONFIGS = [DebateConfig(method="single"), DebateConfig(method="majority"), DebateConfig(method="acemad", rounds=2)]
BENCHES = ["arc_challenge", "logiqa"]


def _setup(url: str) -> Setup:
    return Setup(profile="probe", backend="openai", source="synthetic", benchmarks=BENCHES, model="fake-model",
                 base_url=url, workers=4, n_items=20)  # fmt: skip


def _tables(url: str):
    """Notebook 03's work in smoke mode: subsets on first use, then the run, then Table 2's long table."""
    S = _setup(url)
    try:
        meta, records = S.run("main", CONFIGS, n_max=3)
    finally:
        S.close()
    # the subset files themselves (meta.json differs by date only)
    files = {p.name: p.read_text() for p in sorted((subsets.subsets_root() / S.slug).glob("*.jsonl"))}
    return TB.accuracy_long(records, n_boot=200), files


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
@pytest.mark.parametrize("fault", ["down", "429", "401"])
def test_a_fault_during_subset_building_then_a_healthy_rerun_gives_the_clean_tables(
    keyed_outputs, tmp_path, monkeypatch, fault
):
    plan = FaultInjector(0.0, seed=3)
    with FakeOpenAI(plan, retry_after="0.01") as srv:
        clean_root = tmp_path / "clean"
        monkeypatch.setenv("ACEMAD_ROOT", str(clean_root))
        clean, clean_files = _tables(srv.url)
        assert clean.n_failed.sum() == 0 and len(clean_files) == len(BENCHES)

        monkeypatch.setenv("ACEMAD_ROOT", str(tmp_path / "faulty"))
        srv.set_mode(fault, after=150)  # inside the first benchmark's subset construction (200 calls)
        with pytest.raises((EndpointDown, subsets.SubsetIncomplete)) as e:
            _tables(srv.url)
        assert "\n" not in str(e.value) and "same command" in str(e.value)
        # it stopped while building subsets (the debate run never started), and saved no subset: complete or absent
        assert not (tmp_path / "faulty" / "outputs" / "smoke" / "runs" / "probe").exists()
        assert not list((subsets.subsets_root()).rglob("*.jsonl"))
        # the same command again (still failing) changes nothing, then the endpoint heals
        with pytest.raises((EndpointDown, EndpointUnreachable, subsets.SubsetIncomplete)):
            _tables(srv.url)  # a dead endpoint is already refused by the pre-flight GET /models
        srv.set_mode("ok")
        healed, healed_files = _tables(srv.url)
    pd.testing.assert_frame_equal(healed, clean)
    assert healed_files == clean_files


def test_an_old_subset_saved_with_failed_items_is_rebuilt(keyed_outputs):
    with FakeOpenAI(FaultInjector(0.0, seed=3)) as srv:
        S = _setup(srv.url)
        good = [q.id for q in S.subset("arc_challenge")]
        d = subsets.subsets_root() / S.slug
        meta = json.loads((d / "meta.json").read_text())
        meta["benchmarks"][S.bench_name("arc_challenge")]["n_failed"] = 3  # as an old checkout saved it
        (d / "meta.json").write_text(json.dumps(meta))
        (d / f"{S.bench_name('arc_challenge')}.jsonl").write_text("")  # its "kept" items: none
        assert [q.id for q in _setup(srv.url).subset("arc_challenge")] == good
        S.close()


# ----------------------------------------------------------------------------- failures are visible
def _rec(qid, method, correct, status="ok", bench="arc_challenge"):
    return {"question_id": qid, "benchmark": bench, "method": method, "status": status, "final": {"correct": correct}}


def test_failed_records_are_not_wrong_answers_and_every_table_says_how_many():
    recs = [_rec(f"q{i}", "a", True) for i in range(4)] + [_rec("q4", "a", False, "failed")]
    recs += [_rec(f"q{i}", "b", i < 2) for i in range(5)] + [_rec("q1", "c", False, "failed")]
    long = TB.accuracy_long(recs, n_boot=50)
    a = long[(long.method == "a") & (long.benchmark == "arc_challenge")].iloc[0]
    assert (a.n, a.n_failed, a.accuracy) == (4, 1, 100.0)  # the failure is left out, not scored wrong
    avg = long[(long.method == "a") & (long.benchmark == TB.AVERAGE)].iloc[0]
    assert avg.n_failed == 1
    shown = TB.wide(long).to_string()
    assert "(n=4, 1 failed)" in shown and "(n=5)" in shown and "1 failed (not counted)" in shown
    assert "no answer (n=0, 1 failed)" in shown  # every question of method c failed
    clean = TB.wide(TB.accuracy_long([r for r in recs if r["method"] == "b"], n_boot=50)).to_string()
    assert "failed" not in clean and "(n=" not in clean  # a clean table looks as before


def test_the_reproduce_command_names_failed_records_per_method(keyed_outputs):
    d = run_dir("probe/main")
    one = {"question_id": "q1", "config_hash": "h1", "repeat": 0, "status": "failed", "method": "single", "error": "X"}
    answered = one | {"config_hash": "h2", "status": "ok", "method": "majority"}
    recs = [one, one | {"question_id": "q2", "error": "Y"}, answered]
    retried = one | {"question_id": "q3", "error": "Z"}
    recs += [retried, retried | {"status": "ok", "error": None}]  # a failure retried later: replaced, not counted
    (d / "transcripts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    meta = {"methods": {"single": {"config_hash": "h1"}, "majority": {"config_hash": "h2"}}, "summary": {"failed": 2}}
    (d / "meta.json").write_text(json.dumps(meta))
    (line,) = failure_lines("probe", failed_records(since=time.time() - 60))
    assert line.startswith("[probe] probe/main: 2 of 4 records failed (single 2)") and "first error: X" in line
    assert "Rerun the same command" in line and "\n" not in line
    ok = _ok_line("[probe]", "02_baselines", time.time() - 60, {"cells": []})
    assert "[WARNING: 2 failed record(s), not counted in the tables" in ok  # the notebook's own line says so too
    assert failed_records(since=time.time() + 60) == {}  # runs of an earlier session are not this run's


# ----------------------------------------------------------------------------- one run per profile
def test_a_second_run_of_a_profile_or_of_the_llm_cache_is_refused_naming_the_holder(keyed_outputs, tmp_path):
    path = tmp_path / "probe.yaml"
    path.write_text("profile: probe\ncommon: {BACKEND: sim}\n")
    with ProfileLock("probe", llm=True):
        with pytest.raises(SystemExit, match=rf"another run holds probe/.lock: pid {os.getpid()} .*--wait"):
            reproduce.run(str(path), only=["00_theory"])
        with pytest.raises(SystemExit, match="cache/.lock"), ProfileLock("other", llm=True):  # the shared cache
            pass
        with ProfileLock("other", llm=False):  # a synthetic profile pays for nothing: it may run beside
            pass
    assert not (keyed_outputs / "outputs" / "smoke" / "notebooks" / "probe" / "00_theory.ipynb").exists()


def test_progress_lines_reach_the_terminal(tmp_path, capsys):
    path = tmp_path / "p.log"
    out = ""
    with progress_tail(path, prefix="[probe] ", poll=0.05):
        with open(path, "a") as f:
            f.write("[calls] m: 1 answered, 0 failed, 2 in flight\npartial")
        deadline = time.monotonic() + 30  # until the line is shown, not a fixed time (a loaded machine is slow)
        while "\n" not in out and time.monotonic() < deadline:
            time.sleep(0.01)
            out += capsys.readouterr().out
    out += capsys.readouterr().out
    assert out == "[probe] [calls] m: 1 answered, 0 failed, 2 in flight\n"


def test_a_progress_line_above_a_progress_bar_starts_its_own_line(monkeypatch):
    """The command's question bar and the client's [calls] line share stderr."""
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.delenv("ACEMAD_PROGRESS_FILE", raising=False)
    with tqdm(total=3, desc="q", file=err, mininterval=0) as bar:
        bar.update(1)
        emit("[calls] m at here: 1 answered")
    assert re.search(r"(^|[\r\n])\[calls\] m at here: 1 answered\n", err.getvalue()), repr(err.getvalue())


# ----------------------------------------------------------------------------- paths stay inside outputs/
BAD_NAMES = ["../../../../tmp/x", "..", "a/b", "/tmp/x", ".hidden", "-rf", "", "x" * 200, "a\nb"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_unsafe_names_are_refused_everywhere_they_become_paths(keyed_outputs, name):
    with pytest.raises(P.UnsafeName):
        P.safe_segment(name, "profile")
    with pytest.raises(ValueError, match="PROFILE"):  # a notebook's PROFILE (Setup), before anything is written
        Setup(profile=name)
    with pytest.raises(P.UnsafeName):
        TB.artefact("table2_main_results", name)  # table and figure file names
    if name not in ("", "a/b"):  # 'a/b' is two safe segments: a nested run name
        with pytest.raises(P.UnsafeName):
            run_dir(f"{name}/main")  # a run's folder (a profile or run name)
        with pytest.raises(P.UnsafeName):
            run_dir(f"probe/{name}")
    assert not (keyed_outputs / "outputs").exists() or not any((keyed_outputs / "outputs").rglob("*.json*"))


def test_a_traversal_profile_name_stops_the_run_before_anything_is_written(keyed_outputs, tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("profile: ../../../../tmp/x\ncommon: {BACKEND: sim}\n")
    with pytest.raises(SystemExit) as e:
        reproduce.run(str(path), only=["00_theory"])
    assert "profile name '../../../../tmp/x' is not allowed" in str(e.value) and "\n" not in str(e.value)
    assert not (keyed_outputs / "outputs").exists()


def test_model_names_become_one_safe_folder():
    assert subsets.model_slug("../../etc/passwd") == "etc-passwd"
    assert subsets.model_slug("meta-llama/Llama-3.1-8B-Instruct") == "meta-llama-Llama-3.1-8B-Instruct"
    with pytest.raises(ValueError):
        subsets.model_slug("..")
    with pytest.raises(P.UnsafeName):
        subsets.model_slug("m" * 300)
    with pytest.raises(P.UnsafeName):  # `subsets show --model ../..` reads no file outside the subsets folder
        subsets.subset_table("../../etc")
    with pytest.raises(P.UnsafeName):
        subsets.load_subset("arc_challenge", "../x")


# ----------------------------------------------------------------------------- bounded inputs
@pytest.mark.parametrize(
    "common,expected",
    [
        ({"N_MAX": 10**12}, "(1000000000000 is out of range); N_MAX takes a whole number from 1 to 1e+06"),
        ({"WORKERS": 10**6}, "(1000000 is out of range); WORKERS takes a whole number from 1 to 256"),
        ({"BENCHMARKS": []}, "BENCHMARKS = [] is not allowed (the list is empty"),
        ({"N_VALUES": []}, "N_VALUES = [] is not allowed (the list is empty"),
        ({"BASE_URL": "file:///etc/passwd"}, "is not an http:// or https:// URL with a host"),
        ({"BASE_URL": "127.0.0.1:8000/v1"}, "is not an http:// or https:// URL with a host"),
        ({"MAX_USD": float("inf")}, "max_usd = inf is not allowed: need a finite number"),
        ({"BASE_URL": "https://example.org/v1", "MAX_USD": "none"}, None),  # good values and an explicit no cap
    ],
)
def test_out_of_range_values_stop_before_anything_runs(tmp_path, common, expected):
    path = tmp_path / "mine.yaml"
    path.write_text(json.dumps({"profile": "mine", "common": {}}))
    if expected is None:
        prof = reproduce.load_profile(str(path), overrides=common)
        assert prof["common"]["BASE_URL"] == common["BASE_URL"] and prof["max_usd"] == "none"
        return
    with pytest.raises(SystemExit) as e:
        reproduce.load_profile(str(path), overrides=common)
    assert expected in str(e.value), str(e.value)


# ----------------------------------------------------------------------------- endpoints that would fill the memory
@contextlib.contextmanager
def _raw_server(respond):
    """A loopback server that reads each whole request and lets `respond(conn, head)` write anything back."""
    srv = socket.create_server(("127.0.0.1", 0))

    def handle(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head and (got := conn.recv(65536)):
                head += got
            length = int(m.group(1)) if (m := re.search(rb"(?i)content-length: *(\d+)", head)) else 0
            # the whole request: a close with unread bytes resets the connection
            while len(head.partition(b"\r\n\r\n")[2]) < length and (got := conn.recv(65536)):
                head += got
            respond(conn, head)

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed: the test is over
            while True:
                threading.Thread(target=handle, args=(srv.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    finally:
        srv.close()


CHUNK = b"x" * 65536


def _endless_chunked(conn, head):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    for _ in range(256):  # 16 MiB at most: four times the test's cap
        conn.sendall(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))


def _huge_length(conn, head):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50000000000\r\n\r\n{")


def _http10_without_length(conn, head):
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
    for _ in range(256):
        conn.sendall(CHUNK)


@pytest.mark.parametrize("respond", [_endless_chunked, _huge_length, _http10_without_length])
def test_a_chat_reply_without_end_stops_at_the_cap_with_one_line_naming_the_endpoint(respond, monkeypatch):
    monkeypatch.setattr(C, "MAX_RESPONSE_BYTES", 2**22)
    with _raw_server(respond) as url:
        c = LLMClient("m", url, KEY, breaker=1000, max_attempts=1, timeout=30)
        tracemalloc.start()
        try:
            with pytest.raises(openai.APIConnectionError) as err:
                c.generate(MSG)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    line = str(err.value)
    assert "\n" not in line and url in line and f"more than {2**22} bytes" in line
    assert peak < 3 * 2**22


def test_a_gzip_bomb_listing_is_never_inflated():
    bomb = gzip.compress(b"0" * 2**26, compresslevel=9)  # made before memory is traced: 64 MiB of zeros in ~64 KiB
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
    with _raw_server(lambda conn, _: conn.sendall(head % len(bomb) + bomb)) as url:
        c = LLMClient("m", url, KEY)
        tracemalloc.start()
        try:
            c.preflight(timeout=10)  # an answer that is not a listing: the endpoint is there
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 2**24


def _silent(conn, head):  # the request read, no answer: reachable (maybe busy)
    conn.recv(1)


def _trickled_head(conn, head):  # one byte every 0.2 s, status line included: no gap trips the SDK's timeout
    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100:
        conn.send(bytes([byte]))
        time.sleep(0.2)


@pytest.mark.parametrize("respond, timeout", [(_silent, 0.3), (_trickled_head, 1.0)])
def test_an_endpoint_that_does_not_answer_the_preflight_in_time_only_warns(respond, timeout):
    """A warning, not a stop; GET /models goes through the SDK, whose timeout bounds each gap only: the preflight is
    let go at its deadline."""
    with _raw_server(respond) as url:
        t0 = time.monotonic()
        with pytest.warns(UserWarning, match=f"did not answer GET /models within {timeout:g} s"):
            LLMClient("m", url, KEY).preflight(timeout=timeout)
        assert time.monotonic() - t0 < 30


def test_a_listing_without_end_is_one_line_and_nothing_reads_on_after_the_preflight(monkeypatch):
    monkeypatch.setattr(C, "MAX_RESPONSE_BYTES", 2**22)
    with _raw_server(_endless_chunked) as url:
        with pytest.raises(EndpointUnreachable, match=f"{url} answered GET /v1/models with more than .* No paid call"):
            LLMClient("m", url, KEY).preflight(timeout=10)  # one line from the command (exit 2), not a traceback
    hung_up = threading.Event()

    def trickle(conn, head):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            for _ in range(3000):  # 30 s at most
                conn.sendall(b"1\r\n \r\n")
                hung_up.wait(0.01)  # the pace of a trickling endpoint
        except OSError:  # the client closed the connection
            hung_up.set()

    with _raw_server(trickle) as url:
        with pytest.warns(UserWarning, match="did not answer GET /models within 0.5 s"):
            LLMClient("m", url, KEY).preflight(timeout=0.5)
        assert hung_up.wait(10), "the listing was still being read 10 s after the preflight gave up"


def _reply(conn, head=b"") -> None:
    body = json.dumps(completion("fine", "m", pt=1, ct=1)).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def test_chat_calls_through_an_authenticating_proxy_carry_its_credentials(monkeypatch):
    heads: list[bytes] = []

    def proxy(conn, head):
        heads.append(head)
        _reply(conn)

    with _raw_server(proxy) as url:
        monkeypatch.setenv("HTTP_PROXY", url.replace("http://", "http://user:s3cret@").removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        c = LLMClient("m", "http://upstream.example/v1", KEY, max_attempts=1)
        assert c.generate(MSG).text == "fine"
    assert heads[-1].startswith(b"POST http://upstream.example/v1/chat/completions ")
    assert b"\r\nProxy-Authorization: Basic " + base64.b64encode(b"user:s3cret") + b"\r\n" in heads[-1]


USAGE = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}],"usage":'


@pytest.mark.parametrize(
    "reply, says",
    [
        (Reply(raw=b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
        (Reply(raw=b'{"choices":[{"message":{"role":"assistant","content":"hi \\ud800"}}]}'), "lone surrogate"),
        (Reply(raw=USAGE + b'{"prompt_tokens":"lots","completion_tokens":1}}'), "prompt_tokens='lots'"),
        (Reply(raw=USAGE + b'{"prompt_tokens":1,"completion_tokens":1e400}}'), "completion_tokens=inf"),
        (Reply(raw=USAGE + b'{"prompt_tokens":-500,"completion_tokens":1}}'), "prompt_tokens=-500"),
        (Reply(status=302, raw=b""), "no Location"),
    ],
    ids=["deep JSON", "lone surrogate", "usage lots", "usage 1e400", "negative usage", "3xx without Location"],
)
def test_a_reply_that_is_not_a_completion_is_one_line_naming_the_endpoint(reply, says):
    with FakeOpenAI(default=reply) as srv:
        c = LLMClient("m", srv.url, KEY, breaker=1000, max_attempts=1)
        with pytest.raises((GarbledResponse, openai.APIStatusError)) as err:
            c.generate(MSG)
        assert c.stats()["cost_usd"] in (0, 0.0, None)
    line = str(err.value)
    assert "\n" not in line and srv.url in line and says in line


@pytest.mark.parametrize(
    "reply, error",
    [(Reply(raw=b'{"choices": ['), GarbledResponse), (Reply(drop=True), openai.APIConnectionError)],
    ids=["not JSON", "dropped"],
)
def test_a_call_whose_time_runs_out_while_retrying_a_fault_names_the_fault_not_a_timeout(reply, error):
    with FakeOpenAI(default=reply) as srv:
        c = LLMClient("m", srv.url, KEY, breaker=1000, max_attempts=100, timeout=5, retry_time=1.5)
        with pytest.raises(error) as err:
            c.generate(MSG)
    assert not isinstance(err.value, openai.APITimeoutError) and "time was up" not in str(err.value)


def test_a_post_after_the_server_closed_its_idle_connection_goes_out_on_a_new_one():
    """llama.cpp closes idle keep-alive connections: the next call must not fail on the closed one."""
    closed = threading.Semaphore(0)

    def reply_and_hang_up(conn, head):
        _reply(conn)
        conn.close()
        closed.release()

    with _raw_server(reply_and_hang_up) as url:
        c = LLMClient("m", url, KEY, max_attempts=1)  # no retry: the closed connection must not cost an attempt
        texts = []
        for i in range(3):
            texts.append(c.generate(MSG + [{"role": "user", "content": str(i)}]).text)
            # idle and closed before the next call (a close racing the next request is the SDK's retry's job)
            assert closed.acquire(timeout=10)
        assert texts == ["fine"] * 3
