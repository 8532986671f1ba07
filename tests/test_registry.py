"""The registry of the paper's experiments: what each notebook runs, as data (tests/test_cost.py checks it
against the notebooks' own code)."""

from __future__ import annotations

import re

import nbformat
import pytest

from acemad_utils import notebook
from acemad_utils.data.paths import ROOT
from acemad_utils.experiments import params, profiles
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig, at_paper_eta
from acemad_utils.report import figures


def test_groups_keep_the_run_order_and_the_labels():
    X = R.main_results([2, 3, 5], 2.0, seed=0)
    assert X.name == "main" and list(X.groups) == ["baselines", "control", "acemad", "matched"]
    assert X.labels("acemad") == ["AceMAD (T=2)", "AceMAD (T=3)", "AceMAD (T=5)"]
    assert X.labels() == [c.label for c in X.configs] and len(X.configs) == 12  # 5 baselines, 3 controls, 3 T, SC
    assert X.labels("matched") == ["Self-consistency (15 samples; ours, not the paper's)"]
    assert X["control"][0].roster == "acemad" and X["control"][0].method == "decentralized"
    # rounds without the paper's T still run it: the aggregators' table, the examples and the summary read T = 3
    assert R.main_results([2, 5], 2.0).labels("acemad") == ["AceMAD (T=2)", "AceMAD (T=3)", "AceMAD (T=5)"]
    assert R.main_results([5, 3, 5], 1.0).labels("acemad") == ["AceMAD (T=3, eta=1)", "AceMAD (T=5, eta=1)"]


def test_baselines_grid_skips_a_star_without_debaters_and_heterogeneity_has_a_variant_per_truth_holder():
    X = R.baselines([1, 2, 3], 5, seed=0)
    assert [c.n_agents for c in X["centralized"]] == [2, 3, 5]
    assert [c.n_agents for c in X["majority"]] == [1, 2, 3, 5]
    assert {c.hash for c in X.configs if c.n_agents == 5} == {DebateConfig(method=m).hash for m in R.VOTING_VS_MAD}
    X = R.heterogeneity("", seed=0)
    assert len(X["variants"]) == 2
    assert X["variants"][0].hash == DebateConfig(method="acemad", rounds=3).hash
    Y = R.heterogeneity("m2", "http://127.0.0.1:9/v1")
    assert Y["variants"][-1].truth_holder.model == "m2" and Y["variants"][-1].truth_holder.base_url


def test_runs_fill_in_benchmarks_caps_and_models():
    P = {
        "SEED": 0,
        "ETA": 2.0,
        "N_MAX": 7,
        "BENCHMARKS": ["bbh", "medqa"],
        "FULL_N_MAX": 11,
        "FULL_BENCHMARKS": ["logiqa"],
        "OTHER_MODELS": [{"table": "table5_llama8b", "paper_model": "L", "model": "org/L", "base_url": ""}],
    }
    other, full = R.runs("07_other_models", P)
    assert other.benchmarks == ["medqa", "bbh"] and other.cap == 7 and other.model == "org/L"
    assert other.name == "other_org-L_table5_llama8b" and other.base_url is None
    assert (full.on, full.benchmarks, full.cap, full.model) == ("input", ["logiqa"], 11, None)
    [sub] = R.runs("01_subset_construction", P)
    assert (sub.on, sub.cap, sub.benchmarks) == ("input", None, ["bbh", "medqa"])
    assert R.runs("00_theory", P) == []


@pytest.mark.parametrize("profile", ["default", "local", "paper"])
def test_every_profile_lists_its_runs(profile):
    text = profiles.describe(profile)
    for nb in ("01_subset_construction", "02_baselines", "06_scaling", "07_other_models"):
        assert nb in text
    assert "full_datasets" in text


def test_setup_from_params_reads_the_notebook_parameters_and_smoke_caps_inside(monkeypatch):
    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    S = Setup.from_params(
        {"PROFILE": "t", "BENCHMARKS": ["bbh"], "N_ITEMS": 600, "SEED": 3, "OTHER": 1}, benchmarks=["logiqa"]
    )
    assert (S.profile, S.benchmarks, S.seed, S.n_items) == ("t", ["logiqa"], 3, 60)
    assert len(S.full_questions(["logiqa", "bbh"], 300)) == 2 * 12
    monkeypatch.setenv("ACEMAD_SMOKE", "0")
    assert Setup.from_params({"N_ITEMS": None}).n_items is None
    with pytest.raises(ValueError, match=r"ROUNDS = \[0\] is not allowed \(0 is out of range\); ROUNDS takes"):
        Setup.from_params({"ROUNDS": [0]})  # a parameters cell edited by hand: checked as a profile's value


