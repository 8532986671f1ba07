"""The notebook parameters (experiments/params.py): each notebook's annotated parameters cell is where names, types
and defaults live, read alike by papermill and the package; every value the rules accept builds every notebook's
runs and what the notebooks show; every value they refuse is one line naming the file, the notebook and what is
allowed."""

from __future__ import annotations

import ast
import math
import re

import nbformat
import papermill as pm
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acemad_utils.data.paths import ROOT
from acemad_utils.data.settings import ENV_VARS
from acemad_utils.experiments import params, profiles, theory
from acemad_utils.experiments import registry as R
from acemad_utils.protocol import config

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_declares_its_parameters_in_one_annotated_cell_that_papermill_reads_alike(path):
    cells = [c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1 and cells[0].source.startswith("# Parameters"), "one cell tagged 'parameters'"
    body = ast.parse(cells[0].source).body
    assert all(isinstance(n, ast.AnnAssign) and n.target.id.isupper() for n in body)  # type: ignore[attr-defined]
    seen = pm.inspect_notebook(str(path))  # `NAME: type = default  # meaning`, as papermill reads it
    assert {n: ast.literal_eval(p["default"]) for n, p in seen.items()} == params.defaults(path.stem)
    assert {n: p["inferred_type_name"] for n, p in seen.items()} == {n: params.SCHEMA[n].kind for n in seen}
    meaning = params.meanings()  # one meaning per name, whichever notebook says it
    assert all(p["help"] and p["help"] == meaning[n] for n, p in seen.items())
    assert all(params.problem(n, v) is None for n, v in params.defaults(path.stem).items())
    assert set(seen) - {"PER_MODEL_SUBSETS", "OTHER_MODELS"} <= set(params.RULES), "a rule for every value"


def test_the_notebooks_defaults_are_the_protocol_configs():
    declared = {n: v for nb in params.NOTEBOOKS for n, v in params.defaults(nb).items()}
    assert declared["ETA"] == declared["ETA_PHASE"] == config.ETA == config.DebateConfig().eta
    assert declared["ROUNDS"] == list(config.TABLE2_ROUNDS) == R.PAPER_TABLES["table2_main_results"]["rounds"]
    assert declared["T_PHASE"] == config.ROUNDS == config.DebateConfig().rounds
    assert declared["N_TABLE"] == config.N_AGENTS == config.DebateConfig().n_agents
    assert declared["ARGUE_MAX_TOKENS"] == config.ARGUE_MAX_TOKENS


def test_docs_parameters_md_is_generated_and_lists_every_variable_the_package_names():
    text = (ROOT / "docs" / "parameters.md").read_text()
    assert text == params.markdown(ENV_VARS), "python -m acemad_utils.experiments.profiles --parameters-doc"
    named = set().union(
        *(re.findall(r"\bACEMAD_[A-Z_]+\b", p.read_text()) for p in (ROOT / "acemad_utils").rglob("*.py"))
    )
    assert named <= set(ENV_VARS), sorted(named - set(ENV_VARS))


# ----------------------------------------------------------------------------- values drawn from the schema
MODELS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ._/:-]{0,20}", fullmatch=True)  # names that make a folder name
URLS = st.sampled_from(["", "http://127.0.0.1:8000/v1", "https://h.example/v1"])


def _values(p: params.Param) -> st.SearchStrategy:
    """Every value the schema allows for p (within small bounds where the range is huge)."""
    if p.kind == "list[dict]":  # OTHER_MODELS: entries of distinct tables
        keys = {"table": st.sampled_from(sorted(R.PAPER_TABLES)), "paper_model": MODELS, "model": MODELS,
                "base_url": URLS}  # fmt: skip
        return st.lists(st.fixed_dictionaries(keys), max_size=3, unique_by=lambda e: e["table"])
    if p.choices is not None:
        one = st.sampled_from(p.choices)
    elif p.text:
        one = {
            "model": st.one_of(st.just(""), MODELS),
            "url": URLS,
            "segment": st.from_regex(r"[a-z0-9_][a-z0-9._-]{0,8}", fullmatch=True),
        }[p.text]
    elif p.kind in ("int", "list[int]"):
        one = st.integers(int(p.lo or 0), int(min(p.hi or 20, (p.lo or 0) + 20)))
    elif p.kind in ("float", "list[float]"):
        one = st.floats(p.lo or 0, p.hi, allow_nan=False)
    else:
        one = st.booleans() if p.kind == "bool" else st.text(max_size=12)
    one = st.lists(one, min_size=1, max_size=4, unique=True) if p.kind.startswith("list[") else one
    return st.one_of(st.none(), one) if p.nullable else one


