"""The pilot: priced before any call, refuses an unpriced model, tells an endpoint whose agents carry AceMAD's premise
from one whose agents do not, and the full run pays none of its calls again (counted at the fake server)."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from acemad_utils import api
from acemad_utils.agents.sim import make_items
from acemad_utils.command import main
from acemad_utils.data import benchmarks as D
from acemad_utils.experiments.profiles import notebook_params
from acemad_utils.experiments.setup import Setup
from acemad_utils.pilot import pilot_configs, report
from acemad_utils.report import premise as PR
from tests.fake_openai import FakeOpenAI, FaultInjector, PremiseAgents, Refusing, Reply


def question_file(tmp_path: Path, n: int = 8) -> Path:
    rows = [{"id": f"{b}{i}", "benchmark": b, "question": f"Question {b} {i}: which holds?", "answer": "A",
             "options": ["true", "false", "maybe", "never"]} for b in ("alpha", "beta") for i in range(n)]  # fmt: skip
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "mine.jsonl"


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-pilot")
    for k in ("ACEMAD_MAX_USD", "ACEMAD_SMOKE"):
        monkeypatch.delenv(k, raising=False)
    return tmp_path


@pytest.mark.parametrize("model,cap,says,plan", [
    ("no-such-model", None, "no estimate can be shown", "estimate unpriced"),
    ("gpt-4o-mini", "0.001", "over the $0.00 budget", "estimate $"),
])  # fmt: skip
def test_the_pilot_refuses_an_unpriced_model_or_a_sample_over_its_budget(fake_server, cwd, capsys, monkeypatch, model,
                                                                         cap, says, plan):  # fmt: skip
    if cap:
        monkeypatch.setenv("ACEMAD_MAX_USD", cap)  # below the default $5: the cap wins
    assert main(["pilot", str(question_file(cwd)), "--model", model, "--base-url", fake_server.url]) == 2
    assert fake_server.count == 0
    out, err = capsys.readouterr()
    assert says in err and f"; {plan}" in out  # an unpriced model's plan is never "$0.00"


def test_a_pilot_on_a_small_file_plans_all_of_it_not_what_the_budget_would_buy(cwd, capsys):
    path, who = question_file(cwd), ["--model", "gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1", "--dry-run"]
    assert main(["pilot", str(path), *who]) == 0
    assert "on all 16 of its answered questions (2 benchmark(s))" in capsys.readouterr().out
    assert main(["pilot", str(path), *who, "--per-benchmark", "3"]) == 0
    assert "on 6 of its 16 answered questions (3 per benchmark, 2 benchmark(s))" in capsys.readouterr().out


def test_the_pilot_plans_to_most_of_its_budget_so_the_cap_does_not_stop_it_before_its_report(cwd, capsys):
    """The estimate runs a few % low and calls in flight hold their dearest cost: k is the most 80% of it buys."""
    who = ["--model", "gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1", "--dry-run", "--usd", "0.5"]
    assert main(["pilot", str(question_file(cwd, n=100)), *who]) == 0
    out = capsys.readouterr().out
    k, est, budget = re.search(
        r"\((\d+) per benchmark.*estimate \$([\d.]+) .*budget \$([\d.]+) \(planned to 80% of", out
    ).groups()
    assert float(est) <= 0.8 * float(budget) and 2 < int(k) < 100, out


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
@pytest.mark.parametrize("premise", [True, False])
def test_the_pilot_tells_the_premise_apart_and_the_full_run_pays_none_of_its_calls_again(cwd, capsys, premise):
    path = question_file(cwd)
    who = ["--model", "gpt-4o-mini", "--per-benchmark", "6"]  # 12: enough to judge the premise
    full = ["run", str(path), "--methods", "acemad,self_consistency", "--model", "gpt-4o-mini", "--out"]
    with FakeOpenAI(PremiseAgents(holds=premise)) as srv:
        assert main(["pilot", str(path), *who, "--base-url", srv.url]) == 0
        pilot_calls = srv.count
        out = capsys.readouterr().out
        [replay] = re.findall(r"`([^`]*-m acemad_utils run [^`]*)` \(add methods", out)  # the command it names
        python, _, _, *argv = shlex.split(replay)
        assert Path(python).resolve() == Path(sys.executable).resolve()
        assert main(argv) == 0
        after_pilot = srv.count - pilot_calls
    with FakeOpenAI(PremiseAgents(holds=premise)) as fresh:
        assert main([*full, "fresh_runs", "--base-url", fresh.url]) == 0
    assert "estimate $" in out and "parse failures: 0.0%" in out and "correlation rho" in out and "NaN" not in out
    assert re.search(r"paid: (about \$[\d.]+|under \$0\.01) of MAX_USD \$5\.00", out)  # the default budget
    assert re.search(r"tokens sent and received: AceMAD [\d,]+, Self-consistency.*matched in calls, not in tokens", out)
    assert pilot_calls > 0 and after_pilot == fresh.count - pilot_calls  # the pilot's calls came from the cache
    [kept] = (cwd / "acemad_runs" / "tables" / "pilot").glob("*.txt")  # the report is kept, not only printed
    assert "premise check" in kept.read_text() and f"(this report: {kept})" in out
    holds = "the premise (the agent whose peer prediction scores best knows more than a random agent) holds" in out
    assert holds == premise and ("STOP: the premise fails on this model" in out) != premise


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_a_profile_pilot_is_priced_then_reused_by_the_subsets_and_the_main_run(tmp_outputs, monkeypatch, capsys):
    """The paper profile on the demo questions: no subsets yet, so the pilot screens input items with notebook 01's
    agent; building the subsets and running notebook 03's AceMAD and self-consistency afterwards pay only the rest."""
    for k in ("OPENAI_API_KEY", "ACEMAD_MAX_USD", "ACEMAD_SMOKE", "ACEMAD_DATA_DIR"):  # the plan needs no key
        monkeypatch.delenv(k, raising=False)

    def full_run(url: str) -> None:
        _, params = notebook_params("paper", {"SOURCE": "demo", "BASE_URL": url})
        P = {**params["03_main_results"], "PROFILE": "paper"}
        S = Setup.from_params(P)
        S.build_subsets(progress=False)
        S.run("main", pilot_configs(P))
        S.close()

    with FakeOpenAI(FaultInjector(rate=0.0)) as srv:
        args = ["pilot", "--profile", "paper", "--set", "SOURCE=demo", "--set", f"BASE_URL={srv.url}"]
        assert main([*args, "--per-benchmark", "2", "--dry-run"]) == 0 and srv.count == 0
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-pilot")
        assert main([*args, "--per-benchmark", "2"]) == 0
        pilot_calls = srv.count
        full_run(srv.url)
        after_pilot = srv.count - pilot_calls
        out = capsys.readouterr().out
        before = srv.count  # the subsets are built now: a second pilot samples them, every call already paid
        assert main([*args, "--per-benchmark", "2"]) == 0 and srv.count == before
    assert "estimate $" in out and "questions needed for 80% power" in out and "pilot questions" in out
    assert "paid: " in out and "of MAX_USD $5.00" in out
    assert "per benchmark of their challenging subsets" in capsys.readouterr().out
    monkeypatch.setenv("ACEMAD_ROOT", str(tmp_outputs / "fresh"))
    with FakeOpenAI(FaultInjector(rate=0.0)) as fresh:
        full_run(fresh.url)
    assert pilot_calls > 0 and after_pilot == fresh.count - pilot_calls


