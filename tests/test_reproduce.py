"""The papermill driver as a user meets it: profile values checked before anything runs, `--set` overrides, one
clear line per failed notebook (keys redacted), runs of different profiles kept apart."""

from __future__ import annotations

import json

import nbformat
import pytest
import yaml

from acemad_utils.data.transcripts import load_run
from acemad_utils.experiments import profiles, theory
from acemad_utils.reproduce import cli as reproduce


def _profile(tmp_path, body) -> str:
    path = tmp_path / "mine.yaml"
    path.write_text(body if isinstance(body, str) else yaml.safe_dump(body))
    return str(path)


@pytest.mark.parametrize(
    "common,expected",
    [
        ({"N_MAX": "ten"}, "N_MAX = 'ten' is not allowed: need a value like the notebook's default 300 (int)"),
        ({"ETA": -1}, "ETA = -1 is not allowed: need values >= 0, got [-1]"),
        ({"ETA": float("nan")}, "ETA = nan is not allowed: need values >= 0"),
        ({"BENCHMARKS": ["arc", "bbh"]}, "BENCHMARKS = ['arc', 'bbh'] is not allowed: unknown name(s) ['arc']"),
        ({"BENCHMARKS": "bbh"}, "BENCHMARKS = 'bbh' is not allowed: need a value like the notebook's default"),
        ({"BACKEND": "gpt"}, "BACKEND = 'gpt' is not allowed: unknown name(s) ['gpt']"),
        ({"N_VALUES": [1, "two"]}, "N_VALUES = [1, 'two'] is not allowed"),
        ({"WORKERS": 0}, "WORKERS = 0 is not allowed: need values from 1 to 256"),
        ({"SEED": None}, "SEED = None is not allowed: null is not allowed here"),
        ({"CALLS": True}, "CALLS = True is not allowed"),
        (
            {"OTHER_MODELS": [{"table": "table9", "paper_model": "x", "model": "y", "base_url": ""}]},
            "unknown table 'table9'",
        ),
        ({"OTHER_MODELS": [{"model": "y"}]}, "each entry needs exactly the keys"),
    ],
)
def test_bad_values_stop_before_anything_runs(tmp_path, common, expected):
    with pytest.raises(SystemExit) as e:
        profiles.load_profile(_profile(tmp_path, {"profile": "mine", "common": common}))
    assert expected in str(e.value), str(e.value)
    assert str(e.value).startswith("mine.yaml (0"), str(e.value)  # names the file and the notebook


def test_null_item_counts_mean_every_item(tmp_path):
    prof = profiles.load_profile(_profile(tmp_path, {"profile": "mine", "common": {"N_ITEMS": None, "N_MAX": None}}))
    assert prof["common"] == {"N_ITEMS": None, "N_MAX": None}


@pytest.mark.parametrize("body", ["", "# only a comment\n", "- a\n- list\n", "profile: [unclosed\n"])
def test_an_empty_or_malformed_profile_is_an_error(tmp_path, body):
    with pytest.raises(SystemExit, match=r"mine.yaml (is empty or not a mapping|is not valid YAML)"):
        profiles.load_profile(_profile(tmp_path, body))


def test_set_overrides_a_common_parameter_and_is_checked(tmp_path):
    prof = profiles.load_profile("paper", {"BASE_URL": "http://127.0.0.1:1/v1"})
    assert prof["common"]["BASE_URL"] == "http://127.0.0.1:1/v1"
    assert prof["common"]["MODEL"] == "gpt-4o-mini"  # the rest of the profile stays
    with pytest.raises(SystemExit, match="N_MAX = 'x' is not allowed"):
        profiles.load_profile("default", {"N_MAX": "x"})
    with pytest.raises(SystemExit, match="common parameter 'BASE_URLL'"):
        profiles.load_profile("default", {"BASE_URLL": "x"})


def test_set_wins_over_a_notebooks_own_value():
    # paper.yaml gives 04_heterogeneity its own SECOND_BASE_URL: a --set must reach that notebook, not only common.
    assert profiles.load_profile("paper")["notebooks"]["04_heterogeneity"]["SECOND_BASE_URL"] != "http://h:2/v1"
    prof = profiles.load_profile("paper", {"SECOND_BASE_URL": "http://h:2/v1"})
    assert profiles.params_for(prof, "04_heterogeneity", {"SECOND_BASE_URL": {}})["SECOND_BASE_URL"] == "http://h:2/v1"


