"""No profile value reaches code: every YAML value that is not plain data (a !!binary, a !!python/... tag, a !!set,
a date) and every value of the wrong type, nested ones included, stops the run with one line before papermill sees
it, through `--set` and a profile file; and what papermill writes is a Python literal."""

from __future__ import annotations

import ast
import base64
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from acemad_utils.data.paths import ROOT
from acemad_utils.experiments import params, profiles
from acemad_utils.reproduce import cli

MARKER = "acemad_hostile_marker"


def _payload(marker) -> str:
    """A !!binary whose bytes, written unquoted by papermill's own translator, would create the marker file."""
    code = f'"+__import__("os").system("touch {marker}")+"'
    return "!!binary " + base64.b64encode(code.encode()).decode()


HOSTILE = ("!!python/object/apply:os.system ['true']", "!!python/name:os.system", "!!set {a: null}", "2024-01-01",
           "2024-01-01 10:00:00", "!mine 3", "[[1]]", "{a: [1, {b: 2}]}", "[{x: []}]")  # fmt: skip


def _entry(**kw) -> str:
    e = {"table": "table2_main_results", "paper_model": "P", "model": "m", "base_url": "''"}
    e.update(kw)
    return "[{" + ", ".join(f"{k}: {v}" for k, v in e.items()) + "}]"


@pytest.fixture
def nothing_runs(monkeypatch, tmp_path):
    """A run that gets past the checks fails the test (and would have touched the marker)."""

    def refuse(*a, **k):
        raise AssertionError("a notebook was started")

    monkeypatch.setattr(cli, "_execute", refuse)
    monkeypatch.setattr(cli, "_run_notebooks", refuse)
    return tmp_path / MARKER


def _one_line(e: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(e.value.code) and "Traceback" not in str(e.value.code), e.value.code
    return str(e.value.code)


# every parameter, and each field of an OTHER_MODELS entry: (name, its notebook, the --set value holding `value`)
PLACES = [(name, params.notebooks_of(name)[0], lambda v: v) for name in sorted(params.SCHEMA)] + [
    ("OTHER_MODELS", "07_other_models", lambda v, field=field: _entry(**{field: v})) for field in params.ENTRY_KEYS
]


@pytest.mark.parametrize("name,nb,holding", PLACES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(PLACES)])
def test_hostile_values_through_set_or_a_profile_file_are_one_line(name, nb, holding, nothing_runs, tmp_path):
    for value in map(holding, [_payload(nothing_runs), *HOSTILE]):
        with pytest.raises(SystemExit) as e:
            cli.main(["--profile", "default", "--only", nb, "--set", f"{name}={value}"])
        assert name in _one_line(e), e.value.code
        for body in (f"common:\n  {name}: {value}\n", f"notebooks:\n  {nb}:\n    {name}: {value}\n"):
            (tmp_path / "mine.yaml").write_text("profile: mine\n" + body)
            with pytest.raises(SystemExit) as e:
                cli.main(["--profile", str(tmp_path / "mine.yaml"), "--only", nb])
            assert _one_line(e).startswith("mine.yaml"), e.value.code
    assert not nothing_runs.exists()


@pytest.mark.parametrize("key", ["max_usd", "calls_via", "models", "jobs", "description"])
def test_hostile_run_settings_are_one_line(key, nothing_runs, tmp_path):
    for value in [_payload(nothing_runs), *HOSTILE]:
        (tmp_path / "mine.yaml").write_text(f"profile: mine\n{key}: {value}\n")
        with pytest.raises(SystemExit) as e:
            cli.main(["--profile", str(tmp_path / "mine.yaml")])
        assert _one_line(e).startswith("mine.yaml"), e.value.code


@pytest.mark.parametrize("text", ["[1, {", "{a: b", "'open", "a: b: c"])
def test_invalid_yaml_in_set_is_one_line(text, nothing_runs):
    with pytest.raises(SystemExit) as e:
        cli.main(["--profile", "default", "--set", f"SEED={text}"])
    assert _one_line(e).startswith("--set SEED is not valid YAML")


@pytest.mark.slow  # one interpreter start: 10-20 s on a loaded machine
def test_the_command_line_prints_one_line_and_nothing_runs(tmp_path):
    marker = tmp_path / MARKER
    out = subprocess.run(
        [sys.executable, "-m", "acemad_utils.reproduce", "--only", "07_other_models", "--set",
         f"OTHER_MODELS={_entry(model=_payload(marker))}"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1 and out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out
    assert not marker.exists()


# ----------------------------------------------------------------------------- papermill writes literals
PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
@settings(max_examples=300, deadline=None)
@given(value=PLAIN)
def test_papermill_writes_every_plain_value_as_the_literal_of_itself(value):
    [assign] = [n for n in ast.parse(cli.literal_translator().codify({"X": value})).body if isinstance(n, ast.Assign)]
    assert ast.literal_eval(assign.value) == value


@pytest.mark.parametrize("value", [b"x", {1, 2}, [b"x"], {"a": {"b": b"x"}}, float("inf"), object()])
def test_papermill_refuses_whatever_is_not_plain(value):
    with pytest.raises(TypeError):
        cli.literal_translator().codify({"X": value})


def test_the_plain_loader_keeps_plain_yaml_as_safe_load_does():
    text = "a: [1, 2.5, true, null, 'x', {b: c}]\nd: 'sk-\"quoted'\n"
    assert profiles.load_yaml(text, "t") == yaml.safe_load(text)