@pytest.mark.parametrize("argv, says", [
    (["--profile", "nope"], "error: profile 'nope' not found; available profiles: ['default', 'local', 'paper']"),
    ([], "error: pilot: give a question file or --profile NAME"),
    (["mine.jsonl", "--profile", "paper"], "error: pilot: give a question file or --profile NAME, not both"),
    (["mine.jsonl", "--model", "m", "--usd", "nan", "--dry-run"], "error: --usd nan: need a number of dollars >= 0"),
])  # fmt: skip
def test_a_bad_pilot_option_is_one_error_line_and_exit_2(cwd, capsys, argv, says):
    question_file(cwd)
    assert main(["pilot", *argv]) == 2
    assert capsys.readouterr().err.strip() == says


def test_a_profile_pilot_without_benchmark_data_says_so_before_its_plan(cwd, capsys, monkeypatch):
    monkeypatch.delenv(D.ENV_VAR, raising=False)
    monkeypatch.setattr(D, "_hub_available", lambda: False)
    assert main(["pilot", "--profile", "paper", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: no benchmark data available: set ACEMAD_DATA_DIR") and "estimate" not in out


def test_a_small_source_pilot_plans_what_it_has_and_a_synthetic_profile_has_none(full_outputs, capsys):
    assert main(["pilot", "--profile", "paper", "--set", "SOURCE=demo", "--dry-run"]) == 0  # 24 demo questions
    n, calls = re.search(r"on about (\d+) questions of .*, all there are; estimate \$[\d.]+ for ([\d,]+) calls",
                         capsys.readouterr().out).groups()  # fmt: skip
    assert 0 < int(n) < 24 and int(calls.replace(",", "")) < 100 * 30  # not 100 questions' AceMAD alone
    assert main(["pilot", "--profile", "default"]) == 2  # a synthetic profile has no pilot
    assert "a pilot is for a model" in capsys.readouterr().err


def test_a_pilot_whose_calls_failed_says_which_and_exits_1(cwd, capsys):
    with FakeOpenAI(Refusing("Question alpha")) as srv:  # every call about benchmark alpha's questions: HTTP 400
        argv = ["pilot", str(question_file(cwd)), "--model", "gpt-4o-mini", "--per-benchmark", "2"]
        assert main([*argv, "--base-url", srv.url]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^4 of 8 records failed \(AceMAD \(T=3\) 2, Self-consistency \(15 samples\) 2\), ", out, re.M)
    assert "context length exceeded" in out and "Rerun the same command to retry them" in out


def test_the_pilots_report_draws_its_intervals_from_the_runs_seed(cwd):
    items = make_items(150, k=4, seed=5)  # enough questions that a percentile moves with the draw
    res = api.run(items, "acemad,self_consistency", synthetic=True, seed=1)
    cfgs = api.configs(["acemad", "self_consistency"], seed=1)
    (zero, _), (one, _) = (report(res.records, cfgs, True, s) for s in (0, 1))
    assert zero != one  # the same records: only the draws differ
    assert PR.premise(res.records, 1).round(3).to_string(index=False) in one


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_questions_on_which_no_agent_differs_stop_the_pilot_without_blaming_the_model(cwd, capsys):
    """Every agent right on every question: nothing for the weights to pick, which says nothing of the premise."""
    with FakeOpenAI(PremiseAgents(holds=True, crowd_right=1.0)) as srv:
        argv = [
            "pilot",
            str(question_file(cwd)),
            "--model",
            "gpt-4o-mini",
            "--per-benchmark",
            "6",
            "--base-url",
            srv.url,
        ]
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "STOP: on these questions the agents were all right or all wrong together" in out
    assert "the premise fails on this model" not in out
    assert "correlation rho undefined" in out  # both methods right everywhere: no correlation to measure


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_the_cost_of_the_run_the_pilot_sizes_is_at_least_what_its_own_questions_cost(cwd, capsys):
    """An endpoint reporting 1,000 prompt and 300 completion tokens a call costs more than the token model says: the
    pilot prices the n it proposes at what its own questions cost (60 calls each: AceMAD's 30, self-consistency's)."""
    inner = PremiseAgents(holds=True)

    def wordy(body, n):
        reply = inner(body, n)
        reply = reply if isinstance(reply, Reply) else Reply(reply)
        return dataclasses.replace(reply, prompt_tokens=1000, completion_tokens=300)

    with FakeOpenAI(wordy) as srv:
        argv = ["pilot", str(question_file(cwd)), "--model", "gpt-4o-mini", "--per-benchmark", "6"]
        assert main([*argv, "--base-url", srv.url]) == 0
    out = capsys.readouterr().out
    n, usd = re.search(r"~([\d,]+) questions would cost about \$([\d,.]+) .*\(at the pilot's own cost per question\)",
                       out).groups()  # fmt: skip
    per_call = (1000 * 0.15 + 300 * 0.6) / 1e6  # gpt-4o-mini's price per 1M tokens
    assert float(usd.replace(",", "")) / int(n.replace(",", "")) == pytest.approx(60 * per_call, rel=0.1)
