"""Bad input stops before any paid call, with one message naming the bad value and what is allowed (Setup,
DebateConfig, data.load, LLMPopulation, load_profile, reproduce's check of every endpoint a profile calls)."""

from __future__ import annotations

import math
import time

import pytest

from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import APIKeyRejected, EndpointUnreachable, MissingAPIKey
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.local_server import free_port
from acemad_utils.api import configs
from acemad_utils.command import main
from acemad_utils.data import benchmarks as D
from acemad_utils.data import paths as P
from acemad_utils.experiments import profiles
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.reproduce import cli as reproduce
from tests.fake_openai import FakeOpenAI
from tests.test_reproduce import _profile  # a profile file from a dict

KEY = "sk-test-badinput-SECRET-4242"


@pytest.fixture
def no_env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ACEMAD_MODEL"):
        monkeypatch.delenv(var, raising=False)


# ----------------------------------------------------------------------------- benchmark names, backend, source
@pytest.mark.parametrize(
    "kw,line",
    [({"benchmarks": ["arc", "logiqa"]}, "BENCHMARKS = ['arc', 'logiqa'] is not allowed ('arc' is not a choice); "
      "BENCHMARKS takes a non-empty list, each one of ['truthfulqa'"),
     ({"backend": "opnai"}, "BACKEND = 'opnai' is not allowed ('opnai' is not a choice); BACKEND takes one of "
      "['sim', 'local', 'openai']"),
     ({"source": "benchmark"}, "SOURCE = 'benchmark' is not allowed ('benchmark' is not a choice); SOURCE takes one "
      "of ['synthetic', 'benchmarks', 'demo']")],
)  # fmt: skip
def test_a_bad_benchmark_backend_or_source_is_one_line_before_the_endpoint_is_touched(no_env, kw, line):
    with pytest.raises(ValueError) as e:
        Setup(**kw)
    assert str(e.value).startswith(line) and "\n" not in str(e.value)
    with FakeOpenAI() as srv:
        with pytest.raises(ValueError, match="BENCHMARKS"):
            Setup(backend="openai", base_url=srv.url, model="m", benchmarks=["medqa", "bogus"])
        assert srv.count == 0 and srv.auth == set()  # not even the free pre-flight
    with pytest.raises(ValueError, match=r"unknown benchmark 'mmlu'; allowed: .*mmlu_pro.*demo"):
        D.load("mmlu")


# ----------------------------------------------------------------------------- N, T, eta, k
@pytest.mark.parametrize(
    "kw,named,allowed",
    [({"n_agents": -3}, "n_agents=-3", "N >= 1"), ({"n_agents": 2.5}, "n_agents=2.5", "integer N >= 1"),
     ({"rounds": -1}, "rounds=-1", "T >= 1"), ({"eta": math.inf}, "eta=inf", "0 <= eta <= 1000"),
     ({"eta": math.nan}, "eta=nan", "0 <= eta <= 1000"), ({"eta": 1e308}, "eta=1e+308", "0 <= eta <= 1000"),
     ({"seed": "abc"}, "seed='abc'", "integer >= 0"), ({"method": "acemd"}, "method='acemd'", "choose one of"),
     ({"weight_exponent": -1.0}, "weight_exponent=-1.0", "exponent >= 0")],
)  # fmt: skip
def test_debate_config_names_the_bad_value_and_what_is_allowed(kw, named, allowed):
    for build in (lambda: DebateConfig(**kw), lambda: DebateConfig.from_dict(dict(kw))):
        with pytest.raises(ValueError) as e:
            build()
        msg = str(e.value)
        assert msg.startswith("DebateConfig: ") and named in msg and allowed in msg and "\n" not in msg


