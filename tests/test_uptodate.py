"""`make reproduce` twice does the work once (reproduce/uptodate.py): a notebook runs again only when something it
reads changed, every notebook that reads it runs after it, and a run that did not end cleanly is never current."""

from __future__ import annotations

import gzip
import json
import os

import nbformat
import pytest

from acemad_utils.data import paths as P
from acemad_utils.reproduce import cli as reproduce
from acemad_utils.reproduce import uptodate
from tests.test_reproduce import _driver, _notebook  # a two-cell notebook; the driver on given notebooks

CODE = (
    "import pathlib\n"
    "pathlib.Path({log!r}).open('a').write({name!r} + '\\n')\n"
    "out = pathlib.Path({table!r}); out.parent.mkdir(parents=True, exist_ok=True); out.write_text('t')\n"
    "{extra}print('SUMMARY: {name} done')"
)


@pytest.fixture
def three(tmp_outputs, monkeypatch):
    """Three notebooks: 01, 02 (reads 01's runs), 03 (reads nothing); each logs that it ran and writes a table."""
    log = tmp_outputs / "ran.txt"
    nbs = {n: tmp_outputs / f"{n}.ipynb" for n in ("01_first", "02_reads_first", "03_alone")}
    for name, path in nbs.items():
        table = P.outputs("tables", create=False) / f"{name}.csv"  # outputs/smoke/tables in smoke mode
        _notebook(path, CODE.format(log=str(log), name=name, table=str(table), extra=""))
    _driver(monkeypatch, nbs, {"02_reads_first": ("01_first",)})

    def ran() -> list[str]:
        names = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        return names

    return nbs, ran


@pytest.mark.slow  # kernel starts
def test_a_notebook_runs_again_only_when_something_it_reads_changed(three, tmp_outputs, capsys):
    nbs, ran = three
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    assert capsys.readouterr().out.splitlines()[-1].startswith("[mine] done: executed notebooks in ")  # where to look
    assert reproduce.run("mine") == 0 and ran() == []
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[mine] 01_first  up to date  01_first done"
    assert out[-1].startswith("[mine] 3 notebook(s) up to date: nothing they read changed")
    assert reproduce.run("mine", force=True) == 0 and ran() == list(nbs)
    # a changed notebook runs with every notebook that reads it
    nb = nbformat.read(nbs["01_first"], as_version=4)
    nb.cells[1].source += "\n# an edit"
    nbformat.write(nb, str(nbs["01_first"]))
    assert reproduce.run("mine") == 0 and ran() == ["01_first", "02_reads_first"]
    assert reproduce.run("mine", only=["01_first"], force=True) == 0 and ran() == ["01_first"]
    assert reproduce.run("mine") == 0 and ran() == ["02_reads_first"]  # it reads what --only 01 rewrote
    # a deleted or written output: which notebook wrote it is not known, so all run
    (P.outputs("tables") / "03_alone.csv").unlink()
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    (tmp_outputs / "data" / "subsets").mkdir(parents=True, exist_ok=True)
    (tmp_outputs / "data" / "subsets" / "items.jsonl").write_text("{}\n")
    assert reproduce.run("mine") == 0 and ran() == list(nbs)
    (P.outputs("viewer", "mine") / "run.html").write_text("<p>a run page, built on request</p>")  # no notebook reads it
    assert reproduce.run("mine") == 0 and ran() == []
    # a run that did not end cleanly leaves nothing up to date
    table = P.outputs("tables") / "x.csv"
    fails = CODE.format(log=str(tmp_outputs / "ran.txt"), name="03_alone", table=str(table), extra="raise ValueError\n")
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


def test_the_fingerprint_reads_sources_parameters_and_environment_not_outputs(tmp_path, monkeypatch):
    path = tmp_path / "01_x.ipynb"
    _notebook(path, "print(1)")
    env = uptodate.environment({})
    fp = uptodate.fingerprint(path, {"N_MAX": 3}, env)
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].outputs, nb.cells[1].execution_count = [nbformat.v4.new_output("stream", text="1\n")], 7
    nbformat.write(nb, str(path))
    assert uptodate.fingerprint(path, {"N_MAX": 3}, env) == fp  # `make notebooks` stores outputs into the file
    assert uptodate.fingerprint(path, {"N_MAX": 4}, env) != fp
    assert uptodate.fingerprint(path, {"N_MAX": 3}, (*env, ("ACEMAD_SMOKE", "1"))) != fp
    nb.cells[1].source = "print(2)"
    nbformat.write(nb, str(path))
    assert uptodate.fingerprint(path, {"N_MAX": 3}, env) != fp
    monkeypatch.delenv("ACEMAD_SMOKE", raising=False)  # unset, empty and "0" are one environment
    off = uptodate.environment({})
    for value, same in (("", True), ("0", True), ("1", False)):
        monkeypatch.setenv("ACEMAD_SMOKE", value)
        assert (uptodate.environment({}) == off) is same


