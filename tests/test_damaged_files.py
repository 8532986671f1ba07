"""One line for each broken thing, naming the file and the fix that keeps results: a full disk, a
killed kernel, a damaged transcripts.jsonl.gz, meta.json, subset file or cache row, an endpoint answering with
no choices. After each fault, the fix the line names gives results byte-identical to a clean run."""

from __future__ import annotations

import errno
import gzip
import json
import os
import sqlite3

import pytest

from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import LLMClient
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data import paths as P
from acemad_utils.data.transcripts import COMPRESSED, DamagedFile, load_run, run_dir, transcript_bytes
from acemad_utils.experiments import runner
from acemad_utils.experiments.runner import run_experiment
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.report import rescoring
from acemad_utils.reproduce import cli as reproduce
from tests.test_reproduce import _driver, _notebook  # a two-cell notebook; the driver on given notebooks

ITEMS = make_items(40, k=4, seed=3)
CONFIGS = [DebateConfig(method="acemad", n_agents=3, rounds=2), DebateConfig(method="majority", n_agents=3)]


def _run(name="probe/r"):
    run_experiment(name, ITEMS, CONFIGS, SimPopulation(seed=1), progress=False)
    d = run_dir(name)
    return d, transcript_bytes(d / "transcripts.jsonl"), json.loads((d / "meta.json").read_text())


def _one_line(e) -> str:
    assert "\n" not in str(e.value), e.value
    return str(e.value)


def test_a_full_disk_leaves_no_temp_file(smoke_outputs, monkeypatch):
    target = smoke_outputs / "x" / COMPRESSED

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        P.atomic_write(target, b"data" * 1000)
    assert list(target.parent.iterdir()) == []


def test_temp_files_of_a_killed_run_are_removed_by_the_next_run(smoke_outputs):
    d, clean, _ = _run()
    left = [d / f"{COMPRESSED}.k1l2d.tmp", d / "meta.json.x9.tmp"]  # as a SIGKILL during compression leaves them
    for p in left:
        p.write_bytes(b"\x1f\x8b half")
    _, again, _ = _run()
    assert not any(p.exists() for p in left) and again == clean


