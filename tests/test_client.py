"""LLM client and response cache against the fake OpenAI server (no network, a few seconds)."""

from __future__ import annotations

import glob
import itertools
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from acemad_utils.agents import local_server
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import GenerateConfig, LLMClient, MissingAPIKey
from acemad_utils.agents.llm_agent import LLMPopulation
from tests.fake_openai import FakeOpenAI, Reply, error

FAKE_KEY = "sk-test-DO-NOT-STORE-7f3a9c"
MSG = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": False}


def client(srv, **kw):
    return LLMClient(model="fake-model", base_url=srv.url, api_key=FAKE_KEY, **kw)


def test_happy_path_and_token_counts():
    with FakeOpenAI([Reply("hello", prompt_tokens=7, completion_tokens=3), Reply("again", prompt_tokens=5)]) as srv:
        c = client(srv)
        r = c.generate(MSG, GenerateConfig(temperature=0.3, seed=1, max_tokens=20, top_p=0.9))
        assert (r.text, r.prompt_tokens, r.completion_tokens, r.cached) == ("hello", 7, 3, False)
        c.generate(MSG)
        sent = {"model": "fake-model", "temperature": 0.3, "seed": 1, "max_tokens": 20, "top_p": 0.9}
        assert srv.requests[0].items() >= sent.items()
        assert "response_format" not in srv.requests[0] and "seed" not in srv.requests[1]
        s = c.stats()
        assert (s["calls"], s["network_calls"], s["prompt_tokens"], s["completion_tokens"]) == (2, 2, 12, 8)
        assert s["cost_usd"] is None  # a fake model on loopback: unpriced, not free (only our own server is)


@pytest.mark.parametrize("model, usd", [("gpt-4o-mini", 0.75), ("mystery", None)])  # unknown: no made-up number
def test_cost_comes_from_the_price_table(model, usd):
    with FakeOpenAI([Reply("x", prompt_tokens=1_000_000, completion_tokens=1_000_000)]) as srv:
        c = LLMClient(model=model, base_url=srv.url, api_key=FAKE_KEY, kind="openai-compatible")
        c.generate(MSG)
        assert c.stats()["cost_usd"] == (usd if usd is None else pytest.approx(usd))


def test_missing_key_is_a_clear_error_before_any_call(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MissingAPIKey):
        LLMClient()
    LLMClient(base_url="http://127.0.0.1:9/v1")  # a local endpoint needs no key


def test_env_vars(monkeypatch):
    with FakeOpenAI(["ok"]) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
        monkeypatch.setenv("ACEMAD_MODEL", "env-model")
        c = LLMClient()
        c.generate(MSG)
        assert srv.requests[0]["model"] == "env-model"
        assert FAKE_KEY not in json.dumps(c.describe()) and srv.url not in json.dumps(c.describe())


def test_a_server_on_this_machine_gets_the_long_deadline_and_a_remote_one_the_short(monkeypatch):
    """A local server (ours, or the user's llama.cpp / Ollama) queues the calls in flight; a remote one answers them."""
    monkeypatch.delenv("ACEMAD_CALL_TIMEOUT", raising=False)
    monkeypatch.setattr(local_server, "_OWN_SERVERS", {"http://127.0.0.1:9/v1"})
    for url in ("http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1", "http://localhost:11434/v1"):
        assert (LLMClient(base_url=url).timeout, LLMClient(base_url=url).retry_time) == (300.0, 900.0), url
    remote = LLMClient(base_url="http://10.0.0.8:8000/v1", api_key="sk-x")
    assert (remote.timeout, remote.retry_time) == (60.0, 180.0)
    monkeypatch.setenv("ACEMAD_CALL_TIMEOUT", "20")
    assert LLMClient(base_url="http://127.0.0.1:9/v1").timeout == 20.0  # the user's value wins


