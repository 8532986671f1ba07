"""Spend safety: a call is free only when known free (our own llama.cpp server, `free: true`); any other model
without a price is unpriced, loopback or not: shown so, refused under MAX_USD; a profile's price wins."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from acemad_utils import api, make_question
from acemad_utils.agents import budget as B
from acemad_utils.agents import local_server as LS
from acemad_utils.agents import prices as PR
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import EmptyReply, GenerateConfig, LLMClient, endpoint_kind
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.cost import estimate as C
from acemad_utils.data.paths import ROOT
from acemad_utils.experiments import profiles as R
from acemad_utils.reproduce import cli as reproduce
from tests.fake_openai import FakeOpenAI, Reply, completion

MSG = [{"role": "user", "content": "hi"}]
GATEWAY = "http://127.0.0.1:4000/v1"  # where a LiteLLM-style gateway to paid providers usually listens
PAPER_MODELS = ("gpt-4o-mini", "Qwen/Qwen3-235B-A22B-Instruct-2507", "deepseek-ai/DeepSeek-V3.1",
                "meta-llama/Llama-3.1-8B-Instruct")  # fmt: skip


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in (B.ENV_MAX, B.ENV_SINCE, PR.ENV_MODELS, "OPENAI_BASE_URL", "ACEMAD_MODEL"):
        monkeypatch.delenv(var, raising=False)


def _profile(tmp_path: Path, models: dict, **common) -> str:
    """A copy of the paper profile with a `models:` key (and common overrides), as a file path."""
    prof = yaml.safe_load((ROOT / "profiles" / "paper.yaml").read_text())
    prof["models"] = models
    prof["common"] = {**prof["common"], **common}
    path = tmp_path / "priced.yaml"
    path.write_text(yaml.safe_dump(prof))
    return str(path)


def _row(est, model: str):
    [row] = [r for r in est.rows if r.model == model]
    return row


# ----------------------------------------------------------------------------- prices
def test_the_price_table_prices_every_model_of_the_paper_profile_with_provider_source_and_date():
    for model in PAPER_MODELS:
        p = PR.price_of(model)
        assert p is not None, model
        assert p.input > 0 and p.output > 0 and 0 < p.batch_factor <= 1
        assert p.provider and p.source.startswith("https://") and p.recorded
    # the profile's served names ("org/Name") find the table's entries; an unknown model stays unpriced
    assert PR.price_of("Qwen/Qwen3-235B-A22B-Instruct-2507") is PR.PRICES["Qwen3-235B-A22B-Instruct-2507"]
    assert PR.price_of("my-gateway-model") is None
    # DeepSeek's own API has a cache-hit rate and no batch discount: both as recorded
    ds = PR.price_of("deepseek-ai/DeepSeek-V3.1")
    assert ds.cached_input < ds.input and ds.batch_factor == 1.0


def test_profile_terms_are_checked_and_name_the_model():
    terms = PR.parse_terms({"a": {"free": True}, "b": {"price": {"input": 1, "output": 2, "batch": 0.5}}})
    assert terms["a"].free and terms["b"].usd(1e6, 1e6) == pytest.approx(3.0)
    assert terms["b"].usd(1e6, 1e6, batch=True) == pytest.approx(1.5)
    bad = ({"free": "yes"}, {"price": {"input": 1}}, {"price": {"input": -1, "output": 1}}, {}, {"cost": 1},
           {"price": {"input": 1, "output": 1, "batch": 2}}, {"price": {"input": 1, "output": 1}, "free": True},
           {"price": {"input": float("inf"), "output": 1}}, {"price": {"input": True, "output": 1}})  # fmt: skip
    for terms in bad:
        with pytest.raises(ValueError, match="models: m: "):
            PR.parse_terms({"m": terms})


def test_the_profile_spend_settings_reach_the_kernels_and_a_bad_one_stops_before_anything_runs(tmp_path, monkeypatch):
    models = {"fake-gw": {"price": {"input": 1.0, "output": 2.0}}}
    assert json.loads(R.run_env(R.load_profile(_profile(tmp_path, models)))[PR.ENV_MODELS]) == models
    with pytest.raises(SystemExit, match="models: fake-gw: .*price.input"):
        R.load_profile(_profile(tmp_path, {"fake-gw": {"price": {"input": "cheap", "output": 1}}}))
    with pytest.raises(SystemExit, match="max_usd"):
        R.load_profile("paper", {"MAX_USD": "ten"})
    with pytest.raises(SystemExit, match="did you mean 'batch'"):
        R.load_profile("paper", {"CALLS_VIA": "bach"})
    prof = R.load_profile("paper", {"MAX_USD": 12.5, "CALLS_VIA": "batch"})
    monkeypatch.delenv("ACEMAD_CALLS_VIA", raising=False)
    assert R.run_env(prof) == {"ACEMAD_MAX_USD": "12.5", "ACEMAD_CALLS_VIA": "batch"}
    monkeypatch.setenv(B.ENV_MAX, "3")  # the caller's environment wins
    assert R.run_env(prof)["ACEMAD_MAX_USD"] == "3"


# ----------------------------------------------------------------------------- the estimate
def test_a_gateway_on_loopback_without_a_price_is_unpriced_in_the_estimate():
    gw = {"MODEL": "my-gateway-model", "BASE_URL": GATEWAY}
    [row] = (est := C.estimate_profile("paper", gw, ["03_main_results"], per_benchmark=1)).rows
    assert endpoint_kind(GATEWAY) == "local-llama.cpp"  # the cache-key label is unchanged, and says nothing of cost
    assert row.calls > 0 and row.usd is None and row.usd_batch is None and not row.free
    text = C.format_estimate(est)
    lines = text.splitlines()
    [line] = [x for x in lines if x.strip().startswith("03_main_results")]
    assert line.split()[-2:] == ["unpriced", "unpriced"] and "local" not in line
    tokens = C._m(row.prompt_tokens + row.completion_tokens)
    assert f"+ 1 unpriced row ({tokens} tokens)" in text
    [how] = [x for x in lines if "unpriced (no price" in x]
    assert "my-gateway-model" in how and "models:" in how and "free: true" in how


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_a_profile_price_override_changes_the_estimate(tmp_path):
    only, kw = ["03_main_results"], dict(per_benchmark=1)
    base = _row(C.estimate_profile("paper", None, only, **kw), "gpt-4o-mini")
    ten_x = {"gpt-4o-mini": {"price": {"input": 1.5, "output": 6.0, "batch": 0.5}}}
    over = _row(C.estimate_profile(_profile(tmp_path, ten_x), None, only, **kw), "gpt-4o-mini")
    assert over.calls == base.calls and over.usd == pytest.approx(10 * base.usd)
    assert over.usd_batch == pytest.approx(over.usd / 2)
    # a gateway model: unpriced, then priced by the profile, then marked free
    gw = {"MODEL": "my-gateway-model", "BASE_URL": GATEWAY}
    priced = {"my-gateway-model": {"price": {"input": 1.0, "output": 1.0}}}
    row = _row(C.estimate_profile(_profile(tmp_path, priced, **gw), None, only, **kw), "my-gateway-model")
    assert row.usd == pytest.approx((row.prompt_tokens + row.completion_tokens) / 1e6)
    assert row.usd_batch == row.usd  # no batch discount given: none assumed
    free = C.estimate_profile(_profile(tmp_path, {"my-gateway-model": {"free": True}}, **gw), None, only, **kw)
    assert _row(free, "my-gateway-model").free and _row(free, "my-gateway-model").usd == 0.0
    assert "$0 (free)" in C.format_estimate(free) and not free.unpriced()


def test_the_local_profile_runs_on_the_projects_own_server_and_stays_free():
    est = C.estimate_profile("local", None, ["03_main_results"], per_benchmark=1)
    assert est.rows and all(r.free and r.usd == 0.0 for r in est.rows)
    assert "$0 (free)" in C.format_estimate(est)


# ----------------------------------------------------------------------------- MAX_USD
def test_max_usd_refuses_an_unpriced_loopback_endpoint_before_any_call(tmp_path, monkeypatch):
    monkeypatch.setenv(B.ENV_MAX, "5")
    with FakeOpenAI(["never sent"]) as srv:
        with pytest.raises(B.UnpricedModel) as e:
            LLMPopulation(model="my-gateway-model", base_url=srv.url, api_key="sk-fake", cache=None)
        msg = str(e.value)
        assert "'my-gateway-model'" in msg and "models:" in msg and "free: true" in msg and "MAX_USD" in msg
        # a priced client whose call names an unpriced model: refused before that call is sent
        c = LLMClient("gpt-4o-mini", srv.url, "sk-fake")
        with pytest.raises(B.UnpricedModel) as e:
            c.generate(MSG, GenerateConfig(max_tokens=5), model="other-model")
        assert e.value.model == "other-model"
        assert srv.count == 0 and not srv.requests  # no completion was sent
    monkeypatch.delenv(B.ENV_MAX)  # without a cap nothing is refused (the estimate says it is unpriced)
    with FakeOpenAI(["ok"]) as srv:
        c = LLMClient("my-gateway-model", srv.url, "sk-fake")
        assert c.generate(MSG).text == "ok" and c.stats()["cost_usd"] is None


def test_a_cap_below_a_cent_is_shown_as_it_is_not_as_zero():
    with pytest.raises(B.BudgetExceeded, match=r"^MAX_USD \$0\.0040 reached: this run has spent about \$0\.00 "):
        B.Budget(0.004).reserve(0.005)


def test_max_usd_refuses_a_roles_unpriced_model_on_the_runs_endpoint_before_any_call(tmp_path, monkeypatch):
    """The run's model is priced, the Skeptics' is not: refused before the first question, not in its middle."""
    monkeypatch.setenv(B.ENV_MAX, "5")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    q = make_question("Which is even?", ["3", "4"], answer="B")
    with FakeOpenAI(["never sent"]) as srv:
        with pytest.raises(B.UnpricedModel, match="'unpriced-x' has no price.*the same as JSON in ACEMAD_MODELS"):
            api.run([q], "acemad", model="gpt-4o-mini", base_url=srv.url, roles={"skeptic": "unpriced-x"}, out=tmp_path)
        assert srv.count == 0 and not srv.requests


def test_reproduce_with_max_usd_refuses_an_unpriced_model_before_the_first_notebook(monkeypatch, capsys, tmp_outputs):
    started = []
    monkeypatch.setattr(reproduce, "_run_notebooks", lambda *a, **k: started.append(a) or 0)
    monkeypatch.setattr(reproduce, "_preflight", lambda *a, **k: None)  # no gateway (test_input_validation.py)
    monkeypatch.setattr(reproduce, "_data_preflight", lambda *a, **k: [])  # nor benchmark files, as there
    gw = {"MODEL": "my-gateway-model", "BASE_URL": GATEWAY, "MAX_USD": 20}
    with pytest.raises(SystemExit) as e:
        reproduce.run("paper", ["03_main_results"], gw)
    assert "not started" in str(e.value) and "'my-gateway-model'" in str(e.value) and "models:" in str(e.value)
    assert not started
    # the same profile without a cap runs (as CI's paper smoke run against fake servers on 127.0.0.1 does)
    reproduce.run("paper", ["03_main_results"], {"MODEL": "my-gateway-model", "BASE_URL": GATEWAY})
    assert started
    assert "unpriced" in capsys.readouterr().out


def test_max_usd_counts_a_priced_loopback_endpoint(tmp_path, monkeypatch):
    monkeypatch.setenv(B.ENV_MAX, "1")
    reply = Reply("x", prompt_tokens=1_000_000, completion_tokens=0)
    with FakeOpenAI([reply, reply]) as srv:
        c = LLMClient("gpt-4o-mini", srv.url, "sk-fake", cache=str(tmp_path / "c.sqlite"))
        assert c.kind == "local-llama.cpp" and not c.free  # loopback, and priced like any endpoint
        c.generate(MSG, GenerateConfig(max_tokens=5), scope="a")
        assert c.stats()["cost_usd"] == pytest.approx(0.15) and c.budget.spent == pytest.approx(0.15)
    # what a later kernel sees of this run: the loopback reply counts at its price
    assert ResponseCache(tmp_path / "c.sqlite").spending(0)[0] == pytest.approx(0.15)
    with FakeOpenAI([reply]) as srv:
        c = LLMClient("gpt-4o-mini", srv.url, "sk-fake", budget=B.Budget(0.2, spent_before=0.15))
        with pytest.raises(B.BudgetExceeded):  # ~450k modelled prompt tokens ($0.07) would pass $0.20: not sent
            c.generate([{"role": "user", "content": "y" * 2_000_000}], GenerateConfig(max_tokens=5))
        assert srv.count == 0


def test_max_usd_estimates_follow_an_endpoint_that_counts_more_prompt_tokens_than_modelled(tmp_path):
    """Each reply reports 200,000 prompt tokens ($0.03) for a prompt modelled at a few: after the first, a call's
    reservation uses the ratio seen, so the call that would pass the cap is refused, not sent."""
    reply = Reply("x", prompt_tokens=200_000, completion_tokens=0)
    with FakeOpenAI(default=reply) as srv:
        c = LLMClient("gpt-4o-mini", srv.url, "sk-fake", budget=B.Budget(0.1))
        with pytest.raises(B.BudgetExceeded):
            for i in range(10):
                c.generate(MSG, GenerateConfig(max_tokens=5), scope=str(i))
        assert srv.count == 3 and c.budget.spent == pytest.approx(0.09)  # a fourth would have made $0.12


def test_an_empty_reply_that_reports_usage_is_paid_for_uncached_and_counted_by_max_usd(tmp_path, monkeypatch):
    """A reasoning model out of tokens: content null, yet 1M prompt tokens billed ($0.15). The call fails and is not
    cached, but the cap, the client's cost and what a later kernel sees count it; the next call would pass $0.20."""
    monkeypatch.setenv(B.ENV_MAX, "0.2")
    monkeypatch.setenv(B.ENV_SINCE, "0")
    empty = Reply(raw=json.dumps(completion(None, "gpt-4o-mini", pt=1_000_000, ct=0, finish="length")).encode())
    cache = str(tmp_path / "c.sqlite")
    with FakeOpenAI(default=empty) as srv:
        c = LLMClient("gpt-4o-mini", srv.url, "sk-fake", cache=cache)
        with pytest.raises(EmptyReply, match="empty reply"):
            c.generate(MSG, GenerateConfig(max_tokens=5), scope="a")
        assert c.budget.spent == pytest.approx(0.15) and c.stats()["cost_usd"] == pytest.approx(0.15)
        with pytest.raises(B.BudgetExceeded):  # modelled at the 1M prompt tokens reported: $0.30 > $0.20
            c.generate(MSG, GenerateConfig(max_tokens=5), scope="b")
        assert srv.count == 1
    with ResponseCache(cache) as store:
        assert len(store) == 0 and store.spending(0)[0] == pytest.approx(0.15)


