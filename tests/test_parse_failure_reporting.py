"""Parse failures are visible: a run where most commitments did not parse exits 1 with one line
saying how many, the headline counts them, and every table cell carries them beside n."""

from __future__ import annotations

import nbformat
import pytest

from acemad_utils.data.benchmarks import load_demo
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.report import tables
from acemad_utils.reproduce import cli as reproduce
from acemad_utils.reproduce.cli import PARSE_FAILURE_LIMIT, parse_failure_lines

try:
    from tests.fake_openai import FakeOpenAI, FaultInjector
except ImportError:  # tests/ is not a package: pytest put it on sys.path
    from fake_openai import FakeOpenAI, FaultInjector

CONFIGS = [DebateConfig(method="acemad", n_agents=3, rounds=1), DebateConfig(method="majority", n_agents=3)]


def _run(url: str):
    S = Setup(profile="probe", backend="openai", source="demo", model="m", base_url=url, workers=2)
    try:
        return S.run("parse", CONFIGS, questions=load_demo()[:3])
    finally:
        S.close()


def test_unparseable_replies_are_counted_in_the_summary_and_every_cell(keyed_outputs):
    with FakeOpenAI(FaultInjector(0.0), mode="unparseable") as srv:
        meta, recs = _run(srv.url)
        assert srv.modes["unparseable"] > 0
    s = meta["summary"]
    assert s["ok"] == len(recs) == 6 and s["commitments"] == 3 * (3 + 3)  # 3 questions x (3 AceMAD + 3 voters)
    assert s["parse_failures"] == s["commitments"]  # every one, also after the repair call
    assert not any(r["final"]["correct"] for r in recs)  # no made-up belief is ever scored correct
    long = tables.accuracy_long(recs, n_boot=50)
    assert (long["n_unparsed"] == long["n_commitments"]).all() and (long["n_commitments"] > 0).all()
    wide = tables.wide(long)
    cells = wide.drop(columns="method").to_numpy().ravel().tolist()
    assert sum("commitments unparsed" in str(c) for c in cells) >= len(long)  # every cell and the n row
    lines = parse_failure_lines("probe", {"probe/parse": (s["parse_failures"], s["commitments"])})
    assert len(lines) == 1 and "18 of 18 commitments (100%) did not parse" in lines[0]


def test_a_few_parse_failures_stay_below_the_limit():
    assert parse_failure_lines("p", {"r": (int(PARSE_FAILURE_LIMIT * 100), 100)}) == []
    assert len(parse_failure_lines("p", {"r": (int(PARSE_FAILURE_LIMIT * 100) + 1, 100)})) == 1


NOTEBOOK = (
    "from acemad_utils.data.benchmarks import load_demo\nfrom acemad_utils.protocol.config import DebateConfig\n"
    "from acemad_utils.experiments.setup import Setup\n"
    "S = Setup(profile='probe', backend='openai', source='demo', model='m', base_url=BASE_URL, workers=2)\n"
    "meta, recs = S.run('parse', [DebateConfig(method='majority', n_agents=3)], questions=load_demo()[:2])\n"
    "S.close()\nprint('SUMMARY: Majority', sum(r['final']['correct'] for r in recs), 'correct')"
)


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_the_reproduce_command_exits_1_and_the_headline_counts_them(keyed_outputs, tmp_path, monkeypatch, capsys):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('BASE_URL = ""\n')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(NOTEBOOK)]
    path = tmp_path / "01_parse.ipynb"
    nbformat.write(nb, path)
    with FakeOpenAI(FaultInjector(0.0), mode="unparseable") as srv:
        # per notebook: a test notebook is not in the parameter schema, so `common` values would not reach it
        prof = {"profile": "probe", "common": {"BACKEND": "openai"}, "notebooks": {"01_parse": {"BASE_URL": srv.url}}}
        monkeypatch.setattr(reproduce, "notebooks", lambda: {"01_parse": path})
        monkeypatch.setattr(reproduce, "load_profile", lambda name, overrides=None: prof)
        monkeypatch.setattr(reproduce, "_print_estimate", lambda *a, **kw: None)
        code = reproduce.run("probe")
    out = capsys.readouterr().out.splitlines()
    assert code == 1, out
    head = next(x for x in out if x.startswith("[probe] 01_parse"))
    assert (
        "SUMMARY" not in head and "Majority 0 correct" in head and "[6 of 6 commitments did not parse (100%)]" in head
    )
    assert any("probe/parse: 6 of 6 commitments (100%) did not parse after the repair call" in x for x in out), out
