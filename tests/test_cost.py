"""Estimate before spending (no network, exactly the calls a real run sends) and MAX_USD (a capped run stops
cleanly, pays nothing twice when resumed, and ends like an uncapped run)."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import nbformat
import openai
import papermill as pm
import pytest

from acemad_utils import notebook
from acemad_utils.agents import budget as B
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import GenerateConfig, LLMClient
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.sim import make_items
from acemad_utils.agents.tokenmodel import prompt_tokens, tokens
from acemad_utils.cost import estimate as C
from acemad_utils.cost import items as CI
from acemad_utils.data import benchmarks as D
from acemad_utils.data import paths as P
from acemad_utils.data.benchmarks import load_demo
from acemad_utils.data.transcripts import read_jsonl
from acemad_utils.experiments import profiles
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.params import SETUP_NAMES
from acemad_utils.experiments.runner import BudgetStop, run_experiment
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.reproduce import cli as reproduce
from tests.fake_openai import FakeOpenAI, FaultInjector, Reply
from tests.test_prices import PAPER_MODELS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection or OpenAI SDK client fails the test."""

    def refuse(*a, **k):
        raise AssertionError("the estimate tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(openai.OpenAI, "__init__", lambda *a, **k: refuse())


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
@pytest.mark.usefixtures("tmp_outputs")  # no subset a paper-profile run built in the checkout's data/subsets is read
def test_make_estimate_prints_the_paper_profile_priced_without_any_network(no_network, capsys, monkeypatch):
    for k in ("ACEMAD_DATA_DIR", "ACEMAD_MODELS", "ACEMAD_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.delenv("ACEMAD_SMOKE", raising=False)  # smoke mode caps the item counts: not the paper's bill
    made, estimate_profile = [], C.estimate_profile
    monkeypatch.setattr(C, "estimate_profile", lambda *a, **k: made.append(estimate_profile(*a, **k)) or made[-1])
    assert C.main(["estimate", "--profile", "paper", "--per-benchmark", "1"]) == 0
    out = capsys.readouterr().out
    table, power = out.split("questions needed for 80% power")  # then what the questions buy, per claim family
    for nb in ("01_subset_construction", "02_baselines", "03_main_results", "06_scaling", "total"):
        assert nb in table
    total = next(line for line in table.splitlines() if line.strip().startswith("total"))
    dollars = float(total.split("$")[1].split()[0].replace(",", ""))
    assert 50 < dollars < 2000, total  # the README's ~$313; a broken replay gives 0 or absurd sums
    assert "check current prices" in table and "openai.com/api/pricing" in table
    assert "main gain" in power and "claims are underpowered in this plan" in power
    [est] = made
    assert {r.model for r in est.rows} == set(PAPER_MODELS)
    assert all(r.usd is not None and not r.free for r in est.rows) and not est.unpriced()
    rows = [x for x in table.splitlines() if x.strip().startswith(("0", "total"))]
    assert rows and all(x.split()[-1].startswith("$") and " local " not in x for x in rows)
    # Table 6 repeats notebook 03's configs on the full test sets: subset items come from the cache, others paid
    [t6] = [r for r in est.rows if r.notebook == "07_other_models" and r.model == "gpt-4o-mini"]
    outside = sum(D.FULL_SIZES[b] - CI.PAPER_SUBSETS[b] for b in ("arc_challenge", "logiqa"))
    assert t6.questions == 2 * (D.FULL_SIZES["arc_challenge"] + D.FULL_SIZES["logiqa"])
    # Decentralized MAD and AceMAD (T=3, N=5, two calls per agent and round; different rosters share nothing)
    assert t6.calls == pytest.approx(outside * 2 * 5 * 3 * 2)
    # WORKERS in flight stay inside RATE_LIMIT and take at most twice the time it allows any WORKERS
    t = est.total()
    tokens = t.prompt_tokens + t.completion_tokens
    per_minute = est.workers / C.CALL_SECONDS * 60
    assert per_minute <= C.RATE_LIMIT[0] and per_minute * tokens / t.calls <= C.RATE_LIMIT[1]
    hours, floor = C.wall_hours(t.calls, tokens, est.workers)
    assert hours <= 2 * floor


def test_the_local_profiles_estimate_names_the_local_model_and_prices_its_plan_free(monkeypatch, tmp_path, capsys):
    gguf = tmp_path / "MyLocal-7B.Q4.gguf"
    gguf.write_bytes(b"")
    monkeypatch.setenv("ACEMAD_GGUF", str(gguf))
    for k in ("ACEMAD_MODELS", "ACEMAD_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    assert C.main(["estimate", "--profile", "local", "--per-benchmark", "1"]) == 0
    table, power = capsys.readouterr().out.split("questions needed for 80% power")
    rows = [x for x in table.splitlines() if x.strip().startswith("0")]
    assert rows and all(" MyLocal-7B.Q4 " in x and "gpt-4o-mini" not in x for x in rows)
    main_gain = next(x for x in power.splitlines() if x.strip().startswith("main gain"))
    assert main_gain.split()[-1] == "$0"  # the plan's dollars: the server's calls are free, not "unpriced"


def test_the_estimate_counts_exactly_the_calls_a_real_run_sends(fake_server, full_outputs):
    qs = load_demo()[:3]
    P_ = {"SEED": 0, "ETA": 2.0, "ROUNDS": [2, 3], "BACKEND": "openai", "MODEL": "gpt-4o-mini", "CALLS": "two"}
    [stage] = R.runs("03_main_results", P_)
    per = C.replay(stage.configs, qs, P_)
    [(nc, pt, ct)] = per["by"].values()
    kw = dict(api_key="sk-fake", cache=str(full_outputs / "c.sqlite"), kind="openai", max_concurrency=8)
    pop = LLMPopulation(model="gpt-4o-mini", base_url=fake_server.url, **kw)
    run_experiment("est", qs, stage.configs, pop, workers=2, progress=False)
    assert fake_server.count == round(nc * len(qs))
    assert pop.usage()["calls"] == round(per["agent_calls"] * len(qs))


def test_reproduce_prints_the_estimate_before_the_first_notebook_of_a_paid_profile(
    monkeypatch, capsys, no_network, tmp_outputs
):
    order = []
    stop = lambda *a, **k: order.append("nb") or (_ for _ in ()).throw(RuntimeError("stop here"))
    monkeypatch.setattr(pm, "execute_notebook", stop)
    monkeypatch.setattr(C, "estimate_profile", lambda *a, **k: order.append("estimate") or C.Estimate("paper"))
    monkeypatch.setattr(reproduce, "_preflight", lambda *a, **k: None)  # no network (test_input_validation.py)
    monkeypatch.setattr(reproduce, "_data_preflight", lambda *a, **k: [])  # nor benchmark files, as there
    assert reproduce.run("paper", ["03_main_results"], {"MAX_USD": 7}) == 1  # the failure: one line, exit 1
    assert order == ["estimate", "nb"]
    out = capsys.readouterr().out
    assert "cost estimate for profile 'paper'" in out and "03_main_results FAILED after" in out
    assert "questions needed for 80% power" in out  # the n beside the dollars, before anything is paid
    order.clear()
    assert reproduce.run("default", ["03_main_results"]) == 1
    assert order == ["nb"]  # the synthetic profile costs nothing: no estimate


def test_a_paid_notebook_that_will_build_its_subsets_prices_their_screening_first(
    monkeypatch, capsys, no_network, tmp_outputs
):
    """Notebook 05 alone on a fresh checkout builds the challenging subsets itself (notebook 01's screening, most of
    a paper run's calls): the estimate printed before it prices them too."""
    priced: list = []
    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stop here")))
    monkeypatch.setattr(C, "estimate_profile", lambda p, o, sel: priced.append(sel) or C.Estimate("paper"))
    monkeypatch.setattr(reproduce, "_preflight", lambda *a, **k: None)
    monkeypatch.setattr(reproduce, "_data_preflight", lambda *a, **k: [])
    assert reproduce.run("paper", ["05_ablation"], {"MAX_USD": 7}) == 1
    assert priced == [["01_subset_construction", "05_ablation"]]


# ----------------------------------------------------------------------------- MAX_USD
def _priced_plan():
    """Replies reporting the token model's counts (a calibrated endpoint): the pre-send estimate bounds each call."""
    inner = FaultInjector(rate=0.0, seed=3)

    def script(body, n):
        r = inner(body, n)
        r.prompt_tokens, r.completion_tokens = prompt_tokens(body["messages"]), tokens(r.content)
        return r

    return script


def test_max_usd_stops_the_run_cleanly_and_a_resume_pays_nothing_twice(full_outputs, monkeypatch):
    qs = make_items(12, k=4, seed=5)
    cfg = DebateConfig(method="acemad", n_agents=3, rounds=2)  # 12 calls per question
    kw = dict(model="gpt-4o-mini", api_key="sk-fake", kind="openai", max_concurrency=4)
    # reference: the whole run, uncapped, on its own cache
    with FakeOpenAI(_priced_plan()) as srv:
        pop = LLMPopulation(base_url=srv.url, cache=str(full_outputs / "ref.sqlite"), **kw)
        ref_dir = run_experiment("ref", qs, [cfg], pop, workers=3, progress=False)
        full_calls, full_cost = srv.count, pop.usage()["cost_usd"]
    assert full_calls == 12 * 12 and full_cost > 0
    cap = full_cost / 2  # reservations assume max_tokens replies: the cap is met before half the calls
    monkeypatch.setenv(B.ENV_MAX, str(cap))
    with FakeOpenAI(_priced_plan()) as srv:
        pop = LLMPopulation(base_url=srv.url, cache=str(full_outputs / "c.sqlite"), **kw)
        with pytest.raises(BudgetStop) as e:
            run_experiment("capped", qs, [cfg], pop, workers=2, progress=False)
        assert all(w in str(e.value) for w in ("MAX_USD", "raise MAX_USD", "rerun", "records saved"))
        first = srv.count
        assert pop.usage()["cost_usd"] <= cap + 1e-9  # never past the cap: calls are refused before they are sent
        recs = read_jsonl(full_outputs / "outputs" / "runs" / "capped" / "transcripts.jsonl")
        assert 0 < len(recs) < len(qs) and all(r["status"] == "ok" for r in recs)  # stopped, not failed
        meta = json.loads((full_outputs / "outputs" / "runs" / "capped" / "meta.json").read_text())
        assert meta["summary"]["stopped_by"] == "MAX_USD"
        # raise the cap and rerun: the paid part comes from the cache
        monkeypatch.setenv(B.ENV_MAX, str(full_cost * 2))
        pop2 = LLMPopulation(base_url=srv.url, cache=str(full_outputs / "c.sqlite"), **kw)
        d = run_experiment("capped", qs, [cfg], pop2, workers=3, progress=False)
        assert srv.count == full_calls  # every call sent exactly once over both sessions
        assert first < full_calls
    strip = lambda p: [{k: v for k, v in r.items() if k not in ("usage", "rounds")} for r in read_jsonl(p)]
    assert strip(d / "transcripts.jsonl") == strip(ref_dir / "transcripts.jsonl")


def test_a_call_sent_before_any_reported_count_is_held_at_what_it_can_be_billed(tmp_path):
    """An endpoint whose tokenizer counts one token per UTF-8 byte (about what CJK text costs; the token model assumes
    4.4 chars a token): the first wave's holds still cover their bills, and later holds follow the reported counts."""
    msgs = [{"role": "user", "content": "以下哪一项陈述是正确的？请说明理由。" * 30}]
    billed = len(msgs[0]["content"].encode()) + 6  # one token per byte, plus the message's and the reply's overhead
    with FakeOpenAI([Reply("A", prompt_tokens=billed, completion_tokens=1)] * 2) as srv:
        c = LLMClient("gpt-4o-mini", srv.url, "sk-fake", kind="openai", cache=str(tmp_path / "c.sqlite"))
        held = c.estimate_cost("gpt-4o-mini", msgs, {"max_tokens": 1})
        c.generate(msgs, GenerateConfig(max_tokens=1), scope="first")
        assert c.stats()["cost_usd"] <= held
        spent = c.stats()["cost_usd"]
        assert c.estimate_cost("gpt-4o-mini", msgs, {"max_tokens": 1}) >= spent  # the reported ratio, not bytes


def test_budget_counts_what_earlier_kernels_paid_from_the_cache(tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / "c.sqlite")
    v = {"text": "x", "prompt_tokens": 1_000_000, "completion_tokens": 0}
    cache.put("a", v, model="gpt-4o-mini", kind="openai")
    cache.put("b", {**v, "cached_tokens": 1_000_000}, model="gpt-4o-mini", kind="openai")
    cache.put("c", {**v, "prompt_tokens": 9_000_000}, model="m", kind="local-llama.cpp")
    assert cache.spending(0)[0] == pytest.approx(0.15 + 0.075)
    assert cache.spending(4e9)[0] == 0
    monkeypatch.setenv(B.ENV_MAX, "0.3")
    monkeypatch.setenv(B.ENV_SINCE, "0")
    b = B.current(cache)
    assert b.total == pytest.approx(0.225)
    with pytest.raises(B.BudgetExceeded):
        b.reserve(0.1)
    with pytest.raises(B.BudgetExceeded):  # once refused, every later paid call is refused too
        b.reserve(0.0001)
    assert b.reserve(0.0) == 0.0  # a free (local) call is never refused


def test_cached_tokens_are_recorded_and_priced_at_the_cached_rate(tmp_path):
    with FakeOpenAI([Reply("hi", prompt_tokens=2000, completion_tokens=100, cached_tokens=1536)]) as srv:
        c = LLMClient("gpt-4o-mini", srv.url, "sk-fake", kind="openai", cache=str(tmp_path / "c.sqlite"))
        r = c.generate([{"role": "user", "content": "x"}], GenerateConfig(), scope="s")
        assert r.cached_tokens == 1536 and r.usage()["cached_tokens"] == 1536
        s = c.stats()
        assert s["cached_tokens"] == 1536 and s["cost_usd"] == pytest.approx((464 * 0.15 + 1536 * 0.075 + 60) / 1e6)
        assert c.cache.spending(0)[0] == pytest.approx(s["cost_usd"])


class _Ran(Exception):
    pass


def _what_the_notebook_runs(nb: str, P_: dict) -> list[tuple]:
    """Notebook nb's code cells with parameters P_ and a stub Setup: each run asked for as (name, config hashes, cap,
    model, benchmarks); a run stops its cell, later cells still run."""
    captured = []

    class FakeSetup:
        synthetic = False

        def __init__(self, **kw):
            self.model, self.benchmarks = kw.get("model") or "gpt-4o-mini", list(kw.get("benchmarks") or [])
            self.cap = None

        @classmethod
        def from_params(cls, P, **kw):
            return cls(**{**{k.lower(): P[k] for k in SETUP_NAMES if k in P}, **kw})

        describe = lambda self: "stub"
        subset = lambda self, b, n_max=None: []

        def full_questions(self, benchmarks, n_max=None):
            self.benchmarks, self.cap = list(benchmarks), n_max
            return []

        def run(self, name, configs=None, n_max=None, questions=None):
            if isinstance(name, R.Run):  # setup.run(experiment, n_max=N_MAX): the registry Run brings its configs
                name, configs = name.name, name.configs
            cap = self.cap if questions is not None else n_max
            captured.append((name, [c.hash for c in configs], cap, self.model, self.benchmarks))
            raise _Ran

    book = nbformat.read(str(P.ROOT / "notebooks" / f"{nb}.ipynb"), as_version=4)
    ns: dict = {"display": lambda *a, **k: None}
    exec("\n".join(f"{k} = {v!r}" for k, v in P_.items()), ns)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(notebook, "Setup", FakeSetup)
        for cell in book.cells:
            tags = cell.metadata.get("tags", [])
            if cell.cell_type != "code" or "parameters" in tags or "injected-parameters" in tags:  # P_ stands in
                continue
            try:
                exec(cell.source, ns)
            except _Ran:
                pass
            except Exception:  # a later cell reading a run's results: the stub has none
                if not captured:
                    raise
    return captured


@pytest.mark.parametrize(
    "nb", ["02_baselines", "03_main_results", "04_heterogeneity", "05_ablation", "06_scaling", "07_other_models"]
)
@pytest.mark.parametrize("profile", ["paper", "default"])
def test_the_estimate_replays_exactly_the_runs_the_notebook_makes(nb, profile):
    P_ = C.notebook_params(profile, only=[nb])[1][nb]
    variants = [P_]
    if nb == "07_other_models":
        variants = [{**P_, "OTHER_MODELS": [e]} for e in P_["OTHER_MODELS"]] + [{**P_, "OTHER_MODELS": []}]
    for V in variants:
        captured = _what_the_notebook_runs(nb, V)
        planned = R.runs(nb, V)
        assert captured, f"{nb} never called S.run"
        assert [c[:3] for c in captured] == [(r.name, [c.hash for c in r.configs], r.cap) for r in planned]
        assert [c[3:] for c in captured] == [(r.model or "gpt-4o-mini", list(r.benchmarks)) for r in planned]


def test_reproduce_stops_at_the_first_notebook_that_hits_max_usd(monkeypatch, capsys, tmp_outputs):
    ran = []

    def execute(src, out, **kw):
        ran.append(Path(src).stem)
        raise pm.PapermillExecutionError(0, 3, "S.run(...)", "BudgetStop", "MAX_USD $1.00 reached: raise MAX_USD", [])

    monkeypatch.setattr(pm, "execute_notebook", execute)
    monkeypatch.setattr(reproduce, "_print_estimate", lambda *a, **k: None)
    # jobs 1: MAX_USD stops LLM runs, whose notebooks always run one at a time (jobs > 1 is refused for them)
    assert reproduce.run("default", ["02_baselines", "03_main_results"], {"jobs": 1}) == 1
    out = capsys.readouterr().out
    assert ran == ["02_baselines"]  # the next notebook would stop at its first paid call: not started
    assert "stopped by MAX_USD" in out and "not started: 03_main_results" in out and "raise MAX_USD" in out


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_the_docs_dollar_figures_are_what_make_estimate_prints(tmp_path, monkeypatch):
    data = os.environ.get("ACEMAD_DATA_DIR")
    if not data or not Path(data).is_dir():
        pytest.skip("ACEMAD_DATA_DIR does not name the benchmark files: the docs quote the estimate made with them")
    monkeypatch.delenv("ACEMAD_MODELS", raising=False)
    monkeypatch.setenv("ACEMAD_SMOKE", "0")  # the docs quote the full profile, not the shrunk one pytest runs under

    def dollars(data_dir: str) -> tuple[int, int]:
        t = C.estimate_profile("paper", data_dir=data_dir).total()
        return round(t.usd), round(t.usd_batch)

    real, demo = dollars(data), dollars(str(tmp_path))  # an empty folder: the demo questions stand in
    text = " ".join((REPO / doc).read_text() for doc in ("README.md", "docs/running.md")).replace("\n", " ")
    quoted = re.findall(r"\$(\d+) synchronous[^$]{0,20}\$(\d+) with the Batch API", text)
    instead = re.findall(r"about \$(\d+) instead of \$(\d+)", text)
    on_demo = re.findall(r"prints about \$(\d+) / \$(\d+)", text)
    assert quoted and instead and on_demo
    assert {(int(s), int(b)) for s, b in quoted} == {real}
    assert {(int(s), int(b)) for b, s in instead} == {real}
    assert {(int(s), int(b)) for s, b in on_demo} == {demo}


def test_the_estimate_prints_each_endpoint_beside_its_price_and_the_wall_time_at_workers():
    ep = profiles.Endpoint("SECOND_MODEL / SECOND_BASE_URL", "gpt-4o-mini", "http://me:secret@h:8000/v1?k=1", ("04",))
    row = C.Row("04_heterogeneity", "gpt-4o-mini", questions=10, calls=14_400, prompt_tokens=1e6, usd=1.0)
    text = C.format_estimate(C.Estimate("p", rows=[row], endpoints=[ep], workers=16), call_seconds=2.0)
    assert "endpoint SECOND_MODEL / SECOND_BASE_URL: gpt-4o-mini at http://h:8000/v1 ($0.15/M input" in text
    assert "secret" not in text and "k=1" not in text
    assert "WORKERS=16 ~0.5 h, WORKERS=64 ~0.1 h" in text  # 14,400 calls x 2 s / 16 in flight = 0.5 h