@st.composite
def _notebook_params(draw, nb: str) -> dict:
    return {name: draw(_values(params.SCHEMA[name])) for name in params.names(nb)}


def _shows(nb: str, P: dict, result: R.RunResult) -> None:
    """What each notebook asks its run for before showing it (the selections of its cells)."""
    if nb == "03_main_results":
        result.pick("acemad", rounds=config.ROUNDS, eta=P["ETA"])
        result.config("centralized"), result.config("decentralized", group="control")
        assert result.labels("acemad") == [c.label for c in result.run["acemad"]]
    elif nb == "04_heterogeneity":
        assert result.run["variants"][0].hash == config.DebateConfig(method="acemad", eta=P["ETA"], seed=P["SEED"]).hash
    elif nb == "05_ablation":
        result.config(group="full"), result.config(group="standard")
    elif nb == "06_scaling":
        assert len({c.family for c in result.run.select("acemad")}) == 1
    elif nb == "02_baselines":
        [result.label(m, n_agents=P["N_TABLE"]) for m in R.VOTING_VS_MAD]  # Table 1
    elif nb == "07_other_models" and result.run.name != "full_datasets":
        result.config("acemad", rounds=config.ROUNDS)


@pytest.mark.parametrize("nb", params.NOTEBOOKS[1:])  # every notebook that runs debates
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_accepted_value_builds_the_runs_and_what_the_notebook_shows(nb, data):
    P = data.draw(_notebook_params(nb))
    assert all(params.problem(name, value) is None for name, value in P.items())
    runs = R.runs(nb, P)
    assert len({r.name for r in runs}) == len(runs)  # one folder per run
    for run in runs:
        assert len(set(run.labels())) == len(run.configs)  # one label per config: records never mix
        _shows(nb, P, R.RunResult(run, {}, [{"method": c.label, "status": "ok"} for c in run.configs]))


@settings(max_examples=60, deadline=None)
@given(P=_notebook_params("00_theory"))
def test_every_accepted_theory_value_selects_a_simulated_slice(P):
    assert 5 in theory.PHASE_N and P["ETA_PHASE"] in theory.PHASE_ETA and 1 <= P["T_PHASE"] <= theory.PHASE_T_MAX


# ----------------------------------------------------------------------------- refused values: one line each
WRONG = {"str": 3, "int": True, "float": "two", "bool": "yes", "list[str]": "bbh", "list[int]": [1, "two"],
         "list[float]": [0.5, "x"], "list[dict]": [{"model": "y"}]}  # fmt: skip
UNKNOWN_TABLE = [dict.fromkeys(params.ENTRY_KEYS, "m") | {"table": "t9", "base_url": ""}]


@pytest.mark.parametrize("name", sorted(params.SCHEMA))
def test_every_refused_value_is_one_line_naming_file_notebook_and_range(tmp_path, name):
    p, path, nb = params.SCHEMA[name], tmp_path / "mine.yaml", params.notebooks_of(name)[0]
    listed = p.kind.startswith("list[") and p.kind != "list[dict]"  # (OTHER_MODELS may be empty: no other model)
    one = (lambda v: [v]) if listed else (lambda v: v)
    bad = [WRONG[p.kind], *([] if p.nullable else [None]), *([[]] if listed else [])]
    bad += [one(v) for v in (p.hi + 1, math.nan, math.inf)] if p.lo is not None else []
    bad += [one("nope")] if p.choices is not None else [UNKNOWN_TABLE] if p.kind == "list[dict]" else []
    for value in bad:
        path.write_text(yaml.safe_dump({"profile": "mine", "notebooks": {nb: {name: value}}}))
        with pytest.raises(SystemExit) as e:
            profiles.load_profile(str(path))
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"mine.yaml ({nb}): {name} = "), msg
        assert p.allowed() in msg and "params.py" in msg