def test_the_projects_own_llama_server_stays_free_under_max_usd(tmp_path, monkeypatch):
    """serve() registers the server it started; the client on it bills nothing and is never refused, whatever
    the model is called. (The server process is faked by a FakeOpenAI on the port serve() is given.)"""
    no_proc = SimpleNamespace(returncode=None, poll=lambda: None, terminate=lambda: None, wait=lambda timeout=None: 0)
    monkeypatch.setattr(LS, "check_server_installed", lambda: None)
    monkeypatch.setattr(LS.subprocess, "Popen", lambda cmd, **kw: no_proc)  # the FakeOpenAI answers on the port
    monkeypatch.setenv(B.ENV_MAX, "0.000001")
    reply = Reply("x", prompt_tokens=1_000_000, completion_tokens=1_000_000)
    with FakeOpenAI([reply]) as srv:
        port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
        with LS.serve(gguf="/m.gguf", port=port) as url:
            assert url == srv.url and LS.is_own_server(url)
            c = LLMClient("gpt-4o-mini", url, cache=str(tmp_path / "c.sqlite"))
            assert c.free and c.generate(MSG, scope="s").text == "x"
            assert c.stats()["cost_usd"] == 0.0 and c.budget.spent == 0.0
        assert not LS.is_own_server(url)  # stopped: the same URL is no longer known to be free
    assert ResponseCache(tmp_path / "c.sqlite").spending(0)[0] == 0.0
