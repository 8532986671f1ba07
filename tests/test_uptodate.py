"""`make reproduce` twice does the work once: a notebook runs again only when something it reads changed
(reproduce/uptodate.py), every notebook that reads it runs after it, and a run that did not end cleanly is
never taken for a current one."""

from __future__ import annotations

import json

import nbformat
import pytest

from acemad_utils.data import paths as P
from acemad_utils.reproduce import cli as reproduce
from acemad_utils.reproduce import uptodate
from tests.test_reproduce import _notebook  # a two-cell notebook: parameters, then code

CODE = (
    "import pathlib\n"
    "pathlib.Path({log!r}).open('a').write({name!r} + '\\n')\n"
    "out = pathlib.Path({table!r}); out.parent.mkdir(parents=True, exist_ok=True); out.write_text('t')\n"
    "{extra}print('SUMMARY: {name} done')"
)


@pytest.fixture
def three(tmp_outputs, monkeypatch):
    """Three notebooks: 01, 02 (reads 01's runs), 03 (reads nothing); each logs that it ran and writes a table."""
    log, nbs = tmp_outputs / "ran.txt", {}
    for name in ("01_first", "02_reads_first", "03_alone"):
        nbs[name] = tmp_outputs / f"{name}.ipynb"
        table = P.outputs("tables", create=False) / f"{name}.csv"  # outputs/smoke/tables in smoke mode
        _notebook(nbs[name], CODE.format(log=str(log), name=name, table=str(table), extra=""))
    monkeypatch.setattr(reproduce, "notebooks", lambda: nbs)
    monkeypatch.setattr(reproduce, "READS", {"02_reads_first": ("01_first",)})
    monkeypatch.setattr(reproduce, "load_profile", lambda name, overrides=None: {"profile": "mine"})

    def ran() -> list[str]:
        names = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        return names

    return nbs, ran


@pytest.mark.slow  # kernel starts
def test_a_second_run_with_nothing_changed_runs_nothing(three, capsys):
    nbs, ran = three
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    capsys.readouterr()
    assert reproduce.run("mine") == 0 and ran() == []
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[mine] 01_first  up to date  01_first done"
    assert out[-1].startswith("[mine] 3 notebook(s) up to date: nothing they read changed")
    assert reproduce.run("mine", force=True) == 0 and ran() == list(nbs)


@pytest.mark.slow
def test_a_changed_notebook_runs_with_every_notebook_that_reads_it(three):
    nbs, ran = three
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    nb = nbformat.read(nbs["01_first"], as_version=4)
    nb.cells[1].source += "\n# an edit"
    nbformat.write(nb, str(nbs["01_first"]))
    assert reproduce.run("mine") == 0 and ran() == ["01_first", "02_reads_first"]
    assert reproduce.run("mine", overrides=None) == 0 and ran() == []
    assert reproduce.run("mine", only=["01_first"], force=True) == 0 and ran() == ["01_first"]
    assert reproduce.run("mine") == 0 and ran() == ["02_reads_first"]  # it reads what --only 01 rewrote


@pytest.mark.slow
def test_a_deleted_or_touched_output_reruns_everything(three, tmp_outputs):
    nbs, ran = three
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    (P.outputs("tables") / "03_alone.csv").unlink()
    assert reproduce.run("mine") == 0 and ran() == list(nbs)  # which notebook wrote it is not known: all run
    (tmp_outputs / "data").mkdir(exist_ok=True)
    (tmp_outputs / "data" / "items.jsonl").write_text("{}\n")
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    assert reproduce.run("mine") == 0 and ran() == []


@pytest.mark.slow
def test_a_run_that_did_not_end_cleanly_leaves_nothing_up_to_date(three, tmp_outputs):
    nbs, ran = three
    table = P.outputs("tables") / "x.csv"
    fails = CODE.format(log=str(tmp_outputs / "ran.txt"), name="03_alone", table=str(table), extra="raise ValueError\n")
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    _notebook(nbs["03_alone"], fails)
    assert reproduce.run("mine") == 1 and ran() == ["03_alone"]
    assert not (P.outputs("notebooks", "mine") / uptodate.STAMP).exists()
    assert reproduce.run("mine") == 1 and ran() == list(nbs)  # the failed run's record is gone: all run


def test_stale_adds_every_reader_transitively_and_star_reads_all():
    reads = {"02": ("01",), "03": ("02",), "09": ("*",)}
    prints = {"01": "a", "02": "b", "03": "c", "04": "d", "09": "e"}
    assert uptodate.stale(prints, prints, reads) == []
    assert uptodate.stale(prints, {**prints, "01": "old"}, reads) == ["01", "02", "03", "09"]
    assert uptodate.stale(prints, {**prints, "04": "old"}, reads) == ["04", "09"]
    assert uptodate.stale(prints, {**prints, "09": "old"}, reads) == ["09"]
    assert uptodate.stale(prints, {}, reads) == list(prints)


def test_the_fingerprint_reads_sources_parameters_and_environment_not_outputs(tmp_path):
    path = tmp_path / "01_x.ipynb"
    _notebook(path, "print(1)")
    env = uptodate.environment({})
    fp = uptodate.fingerprint(path, {"N_MAX": 3}, env)
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nb.cells[1].execution_count = 7
    nbformat.write(nb, str(path))
    assert uptodate.fingerprint(path, {"N_MAX": 3}, env) == fp  # `make notebooks` stores outputs into the file
    assert uptodate.fingerprint(path, {"N_MAX": 4}, env) != fp
    assert uptodate.fingerprint(path, {"N_MAX": 3}, (*env, ("ACEMAD_SMOKE", "1"))) != fp
    nb.cells[1].source = "print(2)"
    nbformat.write(nb, str(path))
    assert uptodate.fingerprint(path, {"N_MAX": 3}, env) != fp


def test_the_stamp_stores_no_credential(three, tmp_outputs, monkeypatch):
    """The fingerprints are hashes of parameters whose URLs had their credentials taken out first."""
    secret = "hunter2-" + "9" * 20
    monkeypatch.setenv("ACEMAD_URL_SECRETS", json.dumps({"x": secret}))
    stamp = uptodate.Stamp("mine")
    fp = uptodate.fingerprint(three[0]["01_first"], {"BASE_URL": "http://127.0.0.1/v1"}, ())
    stamp.save({"01_first": fp}, ran=["01_first"], reads={})
    assert secret not in stamp.path.read_text()
    assert uptodate.environment({"ACEMAD_URL_SECRETS": secret}) == uptodate.environment({})


def test_smoke_unset_empty_and_zero_are_one_environment(monkeypatch):
    monkeypatch.delenv("ACEMAD_SMOKE", raising=False)
    off = uptodate.environment({})
    for value in ("", "0"):
        monkeypatch.setenv("ACEMAD_SMOKE", value)
        assert uptodate.environment({}) == off
    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    assert uptodate.environment({}) != off