def test_set_parses_yaml_values(monkeypatch):
    seen = {}
    monkeypatch.setattr(reproduce, "run", lambda profile, only, overrides, **kw: seen.update(overrides) or 0)
    reproduce.main(["--set", "N_MAX=3", "--set", "BASE_URL=http://h:1/v1", "--set", "MODEL="])
    assert seen == {"N_MAX": 3, "BASE_URL": "http://h:1/v1", "MODEL": ""}
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        reproduce.main(["--set", "N_MAX"])


def _notebook(path, code: str) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('PROFILE = "default"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


@pytest.mark.slow
def test_a_failed_notebook_is_one_redacted_line_and_the_others_still_run(tmp_path, monkeypatch, capsys):
    canary = "sk-canary-" + "7" * 30
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    nbs = {"01_fails": tmp_path / "01_fails.ipynb", "02_works": tmp_path / "02_works.ipynb"}
    _notebook(nbs["01_fails"], f'raise RuntimeError("endpoint said: Incorrect API key provided: {canary}")')
    _notebook(nbs["02_works"], 'print("SUMMARY: fine")')
    monkeypatch.setattr(reproduce, "notebooks", lambda: nbs)
    monkeypatch.setattr(reproduce, "load_profile", lambda name, overrides=None: {"profile": "mine"})
    assert reproduce.run("mine") == 1
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].startswith("[mine] 01_fails FAILED after ")
    assert "RuntimeError: endpoint said: Incorrect API key provided: ***" in lines[0]
    assert lines[1].strip().startswith("full traceback: ") and lines[1].strip().endswith(
        "01_fails.ipynb (cell 3)"
    )  # papermill adds the injected-parameters cell
    assert lines[2].startswith("[mine] 02_works") and lines[2].endswith("fine")
    assert lines[3] == "[mine] 1 of 2 notebook(s) failed"
    assert len(lines) == 4 and canary not in out and "Traceback" not in out


@pytest.mark.slow
def test_ctrl_c_in_a_notebook_stops_the_whole_reproduce_with_130(tmp_path, monkeypatch, capsys):
    """The kernel sees Ctrl-C first (its run raises RunInterrupted): the later notebooks must not start."""
    nbs = {"01_stops": tmp_path / "01_stops.ipynb", "02_never": tmp_path / "02_never.ipynb"}
    _notebook(
        nbs["01_stops"],
        "from acemad_utils.experiments.runner import RunInterrupted\n"
        'raise RunInterrupted("interrupted: 1 of 3 records saved; rerun to resume")',
    )
    _notebook(nbs["02_never"], 'print("SUMMARY: ran")')
    monkeypatch.setattr(reproduce, "notebooks", lambda: nbs)
    monkeypatch.setattr(reproduce, "load_profile", lambda name, overrides=None: {"profile": "mine"})
    assert reproduce.run("mine") == 130
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        "[mine] 01_stops RunInterrupted: interrupted: 1 of 3 records saved; rerun to resume; "
        "the later notebooks did not run"
    ], out


def test_theory_runs_of_two_profiles_do_not_mix(tmp_path, monkeypatch):
    """default then local (different item counts) in one checkout: each profile has its own run folders."""
    monkeypatch.setattr(theory, "PHASE_CAL", (0.0,))
    monkeypatch.setattr(theory, "PHASE_N", (3,))
    theory.run_all(n_items=6, seed=0, rounds=2, progress=False, profile="pa")
    theory.run_all(n_items=9, seed=0, rounds=2, progress=False, profile="pb")
    assert load_run("pa/theory_acemad")[0]["n_questions"] == 6
    assert load_run("pb/theory_acemad")[0]["n_questions"] == 9
    with pytest.raises(ValueError) as e:  # a real mix still refuses, naming the folder and both identities
        theory.run_all(n_items=7, seed=0, rounds=2, progress=False, profile="pa")
    msg = str(e.value)
    assert "pa/theory_martingale_symmetric holds a run with a different data_hash: saved 6 questions of" in msg
    assert "this run 7 questions of ['synthetic']" in msg and "Delete " in msg
    assert json.loads(json.dumps(theory.phase_table(etas=(2.0,), profile="pb").to_dict()))  # reads its own runs
