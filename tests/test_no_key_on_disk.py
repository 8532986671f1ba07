"""The key (sk-like, or 40 plain characters: redaction by value) goes over the wire and nowhere else, even when the
endpoint echoes it: no file a run writes, nothing printed, no raised exception holds it."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import sys
import traceback
from pathlib import Path

import nbformat
import pytest

from acemad_utils.agents.client import LLMClient
from acemad_utils.agents.redact import preview, redact, remember_secret
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data.benchmarks import load_demo
from acemad_utils.experiments.runner import run_experiment
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.schema import AgentSpec
from acemad_utils.reproduce import cli as reproduce
from tests.conftest import CANARY_KEY as CANARY
from tests.fake_openai import FakeOpenAI, FaultInjector, Reply

# Does not look like a key (no sk- prefix, no "secret"): only redaction by value can catch it.
PLAIN = "Tk4c9QmZ2vXw7LpR8nYb3HsJ6dFg1KtA5eUo0iWq"
assert len(PLAIN) == 40  # (PLAIN must not match the key-like pattern)


def needles(key: str) -> tuple[bytes, ...]:
    extra = (b"SECRET-canary",) if key == CANARY else ()
    return (key.encode(), key[4:-4].encode(), key.encode("utf-16-le"), *extra)


def leaks(root, key: str = CANARY) -> list[str]:
    """Files under root holding the key (raw bytes, so sqlite pages and WAL frames are searched too; a
    compressed transcript, transcripts.jsonl.gz, is searched decompressed)."""
    hits = []
    for f in sorted(root.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            if f.name.endswith(".gz"):
                data += gzip.decompress(data)
            if any(n in data for n in needles(key)):
                hits.append(str(f.relative_to(root)))
    return hits


def echo(key: str, status: int) -> Reply:
    """An error reply echoing the key unmasked: a 401 as some proxies send it, or a 500 from a gateway."""
    if status == 401:
        msg = {"message": f"Incorrect API key provided: {key}. You can find your API key at https://platform.openai"
               ".com/account/api-keys.", "type": "invalid_request_error", "code": "invalid_api_key"}  # fmt: skip
    else:
        msg = {"message": f"upstream failure (request with Authorization: Bearer {key}; key={key})",
               "type": "server_error", "code": None, "param": key}  # fmt: skip
    return Reply(status=status, raw=json.dumps({"error": msg}).encode(), kind="auth")


def test_redact_removes_keys_and_keeps_words():
    assert CANARY not in redact(f"bad key {CANARY}!") and "sk-***" in redact("token sk-abcdefgh1234 here")
    assert redact("Authorization: Bearer abc.def-123") == "Authorization: Bearer ***"
    assert redact("(Authorization: Bearer abc/d+e=); next") == "(Authorization: Bearer ***); next"
    assert redact("no secrets here, just sk-1 and a task-list") == "no secrets here, just sk-1 and a task-list"
    assert "AbC123" not in redact("header tokensk-proj-AbC123dEf456GhI789jKl0 trailer")  # glued to a word
    assert redact("a risk-averse, task-specific reasoner") == "a risk-averse, task-specific reasoner"
    assert redact("Incorrect API key provided: Basic dXNlcjpwdw==") == "Incorrect API key provided: Basic ***"


def exception_text(e: BaseException) -> str:
    """Everything an exception shows or carries that a user might print or log."""
    parts = [str(e), repr(e), repr(e.args), "".join(traceback.format_exception(type(e), e, e.__traceback__))]
    for attr in ("message", "body", "code", "param", "type"):
        parts.append(repr(getattr(e, attr, None)))
    resp, req = getattr(e, "response", None), getattr(e, "request", None)
    if resp is not None:
        parts += [resp.text, repr(dict(resp.headers))]
    if req is not None:
        parts += [str(req.url), repr(dict(req.headers))]
    return "\n".join(parts)


@pytest.mark.parametrize("key", [CANARY, PLAIN], ids=["sk-like", "plain-40"])
@pytest.mark.parametrize("status", [401, 500])
def test_an_echoed_key_is_in_no_raised_exception(tmp_path, monkeypatch, key, status):
    """The exception generate() raises for a reply echoing the key: no key in str/repr/args/body/response/
    request/traceback, yet the same type and status code (callers still tell a 401 from a 500)."""
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeOpenAI(default=echo(key, status)) as srv:
        c = LLMClient("m", srv.url, cache=str(tmp_path / "llm.sqlite"), max_attempts=2)
        with pytest.raises(Exception) as exc:
            c.generate([{"role": "user", "content": "hi"}])
        assert f"Bearer {key}" in srv.auth and srv.count == (1 if status == 401 else 2)
    e = exc.value
    assert e.status_code == status
    assert type(e).__name__ == ("AuthenticationError" if status == 401 else "InternalServerError")
    text = exception_text(e)
    assert key not in text and key[4:-4] not in text
    assert ("Incorrect API key provided: ***" if status == 401 else "Bearer ***; key=***") in str(e)
    c.close()
    assert leaks(tmp_path, key) == []


@pytest.mark.parametrize(
    "key,status", [(CANARY, 401), (PLAIN, 401), (PLAIN, 500)], ids=["sk-like-401", "plain-40-401", "plain-40-500"]
)
def test_full_experiment_writes_no_secret(keyed_outputs, capfd, caplog, monkeypatch, key, status):
    monkeypatch.setenv("OPENAI_API_KEY", key)
    for name in ("openai", "httpx", "httpcore", "acemad_utils"):  # what a debug log of the run would hold
        caplog.set_level(logging.DEBUG, logger=name)
    qs = load_demo()[:5]
    plan = FaultInjector(0.3, seed=5, slow_delay=1.5)

    def script(body, n):  # 30% faults, and every request about qs[2] answered by a 401 (or 500) echoing the key
        about = any(qs[2].question in m.get("content", "") for m in body.get("messages", []))
        return echo(key, status) if about else plan(body, n)

    with FakeOpenAI(script) as srv:
        S = Setup(profile="secrets", backend="openai", source="demo", model="fake-canary-model", base_url=srv.url,
                  workers=4)  # fmt: skip
        print(S.describe(), S.population.describe(), S.population.usage())
        configs = [DebateConfig(method="acemad", n_agents=3, rounds=2), DebateConfig(method="majority", n_agents=3)]
        meta, recs = S.run("secrets", configs, questions=qs)
        print(meta["summary"])
        S.close()
        assert f"Bearer {key}" in srv.auth  # the key did go over the wire (and only there)
    failed = [r for r in recs if r["status"] == "failed"]
    assert {r["question_id"] for r in failed} == {qs[2].id}
    said = "Incorrect API key provided: ***" if status == 401 else "Bearer ***; key=***"
    assert all(str(status) in r["error"] and said in r["error"] for r in failed), failed[0]["error"]
    assert all(said in e["error"] for e in meta["summary"]["errors"]) and meta["summary"]["failed"] == len(failed)
    assert plan.total_injected > 0 and meta["summary"]["ok"] == len(recs) - len(failed)
    out = capfd.readouterr()
    assert key not in out.out and key not in out.err
    assert caplog.records and not any(n in caplog.text.encode() for n in needles(key))
    assert (keyed_outputs / "outputs" / "smoke" / "cache" / "llm.sqlite").exists()
    assert len(list((keyed_outputs / "outputs").rglob("meta.json"))) >= 1  # searched below, like every file
    assert leaks(keyed_outputs, key) == []


def test_committed_notebooks_and_profiles_hold_no_key():
    root = Path(__file__).resolve().parent.parent
    keylike = re.compile(rb"\b(sk|rk)-[A-Za-z0-9_\-]{16,}|OPENAI_API_KEY\s*[:=]\s*['\"]?[A-Za-z0-9]")
    files = sorted(root.glob("notebooks/*.ipynb")) + sorted(root.glob("profiles/*.yaml"))
    assert files
    assert [f.name for f in files if keylike.search(f.read_bytes())] == []


URL_PASSWORD = "sk-acemad-URLPASS-canary-456"
URL_QUERY_KEY = "QueryKeyCanary789xyz"
DRIVEN = [
    ("parameters", 'BASE_URL = ""\n'),
    (
        "",
        "import os\nfrom acemad_utils.protocol.config import DebateConfig\n"
        "from acemad_utils.experiments.setup import Setup\n"
        "S = Setup(profile='urls', backend='openai', source='demo', benchmarks=['truthfulqa'], n_items=3, seed=0,\n"
        "          model='m', base_url=BASE_URL, workers=2, calls='two')  # and the demo subset\n"
        "meta, records = S.run('u', [DebateConfig(method='acemad', n_agents=2, rounds=1)])\n"
        "print('key set:', bool(os.environ.get('OPENAI_API_KEY')), S.describe(), S.population.describe())\n"
        "print(S.population.usage(), records[0])\n"
        "S.close()\nprint('SUMMARY: ok', meta['summary']['ok'], 'failed', meta['summary']['failed'])",
    ),
]


def test_url_credentials_reach_no_file_through_the_driver(fake_server, keyed_outputs, tmp_path, monkeypatch, capsys):
    """`--set BASE_URL=http://user:sk-...@127.0.0.1:PORT/v1?api_key=...` through the reproduce driver: the run is
    answered, and neither the password, the query key nor OPENAI_API_KEY is in any file it wrote or what it printed."""
    path = tmp_path / "01_urls.ipynb"
    spec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": spec, "language_info": {"name": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"tags": [tag]} if tag else {}) for tag, src in DRIVEN]
    nbformat.write(nb, path)
    port = fake_server.url.split(":")[2].split("/")[0]
    url = f"http://user:{URL_PASSWORD}@127.0.0.1:{port}/v1?api_key={URL_QUERY_KEY}"
    # per notebook: a test notebook declares no parameters in notebooks/, so `common` values would not reach it
    prof = {"profile": "urls", "notebooks": {"01_urls": {"BACKEND": "openai", "MODEL": "m", "BASE_URL": url}}}
    monkeypatch.setattr(reproduce, "notebooks", lambda: {"01_urls": path})
    monkeypatch.setattr(reproduce, "load_profile", lambda name, overrides=None: prof)
    monkeypatch.setattr(reproduce, "_print_estimate", lambda *a, **kw: None)  # (reads profiles/ by name)
    monkeypatch.setattr(sys, "argv", ["acemad_utils.reproduce", "--profile", "urls", "--set", f"BASE_URL={url}"])
    code = reproduce.run("urls")
    assert fake_server.count > 0  # (the URL's user:password is sent as Basic auth; the kernel still holds the key)
    out = capsys.readouterr()
    assert code == 0 and re.search(r"ok [1-9]\d* failed 0", out.out), out.out
    executed = keyed_outputs / "outputs" / "smoke" / "notebooks" / "urls" / "01_urls.ipynb"
    locks = [keyed_outputs / "outputs" / "smoke" / d / ".lock.holder" for d in ("runs/urls", "cache")]
    assert executed.exists() and all(p.exists() for p in locks) and "key set: True" in executed.read_text()
    assert "127.0.0.1" in executed.read_text() and "--set BASE_URL=http://127.0.0.1" in locks[0].read_text()
    for secret in (URL_PASSWORD, URL_QUERY_KEY, CANARY):
        assert leaks(keyed_outputs, secret) == [] and secret not in out.out + out.err
        assert os.environ.get("ACEMAD_URL_SECRETS") is None  # the driver's environment is restored


def test_meta_keeps_no_url_credentials_of_a_config(keyed_outputs):
    """A per-agent base_url typed by hand with credentials (a notebook run in JupyterLab, no driver): meta.json
    stores the URL without them."""
    url = f"http://user:{URL_PASSWORD}@127.0.0.1:9/v1?api_key={URL_QUERY_KEY}&api-version=1"
    cfg = DebateConfig(method="acemad", n_agents=3, rounds=1, truth_holder=AgentSpec("Skeptic", 0.6, base_url=url))
    d = run_experiment("probe/urls", make_items(4, k=4, seed=1), [cfg], SimPopulation(), progress=False)
    text = (d / "meta.json").read_text()
    assert "http://127.0.0.1:9/v1?api-version=1" in text
    assert leaks(keyed_outputs, URL_PASSWORD) == [] and leaks(keyed_outputs, URL_QUERY_KEY) == []


def test_a_key_across_the_preview_cut_is_redacted_before_the_cut(monkeypatch):
    key = "sk-proj-" + "Zq7" * 13 + "x"  # 48 characters
    remember_secret(key)
    body = "a" * 180 + key + " and more"  # glued to a word character, across character 200
    shown = preview(body.encode())
    assert key[8:14] not in shown and "Zq7Zq7" not in shown


def test_a_reply_echoing_the_key_is_stored_and_returned_without_it(tmp_path):
    with FakeOpenAI(default=Reply(content=f"sure, your key is {PLAIN} and {CANARY}")) as srv:
        client = LLMClient("m", srv.url, PLAIN, cache=tmp_path / "llm.sqlite", max_attempts=1)
        text = client.generate([{"role": "user", "content": "echo"}]).text
        client.close()
    assert PLAIN not in text and "canary" not in text and "***" in text
    for path in tmp_path.iterdir():
        assert not any(n in path.read_bytes() for n in (PLAIN.encode(), *needles(CANARY))), path


def test_url_credentials_echoed_by_the_endpoint_reach_no_exception_or_file(tmp_path):
    """A URL's user:password@ goes as Basic auth and its ?api_key= as a query; an endpoint quoting either back (a 401
    with the Authorization value, or the raw values) leaves them in no exception and no file; paths stay whole."""

    password = "PwCanary77plain"  # not key-like: only redaction by value catches it

    def quote(body, n):
        msg = f"Incorrect API key provided: {next(iter(srv.auth))}; {password}; {URL_QUERY_KEY}"
        return Reply(status=401, raw=json.dumps({"error": {"message": msg}}).encode(), kind="auth")

    with FakeOpenAI(quote) as srv:
        url = srv.url.replace("://", f"://user:{password}@") + f"?api_key={URL_QUERY_KEY}"
        c = LLMClient("m", url, "sk-x", cache=tmp_path / "llm.sqlite", max_attempts=1)
        c.preflight()
        with pytest.raises(Exception) as exc:
            c.generate([{"role": "user", "content": "hi"}])
        c.close()
    assert any(a.startswith("Basic ") for a in srv.auth)  # what the endpoint echoed
    assert srv.targets == [f"/v1/models?api_key={URL_QUERY_KEY}", f"/v1/chat/completions?api_key={URL_QUERY_KEY}"]
    text = exception_text(exc.value)
    basic = next(a for a in srv.auth if a.startswith("Basic ")).split()[1]
    for secret in (password, URL_QUERY_KEY, basic):
        assert secret not in text and leaks(tmp_path, secret) == []
    assert redact("no user:password@ in a role's URL") == "no user:password@ in a role's URL"  # a user is no secret