# ----------------------------------------------------------------------------- notebooks ask the run (RunResult)
def _result(run: R.Run) -> R.RunResult:
    return R.RunResult(run, {"experiment": run.name}, [{"method": c.label, "status": "ok"} for c in run.configs])


def test_a_result_picks_one_configs_records_and_names_what_was_run_otherwise():
    res = _result(R.main_results([2, 5], 2.0, seed=0))
    meta, records = res  # unpacks as Setup.run's (meta, records) always did
    assert meta == {"experiment": "main"} and records is res.records
    assert [r["method"] for r in res.pick("acemad", rounds=3)] == ["AceMAD (T=3)"]
    assert res.label("decentralized", roster="acemad") == "Decentralized MAD (AceMAD roster)"
    assert res.config("decentralized", group="baselines").label == "Decentralized MAD"
    assert res.config("AceMAD (T=5)").rounds == 5  # a display label picks too
    with pytest.raises(ValueError) as e:
        res.pick("acemad", rounds=4)
    msg = str(e.value)
    assert "no config matches 'acemad', rounds=4" in msg and "acemad: AceMAD (T=2), AceMAD (T=3), AceMAD (T=5)" in msg
    with pytest.raises(ValueError, match=r"2 configs \(Decentralized MAD, Decentralized MAD \(AceMAD roster\)\)"):
        res.config("decentralized")
    with pytest.raises(ValueError, match="no field"):
        res.pick("acemad", round=3)
    with pytest.raises(ValueError, match="no group 'variants'"):
        res.pick(group="variants")
    scaling = _result(R.scaling([1, 3, 7]))
    assert scaling.family("acemad") == "AceMAD (T=3)"
    assert scaling.label("majority", n_agents=7) == "Majority Voting (N=7)"
    with pytest.raises(ValueError, match="no config matches 'sparse'"):
        scaling.family("sparse")


def test_setup_run_of_a_registry_run_returns_its_result(smoke_outputs):
    S = Setup(profile="t", benchmarks=["bbh"], n_items=30)
    res = S.run(R.main_results([2, 5], 2.0), n_max=3)
    assert isinstance(res, R.RunResult) and res.meta["experiment"] == "t/main"
    ace3 = res.pick("acemad", rounds=3)
    assert len(ace3) == 3 and all(r["status"] == "ok" for r in ace3)
    meta, records = S.run("again", [DebateConfig(method="majority")], 2)  # the name-and-configs form still works
    assert {r["method"] for r in records} == {"Majority Voting"} and len(records) == 2
    with pytest.raises(TypeError, match="brings its own configs"):
        S.run(R.ablation(), [DebateConfig()])


# ----------------------------------------------------------------------------- the notebooks' setup call
def test_start_takes_exactly_the_notebooks_setup_parameters_by_name(monkeypatch):
    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    given = {n: v for n, v in params.defaults("02_baselines").items() if n in params.SETUP_NAMES}
    S, src = notebook.start("02_baselines", **{**given, "PROFILE": "t", "SEED": 3})
    assert (S.profile, S.seed) == ("t", 3) and src == figures.source_label(S.synthetic, S.model)
    with pytest.raises(ValueError, match=r"pass \['SUBSET_MODEL'\]"):
        notebook.start("02_baselines", **{k: v for k, v in given.items() if k != "SUBSET_MODEL"})
    with pytest.raises(ValueError, match=r"\['N_MAX'\] are not among them"):
        notebook.start("02_baselines", **given, N_MAX=3)
    with pytest.raises(ValueError, match="SEED = -1 is not allowed"):
        notebook.start("02_baselines", **{**given, "SEED": -1})
    with pytest.raises(ValueError, match="no such notebook"):
        notebook.start("2_baselines", **given)