def test_the_driver_says_disk_full_in_one_line_and_removes_a_truncated_notebook(smoke_outputs, monkeypatch, capsys):
    nbs = {n: smoke_outputs / f"{n}.ipynb" for n in ("01_a", "02_b")}

    def execute(prof, profile, name, path, out, **kw):
        out.write_text('{"cells": [{"cell_type": "code", "sou')  # what a full disk leaves of the executed copy
        raise OSError(errno.ENOSPC, "No space left on device", str(out))

    _driver(monkeypatch, nbs, profile="probe")
    monkeypatch.setattr(reproduce, "_execute", execute)
    assert reproduce.run("probe") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[probe] 01_a FAILED after ") and "the disk is full (ENOSPC" in out[0]
    assert "free space there and rerun the same command" in out[0] and "was removed" in out[0]
    assert out[1].strip() == "not started: 02_b"
    assert not (P.outputs("notebooks", "probe") / "01_a.ipynb").exists()


def test_a_killed_kernel_is_one_line_and_the_later_notebooks_run(smoke_outputs, monkeypatch, capsys):
    nbs = {"01_killed": smoke_outputs / "01.ipynb", "02_after": smoke_outputs / "02.ipynb"}
    _notebook(nbs["01_killed"], "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer does")
    _notebook(nbs["02_after"], "print('SUMMARY: the next notebook ran')")
    _driver(monkeypatch, nbs, profile="probe")
    assert reproduce.run("probe") == 1
    out = capsys.readouterr().out.splitlines()
    killed = [x for x in out if x.startswith("[probe] 01_killed")]
    assert len(killed) == 1 and "its kernel died" in killed[0] and "rerun the same command" in killed[0], out
    assert any(x.startswith("[probe] 02_after") and "the next notebook ran" in x for x in out), out
    assert out[-1] == "[probe] 1 of 2 notebook(s) failed" and len(out) == 3, out


@pytest.mark.parametrize("damage", ["truncated", "garbled", "bad block"])
def test_a_damaged_gz_is_named_and_the_rerun_restores_it(smoke_outputs, damage):
    d, clean, meta = _run()
    gz = d / COMPRESSED
    raw = gz.read_bytes()
    mid = len(raw) // 2
    garbled = raw[:mid] + bytes(b ^ 0x5A for b in raw[mid : mid + 64]) + raw[mid + 64 :]
    assert raw[3] == 0  # no optional header field: the first deflate block starts at byte 10
    bad_block = raw[:10] + bytes([raw[10] | 0b110]) + raw[11:]  # block type 11, which deflate reserves
    gz.write_bytes({"truncated": raw[:mid], "garbled": garbled, "bad block": bad_block}[damage])
    with pytest.raises(DamagedFile) as e:
        load_run("probe/r")
    msg = _one_line(e)
    assert str(gz) in msg and "rerun the notebook" in msg and "keeps every record that can still be read" in msg
    with pytest.warns(UserWarning) as w:  # truncated: the torn last line is dropped with its own warning too
        _, again, meta2 = _run()
    assert any("is damaged" in str(x.message) for x in w)
    assert again == clean and meta2 == meta  # the rerun wrote it whole again: byte-identical
    gzip.decompress(gz.read_bytes())


def test_a_failure_reading_the_records_leaves_metas_summary_as_it_was(smoke_outputs, monkeypatch):
    """The records are read before meta.json is written again: a failure there leaves the last summary in place."""
    d, _, meta = _run()

    def unreadable(path):
        raise DamagedFile(f"{path} is damaged (test)")

    monkeypatch.setattr(runner, "read_done", unreadable)
    with pytest.raises(DamagedFile):
        _run()
    assert json.loads((d / "meta.json").read_text()) == meta


@pytest.mark.parametrize("content", ["truncated", "[]", "{}"])
def test_a_damaged_meta_names_the_file_and_deleting_it_alone_keeps_the_results(smoke_outputs, content):
    d, clean, meta = _run()
    text = (d / "meta.json").read_text()
    (d / "meta.json").write_text(text[: len(text) // 2] if content == "truncated" else content)
    for attempt in (lambda: load_run("probe/r"), _run):
        with pytest.raises(DamagedFile) as e:
            attempt()
        msg = _one_line(e)
        assert str(d / "meta.json") in msg and "delete that file alone" in msg and "byte-identical" in msg
    (d / "meta.json").unlink()  # the fix the line names
    _, again, meta2 = _run()
    assert again == clean and meta2["summary"] == meta["summary"] and meta2["methods"] == meta["methods"]


def test_a_damaged_questions_json_is_named_and_deleting_it_rewrites_it(smoke_outputs):
    d, clean, _ = _run()
    good = (d / "questions.json").read_bytes()
    (d / "questions.json").write_bytes(good[: len(good) // 2])
    with pytest.raises(DamagedFile) as e:
        _run()
    assert str(d / "questions.json") in _one_line(e) and "delete it and run the same command again" in str(e.value)
    (d / "questions.json").unlink()  # the fix the line names
    _, again, _ = _run()
    assert again == clean and (d / "questions.json").read_bytes() == good


@pytest.mark.parametrize("cut", ["mid-line", "line boundary"])
def test_a_damaged_or_short_subset_file_is_named_and_rebuilt(smoke_outputs, cut):
    setup = lambda: Setup(profile="probe", backend="sim", source="synthetic", benchmarks=["arc_challenge"], n_items=60)
    clean = [q.id for q in setup().subset("arc_challenge")]
    path = next(P.outputs("subsets").rglob("*arc_challenge.jsonl"))
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) > 2
    path.write_text("".join(lines[:2]) + (lines[2][:10] if cut == "mid-line" else ""))
    with pytest.raises(DamagedFile) as e:
        setup().subset("arc_challenge")
    msg = _one_line(e)
    assert str(path) in msg and f"rm {path}" in msg
    assert (
        "line 3 is not a whole subset item" if cut == "mid-line" else f"2 items where meta.json says {len(lines)}"
    ) in msg
    path.unlink()
    assert [q.id for q in setup().subset("arc_challenge")] == clean


def test_a_bad_cache_row_is_dropped_named_and_asked_again_once(fake_server, smoke_outputs):
    cache = smoke_outputs / "llm.sqlite"
    msgs = [{"role": "user", "content": "hi"}]
    c = LLMClient("m", fake_server.url, "sk-test-key", cache=str(cache))
    first = c.generate(msgs).text
    c.close()
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE responses SET value = '{\"text\": \"trunc' WHERE key != ''")
    c = LLMClient("m", fake_server.url, "sk-test-key", cache=str(cache))
    with pytest.warns(UserWarning, match=rf"the response cache {cache}: dropped a damaged row"):
        assert c.generate(msgs).text == first  # asked again, once
    assert fake_server.count == 2
    assert c.generate(msgs).text == first and fake_server.count == 2  # stored again: no third request
    c.close()
    assert ResponseCache(str(cache)).get("no such key") is None


def test_records_that_all_failed_say_why_when_stacked():
    recs = [{"status": "failed", "question_id": f"q{i}", "error": "GarbledResponse: ... no choices"} for i in range(3)]
    with pytest.raises(ValueError, match=r"all 3 of 3 records failed \(first error: GarbledResponse: .* no choices\)"):
        rescoring.stack(recs)
