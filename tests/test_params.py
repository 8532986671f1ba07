"""The parameter schema (experiments/params.py): the notebooks' cells, the profiles, the registry and the docs read
it; every value it accepts builds every notebook's runs and the selections the notebooks show; every value it
refuses is one line naming the file, the notebook and what is allowed."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import nbformat
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


def _parameters_cell(path: Path) -> str:
    [cell] = [c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", [])]
    return cell.source


def test_the_schema_knows_every_notebook_and_only_those():
    assert [p.stem for p in NOTEBOOKS] == list(params.NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_parameters_cell_holds_the_schemas_names_at_its_defaults(path):
    source = _parameters_cell(path)
    assert source == params.cell_source(path.stem), "rewrite the cell from params.cell_source (see the docstring)"
    values = {
        node.targets[0].id: ast.literal_eval(node.value)  # type: ignore[attr-defined]
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
    }
    assert values == params.defaults(path.stem)


def test_every_default_is_allowed_and_the_papers_constants_are_protocol_configs():
    for nb in params.NOTEBOOKS:
        for name, value in params.defaults(nb).items():
            assert params.problem(name, value) is None, (nb, name, value)
    assert params.SCHEMA["ETA"].default == config.ETA == config.DebateConfig().eta
    assert params.SCHEMA["ROUNDS"].default == list(config.TABLE2_ROUNDS)
    assert params.SCHEMA["T_PHASE"].default == config.ROUNDS == config.DebateConfig().rounds
    assert params.SCHEMA["N_TABLE"].default == config.N_AGENTS == config.DebateConfig().n_agents
    assert R.PAPER_TABLES["table2_main_results"]["rounds"] == list(config.TABLE2_ROUNDS)


def test_no_name_is_a_number_in_one_notebook_and_a_list_in_another():
    # one Param per name, one kind: ROUNDS (03, a list) and THEORY_ROUNDS (00, a number) are two names
    assert params.SCHEMA["ROUNDS"].kind == "list[int]" and params.SCHEMA["ROUNDS"].notebooks == ("03_main_results",)
    assert params.SCHEMA["THEORY_ROUNDS"].kind == "int"
    for p in params.SCHEMA.values():
        assert p.kind in params.KINDS
        assert all(nb in p.notebooks for nb in p.by_notebook)


def test_docs_parameters_md_is_generated_from_the_schema():
    text = (ROOT / "docs" / "parameters.md").read_text()
    regenerate = ".venv/bin/python -m acemad_utils.experiments.profiles --parameters-doc > docs/parameters.md"
    assert text == params.markdown(ENV_VARS), regenerate
    for name in [*params.SCHEMA, *ENV_VARS]:
        assert f"`{name}`" in text


def test_every_acemad_variable_the_package_names_is_listed():
    import re

    named = set()
    for path in (ROOT / "acemad_utils").rglob("*.py"):
        named |= set(re.findall(r"\bACEMAD_[A-Z_]+\b", path.read_text()))
    assert named <= set(ENV_VARS), sorted(named - set(ENV_VARS))


# ----------------------------------------------------------------------------- values drawn from the schema
MODELS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ._/:-]{0,20}", fullmatch=True)  # names that make a folder name


def _values(p: params.Param) -> st.SearchStrategy:
    """Every value the schema allows for p (within small bounds where the range is huge)."""
    if p.kind == "models":
        entry = st.fixed_dictionaries(
            {
                "table": st.sampled_from(sorted(R.PAPER_TABLES)),
                "paper_model": MODELS,
                "model": MODELS,
                "base_url": st.sampled_from(["", "http://127.0.0.1:8000/v1", "https://h.example/v1"]),
            }
        )
        one = st.lists(entry, max_size=3, unique_by=(lambda e: (e["table"], e["paper_model"]), lambda e: e["table"]))
    elif p.model:
        one = st.one_of(st.just(""), MODELS)
    elif p.choices is not None:
        one = st.sampled_from(p.choices)
    elif p.url:
        one = st.sampled_from(["", "http://127.0.0.1:1/v1", "https://example.org/v1"])
    elif p.segment:
        one = st.from_regex(r"[a-z0-9_][a-z0-9._-]{0,8}", fullmatch=True)
    elif p.kind in ("int", "list[int]"):
        one = st.integers(int(p.lo or 0), int(min(p.hi or 20, (p.lo or 0) + 20)))
    elif p.kind in ("float", "list[float]"):
        one = st.floats(p.lo or 0, p.hi, allow_nan=False)
    elif p.kind == "bool":
        one = st.booleans()
    else:
        one = st.text(max_size=12)
    if p.kind.startswith("list["):
        one = st.lists(one, min_size=1, max_size=4, unique=True)
    return st.one_of(st.none(), one) if p.nullable else one


@st.composite
def _notebook_params(draw, nb: str) -> dict:
    return {name: draw(_values(params.SCHEMA[name])) for name in params.names(nb)}


def _shows(nb: str, P: dict, result: R.RunResult) -> None:
    """What each notebook asks its run for before showing it (the selections of its cells)."""
    if nb == "03_main_results":
        result.pick("acemad", rounds=config.ROUNDS, eta=P["ETA"])  # the aggregators, examples and summary
        result.config("centralized")  # Table 2c
        result.config("decentralized", group="control")
        assert result.labels("acemad") == [c.label for c in result.run["acemad"]]
    elif nb == "04_heterogeneity":
        assert result.run["variants"][0].hash == config.DebateConfig(method="acemad", eta=P["ETA"], seed=P["SEED"]).hash
    elif nb == "05_ablation":
        result.config(group="full"), result.config(group="standard")
    elif nb == "06_scaling":
        assert len({c.family for c in result.run.select("acemad")}) == 1
    elif nb == "02_baselines":
        labels = set(result.labels())
        assert {c.label for c in R.voting_vs_mad(P["N_TABLE"], P["SEED"])} <= labels  # Table 1
    elif nb == "07_other_models" and result.run.name != "full_datasets":
        result.config("acemad", rounds=config.ROUNDS)


@pytest.mark.parametrize("nb", [nb for nb in params.NOTEBOOKS if nb[:2] in params.SETUP])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_accepted_value_builds_the_runs_and_what_the_notebook_shows(nb, data):
    P = data.draw(_notebook_params(nb))
    for name, value in P.items():
        assert params.problem(name, value) is None, (name, value)
    runs = R.runs(nb, P)
    assert len({r.name for r in runs}) == len(runs)  # one folder per run
    for run in runs:
        records = [{"method": c.label, "status": "ok"} for c in run.configs]
        assert len(set(run.labels())) == len(run.configs)  # one label per config: records never mix
        _shows(nb, P, R.RunResult(run, {}, records))


@settings(max_examples=60, deadline=None)
@given(P=_notebook_params("00_theory"))
def test_every_accepted_theory_value_selects_a_simulated_slice(P):
    # notebook 00's last cells read the phase table at (N=5, T_PHASE, ETA_PHASE): the grid theory simulates
    assert 5 in theory.PHASE_N and P["ETA_PHASE"] in theory.PHASE_ETA and 1 <= P["T_PHASE"] <= theory.PHASE_T_MAX


# ----------------------------------------------------------------------------- refused values: one line each
WRONG = {
    "str": 3,
    "int": "three",
    "float": "two",
    "bool": "yes",
    "list[str]": "bbh",
    "list[int]": [1, "two"],
    "list[float]": [0.5, "x"],
    "models": [{"model": "y"}],
}


@pytest.mark.parametrize("name", sorted(params.SCHEMA))
def test_every_refused_value_is_one_line_naming_file_notebook_and_range(tmp_path, name):
    p = params.SCHEMA[name]
    bad = [WRONG[p.kind]]
    if p.lo is not None:
        bad.append([p.hi + 1] if p.kind.startswith("list") else p.hi + 1)
    if p.choices is not None:
        bad.append(["nope"] if p.kind.startswith("list") else "nope")
    if not p.nullable:
        bad.append(None)
    nb = p.notebooks[0]
    for value in bad:
        path = tmp_path / "mine.yaml"
        path.write_text(yaml.safe_dump({"profile": "mine", "notebooks": {nb: {name: value}}}))
        with pytest.raises(SystemExit) as e:
            profiles.load_profile(str(path))
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"mine.yaml ({nb}): {name} = "), msg
        assert p.allowed() in msg and "params.py" in msg


def test_ranges_in_words():
    assert params.SCHEMA["ETA"].allowed() == f"a number from 0 to {params.MAX_ETA:g}"
    assert params.SCHEMA["N_MAX"].allowed().endswith(", or null")
    assert params.problem("ETA", math.inf) == "inf is out of range"
    assert params.problem("ROUNDS", []) == "the list is empty: name at least one"
    assert params.problem("SEED", True) == "need int, got bool"