@pytest.mark.parametrize("nb", params.NOTEBOOKS)  # every notebook asks its run
def test_a_rewritten_notebook_asks_the_run_and_shows_its_names(nb):
    code = "\n".join(
        c.source
        for c in nbformat.read(ROOT / "notebooks" / f"{nb}.ipynb", as_version=4).cells
        if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])
    )
    for banned in ("globals()", "DebateConfig", ".label for"):  # no label rebuilt, no magic
        assert banned not in code, f"{nb}: {banned!r} in a code cell"
    assert not re.search(r"^\s*(from|import) .* as ", code, re.M), f"{nb}: an import alias"
    assert not re.search(r"(?<![\w.])(F|R|TB|A|N|V|S|X|C)\.\w", code), f"{nb}: a one-letter alias"


def test_notebook_04s_different_persona_is_notebook_03s_acemad_and_its_rosters_say_so():
    """Table 3's 'Different Persona' row is the main AceMAD (T = 3): the same config hash, so its run is shared."""
    het = R.heterogeneity("model-b", seed=4)
    main = R.main_results([3], 2.0, seed=4)
    assert het["variants"][0].hash == main.config("acemad", group="acemad", rounds=3).hash
    lines = R.rosters(het, "variants").splitlines()
    assert len(lines) == 3 and lines[-1].startswith("AceMAD (Different LLMs): ") and "on model-b" in lines[-1]


def test_eta_reaches_every_acemad_run_of_every_notebook():
    """`--set ETA=4` changes every AceMAD run the notebooks make (Tables 2-6, Figures 4-5, the map), so the
    ledger never mixes eta values; the baselines, which have no weights, are unchanged."""
    seen = set()
    for nb in params.NOTEBOOKS:
        if "ETA" not in params.defaults(nb):
            continue
        for run in R.runs(nb, {"ETA": 4.0, "SECOND_MODEL": "m2", "OTHER_MODELS": []}):
            for c in run.configs:
                if c.method == "acemad":
                    assert c.eta == 4.0 and "eta=4" in c.label, (nb, c.label)  # a table row says it, Table 3's too
                    seen.add(nb[:2])
    assert {"03", "04", "05", "06", "07", "09"} <= seen
    assert "ETA" in params.defaults("08_claims")  # notebook 08's grid reruns 02-06 at the profile's eta
    grid = [c for r in R.ledger_runs(R.LEDGER_GRID[0], 0, 10, ["bbh"], eta=4.0) for c in r.configs]
    assert {c.eta for c in grid if c.method == "acemad"} == {4.0}
    variants = R.heterogeneity("m2", eta=4.0)["variants"]  # the ledger finds Table 3's rows by their paper-eta labels
    assert [at_paper_eta(c.label) for c in variants] == R.heterogeneity("m2").labels("variants")


def test_the_ledger_grid_keeps_the_points_the_population_can_express():
    grid = (
        R.LedgerPoint("equal stubbornness", "", {"insight_susceptibility": 0.3}),
        R.LedgerPoint("no such field", "", {"not_a_simparams_field": 1.0}),
        R.LedgerPoint("K = 3", "", {}, ("bbh",)),
    )
    assert [p.name for p in R.ledger_points(["bbh", "arc_challenge"], grid)] == ["equal stubbornness", "K = 3"]
    assert [p.name for p in R.ledger_points(["arc_challenge"], grid)] == ["equal stubbornness"]
    runs = R.ledger_runs(grid[0], seed=0, n_max=40, benchmarks=["bbh"])
    assert {r.name.split("__")[1] for r in runs} == {"baselines", "main", "heterogeneity", "ablation", "scaling"}
    assert all(r.name.startswith("map_ledger40_insight_susceptibility0.3__") and r.cap == 40 for r in runs)
    assert all(r.params == {"insight_susceptibility": 0.3} for r in runs)


def test_a_debating_baseline_at_another_t_says_its_t_in_its_label():
    """Tables put 'AceMAD (T=1)' beside the baselines: a baseline not at the paper's T = 3 must say so too."""
    assert DebateConfig(method="decentralized").label == "Decentralized MAD"
    assert [DebateConfig(method=m, rounds=1).label for m in ("decentralized", "sparse", "centralized")] == [
        "Decentralized MAD (T=1)", "Sparse MAD (T=1)", "Centralized MAD (T=1)"]  # fmt: skip
    assert DebateConfig(method="majority", rounds=1).label == "Majority Voting"  # no rounds to speak of