@pytest.mark.parametrize(
    "methods,line",
    [("acemad,bogus", "unknown method 'bogus'; choose from single, majority, "),
     (["acemd", "acemad", "Majority"], "unknown methods 'acemd', 'Majority'; choose from single, "),
     (" , ", "no method; choose from single, ")],
)  # fmt: skip
def test_the_api_and_the_command_name_each_unknown_method_and_the_choices(methods, line, tmp_path, capsys):
    with pytest.raises(ValueError) as e:
        configs(methods)
    assert str(e.value).startswith(line) and "acemad, self_consistency" in str(e.value)
    src = tmp_path / "q.jsonl"
    src.write_text('{"question": "2 + 2?", "options": ["3", "4"], "answer": "B"}\n')
    joined = methods if isinstance(methods, str) else ",".join(methods)
    assert main(["run", str(src), "--synthetic", "--methods", joined, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {e.value}"
    assert not (tmp_path / "out").exists()  # nothing ran


# ----------------------------------------------------------------------------- data directory
def test_a_missing_data_dir_is_named_and_stops_a_setup_before_any_chat_call(tmp_outputs, tmp_path, monkeypatch, no_env):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(D.DataError) as e:
        D.load("arc_challenge", data_dir=missing)
    assert f"data_dir={str(missing)!r} is not a directory" in str(e.value) and D.ENV_VAR in str(e.value)
    with pytest.raises(D.DataError, match=r"logiqa/Test.txt not found: the data directory must follow the layout"):
        D.load("logiqa", data_dir=tmp_path)
    monkeypatch.setenv(D.ENV_VAR, str(tmp_path / "gone"))
    with pytest.raises(D.DataError, match=r"ACEMAD_DATA_DIR='.*gone' is not a directory"):
        D.load("truthfulqa")
    with FakeOpenAI() as srv:
        S = Setup(backend="openai", source="benchmarks", benchmarks=["arc_challenge"], model="m", base_url=srv.url)
        with pytest.raises(D.DataError, match="ACEMAD_DATA_DIR"):
            S.run("x", [DebateConfig(method="majority", n_agents=2)], n_max=2)
        assert srv.count == 0  # the pre-flight GET is free; no completion was asked for
        S.close()


# ----------------------------------------------------------------------------- key and endpoint
def test_a_missing_key_or_an_unreachable_base_url_stops_setup_and_population(no_env, monkeypatch):
    for build in (lambda: Setup(backend="openai"), lambda: LLMPopulation()):
        with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY.*local"):
            build()
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for build in (lambda: LLMPopulation(model="m", base_url=url),
                  lambda: Setup(backend="openai", model="m", base_url=url, source="demo")):  # fmt: skip
        with pytest.raises(EndpointUnreachable) as e:
            build()
        assert url in str(e.value) and "OpenAI-compatible" in str(e.value) and KEY not in str(e.value)
    monkeypatch.setenv("OPENAI_BASE_URL", url)  # the same through the environment
    with pytest.raises(EndpointUnreachable, match=url):
        LLMPopulation(model="m")
    LLMPopulation(model="m", preflight=False)  # opting out: nothing is contacted


@pytest.mark.parametrize("status", [200, 404, 401, 403])
def test_the_preflight_is_free_accepts_a_server_without_models_and_stops_a_rejected_key(status):
    with FakeOpenAI(models_status=status) as srv:
        if status < 400 or status == 404:  # reachable is enough
            LLMPopulation(model="m", base_url=srv.url, api_key=KEY)
            assert f"Bearer {KEY}" in srv.auth
        else:
            with pytest.raises(APIKeyRejected) as e:
                LLMPopulation(model="m", base_url=srv.url, api_key=KEY)
            assert str(status) in str(e.value) and "OPENAI_API_KEY" in str(e.value) and KEY not in str(e.value)
        assert srv.count == 0  # one GET /models, no completion


def test_base_url_credentials_are_not_echoed():
    port = free_port()
    with pytest.raises(EndpointUnreachable) as e:
        LLMPopulation(model="m", base_url=f"http://user:hunter2@127.0.0.1:{port}/v1?token=abc")
    assert "hunter2" not in str(e.value) and "token=abc" not in str(e.value) and f"127.0.0.1:{port}/v1" in str(e.value)


# ----------------------------------------------------------------------------- profile files
@pytest.mark.parametrize(
    "body,expected",
    [
        ({"profile": "mine", "comon": {"BACKEND": "sim"}},
         "mine.yaml: unknown key(s) 'comon' (did you mean 'common'?); allowed: ['calls_via', 'common', "
         "'description', 'jobs', 'max_usd', 'models', 'notebooks', 'profile']"),
        ({"common": {"BACKEDN": "sim"}}, "mine.yaml: common parameter 'BACKEDN' (did you mean 'BACKEND'?) is not a "
         "parameter of any notebook; notebook parameters are ["),
        ({"notebooks": {"03_main_results": {"N_MAXX": 3}}}, "mine.yaml: notebook 03_main_results has no parameter "
         "'N_MAXX' (did you mean 'N_MAX'?); its parameters are ["),
        ({"notebooks": {"03_main_result": {"N_MAX": 3}}},
         "mine.yaml: unknown notebook '03_main_result' (did you mean '03_main_results'?); notebooks: ["),
    ],
)  # fmt: skip
def test_profile_typos_stop_before_anything_runs(tmp_path, body, expected):
    with pytest.raises(SystemExit) as e:
        profiles.load_profile(_profile(tmp_path, body))
    assert str(e.value).startswith(expected), str(e.value)
    with pytest.raises(SystemExit, match=r"profile 'defualt' \(did you mean 'default'\?\) not found; available"):
        profiles.load_profile("defualt")
    assert all(profiles.load_profile(name)["profile"] == name for name in ("default", "local", "paper"))


# ----------------------------------------------------------------------------- every endpoint of a profile, first
def _reproduce(tmp_path, monkeypatch, common: dict, notebooks: dict | None = None, only=("03_main_results",)) -> list:
    """reproduce.run of a profile with these parameters; returns the notebooks it started (none are executed)."""
    path = _profile(tmp_path, {"profile": "mine", "common": common, "notebooks": notebooks or {}})
    started: list = []
    monkeypatch.setattr(reproduce, "_print_estimate", lambda *a, **k: None)
    monkeypatch.setattr(reproduce, "_run_notebooks", lambda prof, name, nbs, sel, **k: started.extend(sel) or 0)
    reproduce.run(path, list(only), force=True)
    return started


def test_a_second_endpoint_down_stops_the_run_before_any_notebook(tmp_path, monkeypatch, keyed_outputs):
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with FakeOpenAI() as srv:  # lists "fake" only: the model check would send its one-token request
        common = {"BACKEND": "openai", "MODEL": "main", "BASE_URL": srv.url}
        notebooks = {"04_heterogeneity": {"SECOND_MODEL": "b", "SECOND_BASE_URL": dead},
                     "07_other_models": {"OTHER_MODELS": []}}  # fmt: skip
        t0 = time.monotonic()
        with pytest.raises(SystemExit) as e:
            _reproduce(tmp_path, monkeypatch, common, notebooks, only=["03_main_results", *notebooks])
        assert time.monotonic() - t0 < 30 and srv.count == 0  # not even the model check's one-token request
    (line,) = str(e.value).splitlines()
    assert "SECOND_MODEL / SECOND_BASE_URL" in line and dead in line and "cannot reach" in line
    assert "--set SECOND_MODEL=" in line  # the way to run without it


def test_a_rerun_with_every_notebook_up_to_date_checks_no_endpoint(tmp_path, monkeypatch, keyed_outputs, capsys):
    with FakeOpenAI() as srv:  # up for the first run only
        common = {"BACKEND": "openai", "MODEL": "fake", "BASE_URL": srv.url}
        assert _reproduce(tmp_path, monkeypatch, common) == ["03_main_results"]
    path, started = _profile(tmp_path, {"profile": "mine", "common": common}), []
    monkeypatch.setattr(reproduce, "_run_notebooks", lambda prof, name, nbs, sel, **k: started.extend(sel) or 0)
    assert reproduce.run(path, ["03_main_results"]) == 0 and started == []  # the endpoint is down: not asked
    assert "03_main_results  up to date" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="cannot reach"):  # what runs is still checked first
        reproduce.run(path, ["03_main_results"], force=True)
    # unless the response cache holds the model's replies: it may answer the whole run (a call it cannot stops there)
    ResponseCache(P.outputs("cache") / "llm.sqlite").put("k", {"text": "x"}, model="fake", kind="openai")
    assert reproduce.run(path, ["03_main_results"], force=True) == 0 and started == ["03_main_results"]
    assert capsys.readouterr().out.count("cannot reach") == 1  # one line, with what happens next


def test_benchmark_data_that_is_not_there_stops_the_run_before_any_notebook_or_endpoint(
    tmp_path, monkeypatch, keyed_outputs
):
    monkeypatch.delenv(D.ENV_VAR, raising=False)
    monkeypatch.setattr(D, "_hub_available", lambda: False)  # no data directory, no `datasets`
    with FakeOpenAI() as srv:
        common = {"BACKEND": "openai", "MODEL": "main", "BASE_URL": srv.url, "SOURCE": "benchmarks"}
        with pytest.raises(SystemExit) as e:
            _reproduce(tmp_path, monkeypatch, common)
        assert srv.count == 0
    (line,) = str(e.value).splitlines()
    assert line.startswith("[mine] not started: SOURCE=benchmarks: no benchmark data available: set ACEMAD_DATA_DIR")
    assert line.endswith("or --set SOURCE=demo (the 24 demo questions)")
    monkeypatch.delenv("OPENAI_API_KEY")  # a second problem: one try names both, each on its line
    with pytest.raises(SystemExit) as e:
        _reproduce(tmp_path, monkeypatch, {"BACKEND": "openai", "MODEL": "main", "SOURCE": "benchmarks"})
    data, key = str(e.value).splitlines()
    assert data == line and key.startswith("[mine] not started: MODEL / BASE_URL") and "OPENAI_API_KEY" in key
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert _reproduce(tmp_path, monkeypatch, {**common, "BACKEND": "sim", "SOURCE": "demo"}) == ["03_main_results"]


def test_a_missing_key_or_a_model_not_served_stops_the_run(tmp_path, monkeypatch, keyed_outputs):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(SystemExit, match=r"MODEL / BASE_URL \(gpt-4o-mini at https://api.openai.com.*OPENAI_API_KEY"):
        _reproduce(tmp_path, monkeypatch, {"BACKEND": "openai"})
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(models=["served-model"]) as srv:
        with pytest.raises(SystemExit, match="does not serve the model 'typo-model'.*lists served-model"):
            _reproduce(tmp_path, monkeypatch, {"BACKEND": "openai", "MODEL": "typo-model", "BASE_URL": srv.url})
        assert srv.count == 0 and srv.unserved == ["typo-model"]


def test_a_server_that_lists_another_name_but_answers_passes(tmp_path, monkeypatch, keyed_outputs):
    """A llama.cpp server lists its file's name and answers any model name: one one-token request says so."""
    with FakeOpenAI() as srv:  # lists "fake", answers anything
        started = _reproduce(tmp_path, monkeypatch, {"BACKEND": "openai", "MODEL": "mine", "BASE_URL": srv.url})
        assert [b["max_tokens"] for b in srv.requests] == [1]
    assert started == ["03_main_results"]


def test_the_paper_profile_names_every_endpoint_and_runs_with_one():
    eps = profiles.endpoints(profiles.notebook_params("paper")[1])
    settings = " ".join(e.setting for e in eps)
    assert "MODEL / BASE_URL" in settings and "SECOND_MODEL / SECOND_BASE_URL" in settings
    assert all(f"OTHER_MODELS[{i}]" in settings for i in range(3))
    assert {e.url for e in eps} >= {"http://localhost:8000/v1", "http://localhost:4000/v1"}
    one = profiles.endpoints(profiles.notebook_params("paper", {"SECOND_MODEL": "", "OTHER_MODELS": []})[1])
    assert [(e.setting, e.model) for e in one] == [("MODEL / BASE_URL", "gpt-4o-mini")]


def test_batch_mode_against_an_endpoint_without_the_batch_api_stops_the_run(tmp_path, monkeypatch, keyed_outputs):
    monkeypatch.setenv("ACEMAD_CALLS_VIA", "batch")
    with FakeOpenAI(models=["main"], batch_api=False) as srv:
        common = {"BACKEND": "openai", "MODEL": "main", "BASE_URL": srv.url}
        with pytest.raises(SystemExit, match="MODEL / BASE_URL .* no Batch API .*CALLS_VIA=files"):
            _reproduce(tmp_path, monkeypatch, common)
        assert srv.count == 0


def test_another_models_subsets_that_are_not_there_stop_the_run_before_it_pays(tmp_path, monkeypatch, keyed_outputs):
    """--set MODEL on a profile whose SUBSET_MODEL is another model: notebook 01 builds MODEL's subsets, so notebooks
    02-07 would fail after 01 paid for its screening; the run stops first, naming the two ways out."""
    with FakeOpenAI() as srv:
        common = {"BACKEND": "openai", "MODEL": "fake", "SUBSET_MODEL": "gpt-4o-mini", "BASE_URL": srv.url}
        with pytest.raises(SystemExit) as e:
            _reproduce(tmp_path, monkeypatch, common, only=["01_subset_construction", "03_main_results"])
        assert srv.count == 0
        (line,) = str(e.value).splitlines()
        assert "03_main_results reads the challenging subsets of SUBSET_MODEL 'gpt-4o-mini'" in line
        assert "--set SUBSET_MODEL=''" in line
        # the same model builds them in this run: nothing to stop
        assert _reproduce(tmp_path, monkeypatch, {**common, "SUBSET_MODEL": "fake"}) == ["03_main_results"]