@pytest.mark.parametrize("name", ["ACEMAD_CALL_TIMEOUT", "ACEMAD_QUESTION_TIMEOUT"])
@pytest.mark.parametrize("value", ["-5", "0", "abc", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused_by_its_name(monkeypatch, name, value):
    monkeypatch.setenv(name, value)  # before any call: not "8 consecutive calls timed out" blaming the endpoint
    with pytest.raises(ValueError, match=f"{name} = '{value}': need a number of seconds > 0"):
        LLMPopulation("m", "http://127.0.0.1:9/v1", "sk-x", preflight=False).client(None)


def test_structured_mode_fallback_chain_is_detected_once():
    def script(body, n):
        rf = body.get("response_format")
        if rf and rf["type"] == "json_schema":
            return error(400, "response_format json_schema not supported")
        if rf and rf["type"] == "json_object":
            return error(422, "json_object not supported either")
        return '{"x": 1}'

    with FakeOpenAI(script) as srv:
        c = client(srv, kind="openai-compatible")
        assert c.mode == "json_schema"
        r = c.generate(MSG, schema=SCHEMA)
        assert (r.text, r.mode, c.mode) == ('{"x": 1}', "text", "text")
        assert [b.get("response_format", {}).get("type") for b in srv.requests] == ["json_schema", "json_object", None]
        assert srv.requests[0]["response_format"]["json_schema"]["strict"] is True
        c.generate(MSG, schema=SCHEMA)  # remembered: straight to text
        assert srv.count == 4


LLAMA_CPP_PYTHON_500 = "1 validation error: ('body', 'response_format', 'type') Input should be 'text' or 'json_object'"


@pytest.mark.parametrize("refusal", [error(400, "bad response_format"), error(500, LLAMA_CPP_PYTHON_500)])
def test_a_refused_json_schema_is_asked_again_as_json_object_without_retries(refusal):
    def script(body, n):
        return refusal if (body.get("response_format") or {}).get("type") == "json_schema" else '{"x": 2}'

    with FakeOpenAI(script) as srv:
        c = client(srv)
        assert c.generate(MSG, schema=SCHEMA).mode == "json_object"
        assert srv.count == 2 and c.stats()["retries"] == 0
        assert srv.requests[-1]["response_format"] == {"type": "json_object", "schema": SCHEMA}  # llama.cpp's grammar


def test_a_400_about_a_prompt_keeps_a_structured_mode_that_has_worked():
    """A commitment refused for its prompt's length after json_schema has answered: that call fails alone; the next
    commitment still asks json_schema (the run's results do not depend on which question hit the error first)."""

    def script(body, n):
        too_long = body.get("response_format") and "Q2" in json.dumps(body["messages"])
        return error(400, "This model's maximum context length is 128000 tokens") if too_long else '{"x": 1}'

    with FakeOpenAI(script) as srv:
        c = client(srv)
        assert c.generate([{"role": "user", "content": "Q1"}], schema=SCHEMA).mode == "json_schema"
        with pytest.raises(openai.BadRequestError, match="maximum context length"):
            c.generate([{"role": "user", "content": "Q2"}], schema=SCHEMA)
        assert c.generate([{"role": "user", "content": "Q3"}], schema=SCHEMA).mode == "json_schema"
        assert [b["response_format"]["type"] for b in srv.requests] == ["json_schema"] * 3


def test_calls_at_once_against_a_server_refusing_json_schema_send_one_refused_request_not_one_each():
    def script(body, n):
        rf = (body.get("response_format") or {}).get("type")
        return error(500, LLAMA_CPP_PYTHON_500) if rf == "json_schema" else Reply('{"x": 2}', delay=0.05)

    with FakeOpenAI(script) as srv:
        c = client(srv, max_concurrency=8)
        with ThreadPoolExecutor(16) as ex:
            out = list(
                ex.map(lambda i: c.generate(MSG + [{"role": "user", "content": str(i)}], schema=SCHEMA), range(16))
            )
        kinds = [(b.get("response_format") or {}).get("type") for b in srv.requests]
    assert kinds.count("json_schema") == 1 and kinds.count("json_object") == 16
    assert [o.mode for o in out] == ["json_object"] * 16 and c.settled == "json_object"
    assert srv.max_in_flight > 1  # once a mode is accepted, the calls go out at once again


@pytest.mark.parametrize("fault", ["429", "500", "timeout", "drop", "malformed"])
def test_retries_then_success(fault):
    bad = {"429": error(429, "slow down"), "500": error(500, "boom"), "timeout": Reply("late", delay=2.0),
           "drop": Reply(drop=True), "malformed": Reply(raw=b'{"choices": [')}[fault]  # fmt: skip
    with FakeOpenAI([bad, bad, "fine"]) as srv:
        c = client(srv, timeout=0.8)  # the answered attempt must fit in it on a loaded machine
        assert c.generate(MSG).text == "fine"
        assert srv.count == 3
        s = c.stats()
        assert (s["retries"], s["network_calls"], s["failures"]) == (2, 3, 0)


@pytest.mark.parametrize("reply, raised, sent", [(error(400, "context too long"), openai.BadRequestError, 1),
                                                  (error(503, "down"), openai.InternalServerError, 3)])  # fmt: skip
def test_a_failed_call_is_raised_after_its_bounded_attempts(reply, raised, sent):
    with FakeOpenAI(default=reply) as srv:
        c = client(srv, max_attempts=3)
        with pytest.raises(raised):
            c.generate(MSG)
        assert srv.count == sent and c.stats()["failures"] == 1


def test_in_flight_calls_are_bounded_across_threads():
    with FakeOpenAI(default=Reply("ok", delay=0.15)) as srv:
        c = client(srv, max_concurrency=2)
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda i: c.generate(MSG, scope=str(i)), range(8)))
        assert srv.count == 8 and srv.max_in_flight == 2