def test_the_stamp_stores_no_credential(three, monkeypatch):
    """The fingerprints are hashes of parameters whose URLs had their credentials taken out first."""
    secret = "hunter2-" + "9" * 20
    monkeypatch.setenv("ACEMAD_URL_SECRETS", json.dumps({"x": secret}))
    stamp, fp = uptodate.Stamp("mine"), uptodate.fingerprint(three[0]["01_first"], {"BASE_URL": "http://h/v1"}, ())
    stamp.save({"01_first": fp}, ran=["01_first"], reads={})
    assert secret not in stamp.path.read_text()
    assert uptodate.environment({"ACEMAD_URL_SECRETS": secret}) == uptodate.environment({})


def _edit_keeping_size_and_times(path) -> None:
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_every_file_the_notebooks_write_or_read_counts_by_content(tmp_outputs, tmp_path_factory, monkeypatch):
    """Outputs (also through a link to a folder elsewhere, with a loop and a FIFO in it), the benchmark files and
    matplotlib's configuration; a file edited back to its size and time is a change."""
    bench, mpl, elsewhere = (tmp_path_factory.mktemp(n) for n in ("benchmarks", "mplconfig", "other_disk"))
    (elsewhere / "baselines").mkdir()
    run = elsewhere / "baselines" / "transcripts.jsonl.gz"
    run.write_bytes(gzip.compress(b'{"answer": "A"}\n'))
    (elsewhere / "baselines" / "loop").symlink_to(elsewhere)  # a link to its own parent
    os.mkfifo(elsewhere / "a_fifo")  # never opened: reading it would block
    P.outputs().mkdir(parents=True, exist_ok=True)
    (P.outputs() / "runs").symlink_to(elsewhere)
    gold = bench / "arc_challenge" / "ARC-Challenge-Test.jsonl"
    gold.parent.mkdir()
    gold.write_text('{"answerKey": "A"}\n')
    rc = tmp_path_factory.mktemp("rc") / "myrc"
    for var, value in (("ACEMAD_DATA_DIR", bench), ("MPLCONFIGDIR", mpl), ("MATPLOTLIBRC", rc)):
        monkeypatch.setenv(var, str(value))
    for change in (  # each after a clean run was recorded: a new Stamp finds nothing current
        lambda: _edit_keeping_size_and_times(run),
        lambda: _edit_keeping_size_and_times(gold),
        lambda: (mpl / "matplotlibrc").write_text("font.size: 30\n"),
        lambda: rc.write_text("lines.linewidth: 9\n"),
    ):
        uptodate.Stamp("mine").save({"01_first": "fp"}, ran=["01_first"], reads={})
        assert uptodate.Stamp("mine").recorded == {"01_first": "fp"}  # nothing changed: current
        change()
        assert uptodate.Stamp("mine").recorded == {}


def test_a_file_read_that_changes_while_the_notebooks_run_leaves_nothing_up_to_date(tmp_outputs, monkeypatch):
    monkeypatch.setenv("ACEMAD_DATA_DIR", str(tmp_outputs / "benchmarks"))  # a file the notebooks read
    table = tmp_outputs / "benchmarks" / "table1.csv"
    table.parent.mkdir(parents=True)
    table.write_text("method,acc\nvoting,0.5\n")
    stamp = uptodate.Stamp("mine")  # the driver takes it before the first notebook starts
    table.write_text("method,acc\nvoting,0.9\n")  # edited while a notebook reads it
    note = stamp.save({"01_first": "fp"}, ran=["01_first"], reads={})
    assert "changed while they ran" in note and not stamp.path.exists()
    assert uptodate.Stamp("mine").recorded == {}
    (tmp_outputs / "data" / "subsets").mkdir(parents=True)
    stamp = uptodate.Stamp("mine")
    (tmp_outputs / "data" / "subsets" / "built.jsonl").write_text("{}\n")  # written, not read
    assert stamp.save({"01_first": "fp"}, ran=["01_first"], reads={}) == ""
    assert uptodate.Stamp("mine").recorded == {"01_first": "fp"}


@pytest.mark.slow  # a kernel starts
def test_kernels_import_the_checkout_the_driver_runs_from(tmp_outputs, tmp_path_factory, monkeypatch):
    decoy = tmp_path_factory.mktemp("other_checkout")
    (decoy / "acemad_utils").mkdir()
    (decoy / "acemad_utils" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(decoy))  # another checkout first on the path, as its venv would put it
    seen = tmp_outputs / "imported.txt"
    nb = tmp_outputs / "01_first.ipynb"
    _notebook(nb, f"import acemad_utils, pathlib\npathlib.Path({str(seen)!r}).write_text(acemad_utils.__file__)")
    _driver(monkeypatch, {"01_first": nb})
    assert reproduce.run("mine") == 0
    assert seen.read_text() == str(P.CHECKOUT / "acemad_utils" / "__init__.py")