# ----------------------------------------------------------------------------- cache
def test_cache_hit_miss_scope_and_warm_rerun(tmp_path):
    db = tmp_path / "cache.sqlite"
    counter = iter(range(1000))

    def run(srv):
        c = client(srv, cache=str(db))
        cfg = GenerateConfig(temperature=0.6)
        outs = [c.generate(MSG, cfg, scope=f"q1|agent={i}|round=1|repeat=0|role=debater|argue").text for i in range(5)]
        outs.append(c.generate(MSG, cfg, scope="q1|agent=0|round=1|repeat=0|role=debater|argue").text)  # hit
        outs.append(c.generate(MSG, cfg, schema=SCHEMA, scope="q1|agent=0|round=1|repeat=0|role=debater|commit").text)
        c.cache.close()
        return outs, c.stats()

    with FakeOpenAI(default=lambda body, n: f"sample-{next(counter)}") as srv:
        cold, s = run(srv)
        assert len(set(cold[:5])) == 5  # same prompt, five agents: five independent samples
        assert cold[5] == cold[0] and srv.count == 6 and s["cache_hits"] == 1
    with FakeOpenAI(default="SHOULD-NOT-BE-CALLED") as srv:
        warm, s = run(srv)
        assert srv.count == 0 and warm == cold
        assert (s["cache_hits"], s["network_calls"], s["prompt_tokens"]) == (7, 0, 0)

    blob = b"".join(open(f, "rb").read() for f in glob.glob(str(db) + "*"))
    assert FAKE_KEY.encode() not in blob and b"DO-NOT-STORE" not in blob
    assert b"127.0.0.1" not in blob and b"http" not in blob


def test_cache_is_thread_safe_and_keeps_one_connection(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    fds = len(os.listdir("/proc/self/fd"))

    def work(i):
        cache.put(f"k{i}", {"text": str(i)}, model="m", kind="openai")
        return cache.get(f"k{i}")["text"] == str(i)

    with ThreadPoolExecutor(8) as ex:
        assert all(ex.map(work, range(200)))
    for i in range(200, 300):  # an agent thread per round: a connection per thread would leak two descriptors each
        t = threading.Thread(target=work, args=(i,))
        t.start()
        t.join()
    assert len(cache) == 300 and len(os.listdir("/proc/self/fd")) <= fds + 2  # the -wal and -shm files at most


def test_cache_key_depends_on_every_part():
    base = dict(model="m", kind="openai", params={"temperature": 0.1}, messages=MSG, fmt=None, scope="s")
    k0 = ResponseCache.key(**base)
    other = dict(model="m2", kind="local-llama.cpp", params={"temperature": 0.2}, messages=[{"role": "user",
                 "content": "ho"}], fmt={"schema": SCHEMA}, scope="t")  # fmt: skip
    for part, val in other.items():
        assert ResponseCache.key(**{**base, part: val}) != k0, part
    assert ResponseCache.key(**{**base, "params": {"temperature": 0.1}}) == k0


def test_concurrent_identical_calls_are_sent_once_and_cached_once(tmp_path):
    """A sampling endpoint and 8 threads sending the same scoped call at once: one request, one reply for all."""
    counter = itertools.count()
    with FakeOpenAI(lambda body, n: Reply(content=f"sample {next(counter)}", delay=0.2)) as srv:
        c = client(srv, cache=ResponseCache(tmp_path / "c.sqlite"))
        barrier = threading.Barrier(8)

        def call(_):
            barrier.wait()
            return c.generate(MSG, scope="q|agent=0|round=1").text

        with ThreadPoolExecutor(8) as ex:
            out = list(ex.map(call, range(8)))
        assert srv.count == 1 and len(set(out)) == 1
        assert c.generate(MSG, scope="q|agent=0|round=1").text == out[0]
