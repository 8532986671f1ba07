"""Your own questions (docs/own-questions.md): the API example verbatim, the `run` command on question files, per-role
models, the estimate before a run spends, any dataset by its columns. Every problem is one line naming file and row."""

from __future__ import annotations

import base64
import datetime
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import acemad_utils
from acemad_utils import api
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.agents.tokenmodel import prompt_tokens, tokens
from acemad_utils.command import main
from acemad_utils.cost import estimate as E
from acemad_utils.cost.estimate import CALL_SECONDS
from acemad_utils.data import own
from acemad_utils.data import paths as P
from acemad_utils.data.benchmarks import DataError
from acemad_utils.data.own import MAX_ROWS, make_question, read_questions
from acemad_utils.data.paths import outputs_root
from acemad_utils.data.transcripts import read_jsonl
from acemad_utils.experiments.runner import run_experiment
from acemad_utils.protocol.config import METHODS, DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.report import premise as PR
from acemad_utils.report import rescoring
from tests.fake_openai import FakeOpenAI, FaultInjector, Refusing, Reply, error
from tests.test_client import LLAMA_CPP_PYTHON_500

DOC = Path(__file__).resolve().parents[1] / "docs" / "own-questions.md"
FAKE_KEY = "sk-fake-own-questions"


def doc_blocks(section: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```[a-z]*\n(.*?)```", body, flags=re.S)


def api_example(endpoint: bool) -> str:
    example, run_line = doc_blocks("1. Python API")[:2]
    assert len(example.strip().splitlines()) <= 10, "the README example must stay within 10 lines"
    if not endpoint:
        return example
    old = next(line for line in example.splitlines() if line.startswith("results = run("))
    return example.replace(old, run_line.strip())


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory outside the checkout; nothing may be written under the checkout's outputs/."""
    monkeypatch.chdir(tmp_path)
    before = set((P.ROOT / "outputs").rglob("*"))
    yield tmp_path
    assert not [
        p for p in set((P.ROOT / "outputs").rglob("*")) - before if "acemad_runs" in str(p) or "/api/" in str(p)
    ]


@pytest.fixture
def endpoint(fake_server, monkeypatch):
    """conftest's fake_server as the command's endpoint, by OPENAI_BASE_URL and OPENAI_API_KEY ($MODEL unset)."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("MODEL", raising=False)
    return fake_server


@pytest.mark.parametrize("on_endpoint", [False, True], ids=["synthetic", "endpoint"])
def test_docs_example(elsewhere, capsys, request, on_endpoint):
    srv = request.getfixturevalue("endpoint") if on_endpoint else None
    ns: dict = {}
    exec(api_example(endpoint=on_endpoint), ns)
    results, out, root = ns["results"], capsys.readouterr().out, elsewhere
    assert len(results) == 3 * len(ns["questions"])
    labelled = {r.correct is not None for r in results if r.question_id == ns["questions"][0].id}
    assert labelled == {True}, "the question with an answer is scored"
    assert all(r.correct is None for r in results if r.question_id == ns["questions"][1].id)
    table = results.table()
    assert "n=1" in table.to_string(), "only the labelled question counts"
    assert results.run_dir.is_relative_to(root / "acemad_runs")
    assert (results.run_dir / "transcripts.jsonl.gz").exists()
    assert all(len(r.weights) == 3 and len(r.weights[-1]) == 5 for r in results if r.method.startswith("AceMAD"))
    assert all(r.weights == r.scores == [] for r in results if not r.method.startswith("AceMAD"))  # AceMAD only
    assert out.count("\n") >= len(results) and results.meta["synthetic"] is not on_endpoint
    arr = rescoring.stack([r.record for r in results if r.method.startswith("AceMAD")])  # the unlabelled one too
    assert list(arr.truth) == [1, -1] and len(rescoring.rescore(arr, eta=4.0)) == 2
    if srv:
        calls = srv.count
        assert calls > 0 and (elsewhere / "acemad_runs" / "cache" / "llm.sqlite").exists()
        exec(api_example(endpoint=True), {})  # the same questions again: every record on disk, no call
        assert srv.count == calls


def test_docs_example_against_an_endpoint_failing_one_question_warns_and_still_prints(elsewhere, monkeypatch, capsys):
    with FakeOpenAI(Refusing("opening move")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
        ns: dict = {}
        with pytest.warns(api.FailedRecords, match=r"^3 of 6 records failed \(AceMAD \(T=3\) 1, Decentralized MAD 1, "):
            exec(api_example(endpoint=True), ns)
    failed = [r for r in ns["results"] if r.status == "failed"]
    assert len(failed) == 3 and all(r.correct is None and r.weights == [] for r in failed)
    assert "context length exceeded" in ns["results"].failures()
    assert capsys.readouterr().out.count(" failed None None -\n") == 3  # the example's loop printed every record


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _write(path: Path, rows) -> Path:
    path.write_bytes(_jsonl(rows))
    return path


ROWS = [
    {"question": "Capital of Australia? <script>alert(1)</script>", "answer": "C", "id": "cap",
     "options": {"S": "Sydney <img src=x onerror=alert(2)>", "C": "Canberra"}},
    {"question": "The ball costs?", "options": ["10 cents", "5 cents", "1 dollar"], "answer": "5 cents"},
    {"question": "Better opening move?", "options": ["1. e4", "1. d4"]},
]  # fmt: skip


def test_command_jsonl_and_csv(elsewhere, capsys):
    src = _write(elsewhere / "mine.jsonl", ROWS)
    assert main(["run", str(src), "--synthetic", "--methods", "acemad,decentralized,single", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" in out and "n=2" in out, out  # two labelled questions
    paths = dict(re.findall(r"^(transcripts|table|viewer): +(\S+)", out, flags=re.M))
    page = Path(paths["viewer"]).read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in page and "<img" not in page  # question and options are data, not markup
    assert Path(paths["table"]).exists()
    assert Path(paths["table"]).with_suffix(".csv").read_text().startswith("source,method,")  # opened alone: synthetic
    assert "\nSYNTHETIC population (no LLM),AceMAD (T=2)," in Path(paths["table"]).with_suffix(".csv").read_text()
    recs = read_jsonl(Path(paths["transcripts"]) / "transcripts.jsonl.gz")
    assert len(recs) == 9 and all(len(r["rounds"]) == 2 for r in recs if r["method_kind"] != "single")
    csv = elsewhere / "mine.csv"
    csv.write_text('question,A,B,C,answer,id\n"Q one?",x,y,z,B,one\n"Q two?",p,q,,,\n', encoding="utf-8")
    assert main(["run", str(csv), "--synthetic", "--methods", "majority"]) == 0
    assert [q.answer for q in read_questions(csv)] == ["B", None]
    capsys.readouterr()
    assert main(["run", str(_write(elsewhere / "open.jsonl", [ROWS[2]])), "--synthetic", "--methods", "acemad"]) == 0
    assert "no question has an answer" in capsys.readouterr().out
    (elsewhere / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + src.read_bytes())  # a BOM, as CSV files may have
    assert read_questions(elsewhere / "bom.jsonl") == read_questions(src)


def test_the_shipped_demo_file_is_a_question_file_its_metadata_kept_and_never_sent(elsewhere, capsys):
    """data/demo/demo.jsonl (ids in the benchmarks' 'demo/01' form, a metadata object per line) runs as it is."""
    demo = Path(__file__).resolve().parents[1] / "data" / "demo" / "demo.jsonl"
    qs = read_questions(demo)
    assert len(qs) == 24 and qs[0].id == "demo/01" and qs[0].metadata["distractor"] in qs[0].options
    assert main(["run", str(demo), "--synthetic", "--methods", "majority"]) == 0
    (rec, *_) = read_jsonl(next((elsewhere / "acemad_runs" / "runs").rglob("transcripts.jsonl.gz")))
    assert rec["question_id"].startswith("demo/")
    assert qs[0].metadata["explanation"] not in json.dumps(rec.get("rounds", []))  # not in any prompt or reply


BAD_FILES = {  # a question file's bytes (None: made by the test) -> what its one error line says
    "no question": (_jsonl([ROWS[0], {"options": ["a", "b"]}]), "line 2: missing field 'question'"),
    "one option": (_jsonl([ROWS[0], {"question": "x?", "options": ["o"]}]), "line 2: field 'options' has 1 options"),
    "answer": (_jsonl([ROWS[0], {"question": "x?", "options": ["a", "b"], "answer": "C"}]), "line 2: field 'answer'"),
    "id twice": (_jsonl([ROWS[0], {"question": "x?", "options": ["a", "b"], "id": "cap"}]), "id 'cap' repeats"),
    "id path": (_jsonl([ROWS[0], {"question": "x?", "options": ["a", "b"], "id": "../../etc"}]), "line 2: field 'id'"),
    "id part": (_jsonl([ROWS[0], {"question": "x?", "options": ["a", "b"], "id": "a/../b"}]), "field 'id' '..'"),
    "metadata": (_jsonl([ROWS[0], {"question": "x?", "options": ["a", "b"], "metadata": [1]}]), "'metadata' must"),
    "label": (_jsonl([ROWS[0], {"question": "x?", "options": {"A; rm": "a", "B": "b"}}]), "field 'options': label"),
    "control": (_jsonl([ROWS[0], {"question": "x\x00?", "options": ["a", "b"]}]), "holds the control character"),
    "field": (_jsonl([ROWS[0], {"question": "x?", "options": ["a", "b"], "colour": "red"}]), "line 2: unknown field"),
    "choices": (_jsonl([{"question": "x?", "choices": ["a", "b"]}]), "own column names: the command's --question-col"),
    "long": (_jsonl([ROWS[0], {"question": "x" * 20_001, "options": ["a", "b"]}]), "has 20001 characters"),
    "latin": (b'{"question": "caf\xe9?", "options": ["a", "b"]}\n', "line 1: not UTF-8"),
    "deep": (b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1: JSON nested too deeply"),
    "lone surrogate": (b'{"question": "2+2\\ud800?", "options": ["3", "4"]}\n', "line 1: field 'question' holds"),
    "many": (b'{"question": "q?", "options": ["a", "b"]}\n' * (MAX_ROWS + 1), "more than the 10000"),
    "big": (json.dumps(ROWS).encode(), "bytes is more than the 100"),
    "fifo": (None, "not a regular file"),
    "absent": (None, "no such file"),
    "csv short row": (b"question,A,B,answer\nWhat?,x,y\n", "line 2: fewer cells than columns"),  # its answer lost
    "csv open quote": (b'question,A,B,answer\n"What?,x,y,A\n', "line 2: fewer cells than columns (or a quote"),
    "csv header twice": (b"question,question,A,B\nq1,q2,x,y\n", "column(s) ['question'] appear more than once"),
    "csv no options": (b"question,answer\nWhat is 2+2?,B\n", "no option columns"),
    "csv extra column": (b"question,A,B,AB,answer,why\nWhat?,x,y,z,A,x is\n", "column(s) ['AB', 'why'] are neither"),
    "csv latin": (b"question,A,B\ncaf\xe9?,a,b\n", "line 2: not UTF-8 text (byte 0xe9 at column 4)"),
    "csv bom latin": (b"\xef\xbb\xbfquestion,A,B\ncaf\xe9?,a,b\n", "line 2: not UTF-8 text (byte 0xe9 at column 4)"),
    "csv huge cell": (b'question,A,B\n"What?' + b"x" * 140_000 + b'",a,b\n', "line 2: field larger than field limit"),
    "long number": (b'{"question": "q?", "options": ["a", "b"], "id": ' + b"9" * 5000 + b"}\n", "line 1: a number too"),
    "id true": (_jsonl([{"question": "x?", "options": ["a", "b"], "id": True}]), "line 1: field 'id' must be a str"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_stops_in_one_line_before_any_call(elsewhere, endpoint, monkeypatch, capsys, case):
    path, (data, says) = elsewhere / ("bad.csv" if case.startswith("csv") else "bad.jsonl"), BAD_FILES[case]
    if data is not None:
        path.write_bytes(data)
    elif case == "fifo":  # a read would wait for a writer
        os.mkfifo(path)
    monkeypatch.setattr(own, "MAX_FILE_BYTES", 100 if case == "big" else own.MAX_FILE_BYTES)
    assert main(["run", str(path), "--model", "fake-model", "--methods", "acemad"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}" in err and says in err, err
    assert endpoint.count == 0 and not (elsewhere / "acemad_runs" / "runs").exists()


URL_SAYS = "need an http:// or https:// URL with a host (a port: 1 to 65535)"


@pytest.mark.parametrize("argv, env, says", [
    (["--seed", "-1"], {}, "seed=-1: need a whole number >= 0"),
    (["--base-url", "http://127.0.0.1:abc/v1"], {}, URL_SAYS),
    (["--base-url", "http://127.0.0.1:99999/v1"], {}, URL_SAYS),
    (["--model", ""], {}, "model='': empty"),  # "$MODEL" unset: not the paid default model in its place
    (["--base-url", ""], {}, "base_url='': empty"),  # nor api.openai.com in place of the endpoint meant
    ([], {"ACEMAD_MAX_USD": "abc"},
     "MAX_USD (ACEMAD_MAX_USD, a profile's max_usd or pilot --usd) must be a finite number >= 0"),
    ([], {"ACEMAD_MAX_USD": "inf"}, "must be a finite number >= 0 (none: no cap), got 'inf'"),
    ([], {"ACEMAD_MAX_USD": "1_0"}, "got '1_0'"),  # Python's float() would read it as 10
    ([], {"OPENAI_BASE_URL": "http://u:pw@127.0.0.1:99999/v1"}, "OPENAI_BASE_URL 'http://127.0.0.1:99999/v1': need"),
    ([], {"ACEMAD_MODELS": "{not json"}, "ACEMAD_MODELS: Expecting property name"),
])  # fmt: skip
def test_a_bad_option_stops_in_one_line_before_the_estimate_or_any_call(
    elsewhere, endpoint, capsys, monkeypatch, argv, env, says
):
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    src = _write(elsewhere / "q.jsonl", ROWS[:2])
    assert main(["run", str(src), "--model", "fake-model", "--methods", "majority", *argv]) == 2
    out, err = capsys.readouterr()
    err = err.strip()
    assert err.splitlines() == [err] and err.startswith("error: ") and says in err, (out, err)
    assert env or "estimate" not in out, out  # a setting may be read after the estimate is printed
    assert endpoint.count == 0 and not (elsewhere / "acemad_runs").exists()


def test_ctrl_c_before_the_run_starts_is_one_line_and_exit_130(elsewhere, endpoint, capsys, monkeypatch):
    def interrupted(*a, **k):  # Ctrl-C while the endpoint is checked or the estimate is made
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "estimate", interrupted)
    src = _write(elsewhere / "q.jsonl", ROWS[:2])
    assert main(["run", str(src), "--model", "fake-model", "--methods", "majority"]) == 130
    assert capsys.readouterr().err.strip() == (
        "interrupted; rerun the same command to resume (saved records and cached replies are kept)"
    )


def test_changed_question_is_a_new_question(elsewhere, capsys):
    src = _write(elsewhere / "q.jsonl", ROWS)
    assert main(["run", str(src), "--synthetic", "--methods", "majority"]) == 0
    changed = [dict(ROWS[0], question="Capital of New Zealand?", options={"A": "Auckland", "W": "Wellington"},
                    answer="W")] + ROWS[1:]  # fmt: skip
    _write(src, changed)  # same id "cap", another question: a new run, never a stale record or a hash error
    assert main(["run", str(src), "--synthetic", "--methods", "majority"]) == 0
    runs = sorted(d for d in (elsewhere / "acemad_runs" / "runs" / "q").iterdir() if d.is_dir())  # not .lock
    assert len(runs) == 2
    texts = [{r["question_id"]: r["labels"] for r in read_jsonl(d / "transcripts.jsonl.gz")}["cap"] for d in runs]
    assert sorted(map(tuple, texts)) == [("A", "W"), ("S", "C")]


def test_content_ids_and_api_checks(elsewhere):
    a = make_question("2+2?", ["3", "4"], answer="4")
    assert a.answer == "B" and a.id == make_question("2+2?", ["3", "4"]).id != make_question("2+3?", ["3", "4"]).id
    for kw, says in [(dict(model="gpt 4\n", base_url="http://127.0.0.1:9/v1"), "model="),
                     (dict(model="m", base_url="file:///etc/passwd"), "base_url"),
                     (dict(synthetic=True, rounds=0), "rounds"),
                     (dict(synthetic=True, roles={"skeptic": "b@http://127.0.0.1:9/v1"}), "role URL")]:  # fmt: skip
        with pytest.raises(ValueError, match=says):
            api.run(a, out="unused", **kw)
    plain = api.run(a, "acemad", synthetic=True)
    other = api.run(a, "acemad", synthetic=True, roles={"skeptic": "model-b"})
    assert other.run_dir != plain.run_dir and other[0].method == "AceMAD (T=3; skeptic model-b)"
    seeded = api.run(a, "acemad", synthetic=True, seed=3)  # another seed on the same questions: its own run
    assert seeded.run_dir == plain.run_dir.with_name(plain.run_dir.name + "-seed3") and seeded.meta != plain.meta


def test_a_runs_seed_draws_its_tables_intervals_as_a_notebooks_seed_does(elsewhere):
    items = make_items(150, k=4, seed=5)  # enough questions that a percentile moves with the draw
    zero, one = (api.run(items, "acemad,majority", synthetic=True, seed=s) for s in (0, 1))
    assert (zero.seed, one.seed) == (0, 1)
    at = {s: api.accuracy_table(one.records, s) for s in (0, 1)}
    assert not at[0].equals(at[1])  # the seed moves the intervals of the same records
    assert one.table().iloc[: len(at[1])].equals(at[1]) and zero.table().iloc[: len(at[0])].equals(
        api.accuracy_table(zero.records)
    )
    assert one.premise().equals(PR.premise(one.records, 1))


def test_a_paired_gain_is_one_row_with_a_cell_per_benchmark_and_the_average(elsewhere):
    items = make_items(12, k=4, seed=2, benchmark="astro") + make_items(12, k=4, seed=3, benchmark="myths")
    table = api.run(items, "acemad,majority,decentralized", synthetic=True).table()
    names = [f"AceMAD (T=3) minus {m} (paired)" for m in ("Majority Voting", "Decentralized MAD")]
    paired = table[table["method"].isin(names)]
    assert sorted(paired["method"]) == sorted(names)  # once each, not once per benchmark
    assert (paired[["astro", "myths", "Average"]] != "").all().all() and paired["Average"].str.endswith("n=24").all()


def test_import_stays_light_and_names_the_public_api():
    code = "import sys, acemad_utils; print(sorted(m for m in ('numpy', 'pandas', 'openai') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert acemad_utils.estimate is api.estimate and acemad_utils.run is api.run  # price first, then run


# ----------------------------------------------------------------------------- inspect_ai (test_inspect_solvers.py)
@pytest.mark.slow
def test_inspect_route_of_the_docs_runs_as_written(tmp_path):
    """The docs' task file (it never imports acemad) and first command, verbatim: the solver is the entry point's."""
    pytest.importorskip("inspect_ai", reason="the inspect extra: pip install -e '.[inspect]'")
    task_file, shell = doc_blocks("3. inspect_ai")[:2]
    assert "acemad" not in task_file
    (tmp_path / "my_task.py").write_text(task_file)
    line = shell.splitlines()[0]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with FakeOpenAI(FaultInjector(rate=0.0)) as srv:
        cmd = line.replace("sk-...", FAKE_KEY).replace("http://127.0.0.1:8000/v1", srv.url)
        p = subprocess.run(["bash", "-c", cmd + " --log-dir logs --display plain"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
        assert p.returncode == 0, p.stdout + p.stderr
        assert srv.count == 3 * 5 * 2  # rounds x agents x (argue, commit) of the docs' -S values
    assert "accuracy" in p.stdout


def test_challenging_keeps_the_subset_rule(elsewhere, capsys):
    rows = [{"question": f"Item {i}: which?", "options": list("abcd"), "answer": "ABCD"[i % 4]} for i in range(24)]
    src = _write(elsewhere / "many.jsonl", rows)
    assert main(["run", str(src), "--synthetic", "--methods", "majority", "--challenging"]) == 0
    out = capsys.readouterr().out
    kept = int(re.search(r"kept (\d+) of 24", out).group(1))
    selection = next(d for d in (elsewhere / "acemad_runs" / "runs").glob("many-challenging/*") if d.is_dir())
    accuracy = {r["question_id"]: r["final"]["correct"] for r in read_jsonl(selection / "transcripts.jsonl.gz")}
    run = next(d for d in (elsewhere / "acemad_runs" / "runs").glob("many/*") if d.is_dir())
    debated = {r["question_id"] for r in read_jsonl(run / "transcripts.jsonl.gz")}
    assert debated == {q for q, a in accuracy.items() if a < 0.4} and len(debated) == kept < 24


@pytest.mark.parametrize("method", METHODS)
def test_every_method_debates_an_unlabelled_question(method):
    q = make_question("Open question?", ["x", "y", "z"])
    rec = run_question(q, SimPopulation(), DebateConfig(method=method, n_agents=3, rounds=2))
    assert rec["answer"] is None and rec["final"]["correct"] is None
    assert rec["final"]["oracle_any_agent_correct"] is None
    assert all(d["correct"] is None for d in rec.get("decisions", {}).values())
    assert all(r["correct"] is None for r in rec.get("runs", []))


# ----------------------------------------------------------------------------- empty replies, unparsed commitments
def test_empty_replies_fail_uncached_and_a_fixed_endpoint_is_asked_again(elsewhere, endpoint, capsys):
    """content null and tool-call-only replies are failed calls, never cached."""
    src = _write(elsewhere / "e.jsonl", ROWS[:2])
    argv = ["run", str(src), "--model", "fake-model", "--methods", "majority,acemad", "--rounds", "1"]
    endpoint.set_mode("empty")
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert re.search(r"\(4 records, 4 failed\)", out), out
    first = endpoint.count
    assert first > 0 and endpoint.modes["empty"] == first
    run = next(d for d in (elsewhere / "acemad_runs" / "runs" / "e").iterdir() if d.is_dir())
    errors = [r.get("error", "") for r in read_jsonl(run / "transcripts.jsonl.gz")]
    assert all("empty reply" in e for e in errors), errors
    assert any("content null" in e for e in errors) or any("tool call" in e for e in errors)
    endpoint.set_mode("ok")
    assert main(argv) == 0
    assert endpoint.count > first, "the fixed endpoint is asked again: nothing empty was cached"
    assert all(r["status"] == "ok" for r in read_jsonl(run / "transcripts.jsonl.gz"))


def test_a_rerun_on_a_warm_cache_sends_nothing_and_needs_no_endpoint(elsewhere, endpoint, capsys):
    """Not even the endpoint's check (GET /models) until a call the cache cannot answer; that one then stops the
    run in one line, its answered records kept."""
    src = _write(elsewhere / "w.jsonl", ROWS[:2])
    argv = ["run", str(src), "--model", "fake-model", "--methods", "majority,acemad", "--rounds", "1"]
    assert main(argv) == 0
    table = Path(re.findall(r"^table: +(\S+)", capsys.readouterr().out, flags=re.M)[0])
    first, runs = table.read_bytes(), elsewhere / "acemad_runs" / "runs"
    for mode in ("ok", "down"):
        shutil.rmtree(runs)  # no transcript left: every reply comes from the response cache
        endpoint.set_mode(mode)
        endpoint.targets.clear()
        assert main(argv) == 0 and endpoint.targets == [] and table.read_bytes() == first, mode
    assert main([*argv, "--seed", "1"]) == 1  # new calls, the endpoint down
    assert "cannot reach the model endpoint" in capsys.readouterr().err


def test_an_empty_row_in_an_old_cache_is_no_answer(tmp_path):
    cache = ResponseCache(tmp_path / "llm.sqlite")
    cache.put("k", {"text": "  "}, model="m", kind="openai")
    cache.put("ok", {"text": "an answer"}, model="m", kind="openai")
    with pytest.warns(UserWarning, match="dropped"):
        assert cache.get("k") is None
    assert cache.get("ok")["text"] == "an answer" and len(cache) == 1


def test_mostly_unparsed_commitments_exit_1_like_reproduce(elsewhere, endpoint, capsys):
    src = _write(elsewhere / "u.jsonl", ROWS[:2])
    endpoint.set_mode("unparseable")
    assert main(["run", str(src), "--model", "fake-model", "--methods", "majority"]) == 1
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "did not parse" in x)
    assert re.match(r"10 of 10 commitments \(100%\) did not parse after the repair call, more than the 50%", line)
    assert line.endswith(f"rerun with another --out: {elsewhere / 'acemad_runs'} keeps these records and their replies")
    endpoint.set_mode("ok")  # the endpoint fixed: the folder the line names still answers from its records
    assert main(["run", str(src), "--model", "fake-model", "--methods", "majority"]) == 1
    assert main(["run", str(src), "--model", "fake-model", "--methods", "majority", "--out", "fixed"]) == 0


# ----------------------------------------------------------------------------- per-role models
def test_role_models_reach_their_own_endpoint(elsewhere, endpoint, capsys):
    """AceMAD's Skeptic alone calls the second endpoint; the moderator role reaches Centralized MAD's moderator."""
    src = _write(elsewhere / "r.jsonl", ROWS[:2])
    with FakeOpenAI(FaultInjector(rate=0.0), models=["skeptic-model"]) as second:  # lists it: no model probe
        roles = ["--role-model", f"skeptic=skeptic-model@{second.url}", "--role-model", "moderator=mod-model"]
        argv = ["run", str(src), "--model", "fake-model", "--methods", "acemad,centralized", "--rounds", "2", *roles]
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "AceMAD (T=2; skeptic skeptic-model)" in out, out
    assert second.count == 2 * 2 * 2  # 2 questions x 2 rounds x (argue + commit) of the one Skeptic of 5
    assert {b["model"] for b in second.requests} == {"skeptic-model"}
    assert {b["model"] for b in endpoint.requests} == {"fake-model", "mod-model"}
    run = Path(re.search(r"^transcripts: +(\S+)", out, flags=re.M).group(1))
    assert "_roles-" in run.name
    # meta.json names the models each endpoint was asked for, the role's own endpoint its role's model
    shown = [e.get("model") for e in json.loads((run / "meta.json").read_text())["population"]["endpoints"]]
    assert shown == ["fake-model, mod-model", "skeptic-model"]


def test_failed_records_end_the_command_with_one_line_naming_the_error_and_that_a_rerun_retries_them(
    elsewhere, monkeypatch, capsys
):
    script = Refusing("Doomed")  # the second question's calls are refused until it heals
    doomed_row = {"question": "Doomed?", "options": ["a", "b"], "answer": "A", "benchmark": "other"}
    src = _write(elsewhere / "f.jsonl", [{**ROWS[1], "benchmark": "mine"}, doomed_row])  # a benchmark with no answer
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeOpenAI(script) as srv:
        argv = ["run", str(src), "--model", "fake-model", "--base-url", srv.url, "--methods", "acemad,majority"]
        argv += ["--rounds", "1", "--yes"]
        assert main(argv) == 1
        out, err = capsys.readouterr()
        err = err.strip().splitlines()[-1]
        assert "Majority Voting" in out and "(paired)" in out  # the table, the premise and the split rows
        assert err.startswith("2 of 4 records failed (AceMAD (T=1) 1, Majority Voting 1), left out of the table"), err
        assert "context length exceeded" in err and "Rerun the same command to retry them" in err
        script.on = False
        assert main(argv) == 0 and "failed (" not in capsys.readouterr().err


def test_challenging_with_failed_selection_calls_exits_1_naming_them(elsewhere, monkeypatch, capsys):
    src = _write(elsewhere / "c.jsonl", [ROWS[1], {"question": "Doomed?", "options": ["a", "b"], "answer": "A"}])
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeOpenAI(Refusing("Doomed")) as srv:
        argv = ["run", str(src), "--model", "fake-model", "--base-url", srv.url, "--challenging", "--yes"]
        assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("--challenging, the selection run (the naive agent, 5 runs per question): 1 of 2 records "
                          "failed (Single Agent 1); first error: BadRequestError")  # fmt: skip


def test_meta_json_says_the_structured_mode_the_commitments_were_answered_in_also_after_a_warm_rerun(
    elsewhere, monkeypatch
):
    """llama-cpp-python's server refuses json_schema: the commitments are asked as json_object, and meta.json says
    so (not the mode first tried), after the run, a resume that calls nothing, and a rerun from the cache."""

    def script(body, n):
        fmt = (body.get("response_format") or {}).get("type")
        if fmt == "json_schema":
            return error(500, LLAMA_CPP_PYTHON_500)
        return json.dumps({"p": {"A": 0.6, "B": 0.4}, "q": {"A": 0.5, "B": 0.5}}) if fmt else "I think A."

    src = _write(elsewhere / "m.jsonl", [{"question": "Q?", "options": ["a", "b"], "answer": "A"}])
    argv = ["run", str(src), "--model", "fake-model", "--methods", "acemad", "--rounds", "1", "--yes"]
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeOpenAI(script) as srv:
        argv += ["--base-url", srv.url]
        modes, asked = [], []
        for again in ("run", "resume", "warm"):
            assert main(argv) == 0
            asked.append(srv.count)
            (meta,) = elsewhere.glob("acemad_runs/runs/m/*/meta.json")
            modes.append([e.get("structured_output") for e in json.loads(meta.read_text())["population"]["endpoints"]])
            if again == "resume":  # the replies stay in the cache; the run is made again from them
                for f in meta.parent.glob("transcripts*"):
                    f.unlink()
    assert modes == [["json_object"]] * 3 and asked[0] > 0 and asked[0] == asked[2]  # the reruns ask nothing


def test_a_role_endpoint_that_is_down_stops_before_any_call(elsewhere, endpoint, capsys):
    src = _write(elsewhere / "r.jsonl", ROWS[:1])
    argv = ["run", str(src), "--model", "fake-model", "--role-model", "skeptic=x@http://127.0.0.1:9/v1", "--yes"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "127.0.0.1:9" in err and endpoint.count == 0, err
    for bad, message in (("critic=x", "role 'critic'"), ("skeptic=", "expected ROLE=NAME"),
                         ("skeptic=x@http://u:p@h/v1", "no user:password")):  # fmt: skip
        assert main(["run", str(src), "--model", "m", "--role-model", bad]) == 2
        assert message in capsys.readouterr().err


# ----------------------------------------------------------------------------- the estimate before run spends
def test_the_estimate_is_printed_first_and_is_what_is_sent(elsewhere, endpoint, capsys):
    src = _write(elsewhere / "c.jsonl", ROWS)
    argv = ["run", str(src), "--model", "fake-model", "--methods", "acemad,majority,centralized,single"]
    assert main(argv + ["--rounds", "2"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    calls = int(re.match(r"estimate: ([\d,]+) calls, .* unpriced \(fake-model; no price\), ~[\d.]+ min", first)
                .group(1).replace(",", ""))  # fmt: skip
    # + 1: the model check's one-token request (this fake, as llama.cpp, lists another name than the model)
    assert calls + 1 == endpoint.count, (first, endpoint.count)


TYPOS = [["--model", "typo-model"], ["--model", "served", "--role-model", "skeptic=typo-model"]]


@pytest.mark.parametrize("who", TYPOS, ids=["model", "role model"])
def test_a_model_the_endpoint_does_not_serve_stops_the_run_before_any_debate_call(elsewhere, capsys, monkeypatch, who):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeOpenAI(models=["served"]) as srv:
        argv = ["run", str(_write(elsewhere / "t.jsonl", ROWS[:2])), "--base-url", srv.url, *who]
        assert main(argv) == 2
        assert srv.unserved == ["typo-model"] and srv.count == 0  # the one-token check alone, refused
        assert [t for t in srv.targets if t.endswith("/models")] == ["/v1/models"]  # one listing read, both models
    (err,) = capsys.readouterr().err.splitlines()
    assert "does not serve the model 'typo-model'" in err and "lists served" in err, err


def test_the_model_check_s_one_token_probe_is_a_paid_call_under_max_usd(elsewhere, capsys, monkeypatch):
    """GET /models does not list the model: the probe that asks it is paid, so MAX_USD=0 refuses it too."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ACEMAD_MAX_USD", "0")
    with FakeOpenAI(models=["served"]) as srv:
        argv = ["run", str(_write(elsewhere / "t.jsonl", ROWS[:2])), "--base-url", srv.url, "--model", "gpt-4o-mini"]
        assert main(argv) == 1
        assert not [t for t in srv.targets if t.endswith("/chat/completions")], srv.targets
    assert "MAX_USD $0.00 reached" in capsys.readouterr().err


def test_a_paid_run_ends_with_what_it_paid_and_a_cached_rerun_pays_nothing(elsewhere, endpoint, capsys, monkeypatch):
    monkeypatch.delenv("ACEMAD_MAX_USD", raising=False)
    argv = ["run", str(_write(elsewhere / "paid.jsonl", ROWS)), "--model", "gpt-4o-mini", "--methods", "acemad"]
    assert main(argv) == 0
    [meta] = (elsewhere / "acemad_runs" / "runs").rglob("meta.json")
    usd = json.loads(meta.read_text())["summary"]["session"]["cost_usd"]  # what the client counted, call by call
    shown = "under $0.01" if usd < 0.005 else f"about ${usd:,.2f}"
    assert usd > 0 and f"paid: {shown} (the priced replies" in capsys.readouterr().out
    calls = endpoint.count
    assert main(argv) == 0 and endpoint.count == calls
    assert "paid:" not in capsys.readouterr().out  # every reply from the cache, no cap: nothing to say
    monkeypatch.setenv("ACEMAD_MAX_USD", "2")
    assert main(argv) == 0 and "paid: about $0.00 of MAX_USD $2.00" in capsys.readouterr().out
    monkeypatch.setenv("ACEMAD_MAX_USD", f"{usd:.6f}")  # a new seed's calls: the cap stops the run, which says so
    assert main([*argv, "--seed", "1"]) == 1
    *_, stop, paid = capsys.readouterr().err.strip().splitlines()
    assert "MAX_USD" in stop and re.match(rf"paid: (about \$[\d.]+|under \$0\.01) of MAX_USD \${usd:,.2f}", paid)


def test_a_run_on_an_unpriced_model_says_its_replies_were_not_counted(elsewhere, endpoint, capsys, monkeypatch):
    """Without a cap an unpriced model runs; its last line must not read as if it cost nothing."""
    monkeypatch.delenv("ACEMAD_MAX_USD", raising=False)
    argv = ["run", str(_write(elsewhere / "u.jsonl", ROWS[:2])), "--model", "fake-model", "--methods", "acemad"]
    assert main(argv) == 0
    paid = [x for x in capsys.readouterr().out.splitlines() if x.startswith("paid:")]
    assert paid == [
        "paid: not known: the replies of 'fake-model' stored since this command started have no price to count"
    ], paid
    assert main(argv) == 0 and "paid:" not in capsys.readouterr().out  # the rerun reads the cache: nothing paid


def test_a_large_run_asks_first_and_refuses_without_a_terminal(elsewhere, endpoint, capsys, monkeypatch):
    src = _write(elsewhere / "big.jsonl", ROWS[:1])
    argv = ["run", str(src), "--model", "gpt-4o-mini", "--methods", "acemad", "--agents", "100", "--rounds", "50"]
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(argv) == 2
    out, err = capsys.readouterr()
    wall = (
        f"~{10_000 * CALL_SECONDS / 8 / 60:.1f} min at {CALL_SECONDS:g} s per call and 8 in flight, "
        f"~{10_000 * CALL_SECONDS / 3600:.1f} h one at a time"
    )  # a single local server's queue
    assert (
        re.match(
            r"estimate: 10,000 calls, [\d.,]+ M tokens, \$[\d,]+\.\d\d \(arguments of ~136 tokens\), about \$", out
        )
        and wall in out
    ), out
    assert err.strip().splitlines() == [
        "error: the estimate is above $1 or 2,000 calls and stdin cannot answer; add --yes to run it (nothing was sent)"
    ]
    terminal = io.StringIO("n\n")
    terminal.isatty = lambda: True
    monkeypatch.setattr("sys.stdin", terminal)
    assert main(argv) == 2
    assert "send these calls? [y/N]" in capsys.readouterr().err and endpoint.count == 0


def test_a_fitted_estimate_agrees_with_the_replay():
    """Above DIRECT_MAX agents x rounds the estimate is fitted from smaller replays: within 1% of the replay."""
    qs = [make_question(f"Q{i}: which colour is a clear sky?", ["red", "green", "blue"], answer="C") for i in range(3)]
    for method in ("acemad", "centralized"):
        cfgs = api.configs([method], rounds=6, agents=8, roles={"skeptic": "other"} if method == "acemad" else None)
        replayed = E.estimate_run(qs, cfgs, "gpt-4o-mini")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(E, "DIRECT_MAX", 0)
            fitted = E.estimate_run(qs, cfgs, "gpt-4o-mini")
        assert fitted.calls == pytest.approx(replayed.calls, rel=1e-6)
        assert fitted.prompt_tokens == pytest.approx(replayed.prompt_tokens, rel=0.01)
        assert fitted.unpriced == replayed.unpriced == (["other"] if method == "acemad" else [])


def test_the_estimates_second_figure_covers_a_run_whose_arguments_all_reach_their_cap(elsewhere, monkeypatch):
    """Every argument as long as its max_tokens allows, tokens counted as the token model counts them: the run costs
    more than the first figure (~136-token arguments) and no more than the second."""
    debater, pad = (
        FaultInjector(rate=0.0),
        " Checking each option against what is known rules out the popular one." * 40,
    )

    def at_the_cap(body, n):
        content = debater(body, n).content
        obj = json.loads(content) if content.startswith("{") else None
        if obj is None or "argument" in obj:  # a free-text argument, or one inside the commitment's JSON
            content = (content + pad)[: E.MOST_ARG_CHARS] if obj is None else json.dumps(
                obj | {"argument": (obj["argument"] + pad)[: E.MOST_ARG_CHARS]})  # fmt: skip
        return Reply(content, prompt_tokens=prompt_tokens(body["messages"]), completion_tokens=tokens(content))

    qs = [make_question(f"Q{i}: which colour is a clear sky?", ["red", "green", "blue"], answer="C") for i in range(3)]
    est = api.estimate(qs, "acemad,majority", model="gpt-4o-mini")
    with FakeOpenAI(at_the_cap) as srv:
        res = api.run(qs, "acemad,majority", model="gpt-4o-mini", base_url=srv.url, out=elsewhere)
    paid = res.meta["summary"]["session"]["cost_usd"]
    assert est.usd < paid <= est.most_usd, (est.line(), paid)


def test_the_estimate_the_docs_quote_is_the_one_printed():
    block = doc_blocks("Try it on your task")[0]
    rows = [json.loads(x) for x in block.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0].splitlines()]
    line = api.estimate(rows, "acemad,majority", model="gpt-4o-mini").line()
    quoted = " ".join(DOC.read_text(encoding="utf-8").split("gpt-4o-mini`: `", 1)[1].split("`", 1)[0].split())
    assert line.startswith(quoted), (quoted, line)


# ----------------------------------------------------------------------------- question lists and odd files
def test_duplicate_ids_in_a_run_question_list(tmp_outputs):
    """A question listed twice is an error before anything is written, not a silent overwrite (repeats= is the way)."""
    items = make_items(4, k=4, seed=1)
    cfg = DebateConfig(method="majority", n_agents=3)
    with pytest.raises(ValueError) as e:
        run_experiment("dupes", items + [items[1]], [cfg], SimPopulation(seed=0), progress=False)
    assert str(e.value) == (
        f"experiment 'dupes': question id {items[1].id!r} is at positions 1 and 4 of the question "
        "list; each question may appear once"
    )
    assert not list(tmp_outputs.rglob("transcripts.jsonl*")) and not list(tmp_outputs.rglob("meta.json"))
    run_experiment("dupes", items, [cfg], SimPopulation(seed=0), repeats=2, progress=False)  # the right way


# ----------------------------------------------------------------------------- any dataset by its columns
def test_a_defective_row_stops_the_column_route_unless_skipped(elsewhere, capsys):
    rows = [{"question_id": i, "question": f"Q{i}?", "options": ["a", "b", "c"], "answer": "B"} for i in range(3)]
    rows[1]["options"] = ["a", "a", "c"]  # as MMLU-Pro's test item 8584: an option repeated
    src = _write(elsewhere / "mmlu.jsonl", rows)
    argv = ["run", str(src), "--choices-col", "options", "--answer-col", "answer", "--id-col", "question_id"]
    assert main([*argv, "--synthetic", "--methods", "majority"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {src}, line 2: field 'options' repeats an option text; each option must differ", err
    assert main([*argv, "--synthetic", "--methods", "majority", "--skip-invalid"]) == 0
    out = capsys.readouterr().out
    assert f"--skip-invalid: left out 1 row(s) that fail the checks, first: {src}, line 2: field 'options'" in out
    assert "(2 records, 0 failed)" in out


#: One made-up row in each published shape (never a benchmark item): ARC-Challenge (allenai/ai2_arc), MMLU-Pro
#: (TIGER-Lab/MMLU-Pro) and TruthfulQA multiple_choice (truthful_qa), with the columns the docs name for them.
SHAPES = {
    "arc": (
        {"id": "a1", "question": "Which melts first in the sun?", "answerKey": "2",
         "choices": {"text": ["a rock", "an ice cube", "a nail"], "label": ["1", "2", "3"]}},
        dict(question="question", choices="choices", answer="answerKey", id="id"), ("a1", "2", ["1", "2", "3"]),
    ),
    "mmlu_pro": (
        {"question_id": 12, "question": "Which number is even?", "options": ["3", "5", "8", "9"], "answer": "C",
         "answer_index": 2, "cot_content": "", "category": "math", "src": "made-up"},
        dict(question="question", choices="options", answer="answer_index", id="question_id"),
        ("12", "C", list("ABCD")),
    ),
    "truthfulqa": (
        {"question": "Can a goldfish remember things for months?",
         "mc1_targets": {"choices": ["Yes, for months.", "No, only for three seconds."], "labels": [1, 0]},
         "mc2_targets": {"choices": ["Yes, for months.", "Yes.", "No."], "labels": [1, 1, 0]}},
        dict(question="question", choices="mc1_targets"), (None, "A", ["A", "B"]),
    ),
}  # fmt: skip


def _write_shape(path: Path, rows: list) -> Path:
    if path.suffix == ".jsonl":
        return _write(path, rows)
    df = pd.DataFrame(rows)
    if path.suffix == ".parquet":
        df.to_parquet(path)
    else:  # CSV: nested columns written out as JSON, as pandas' to_csv of a JSON-decoded frame
        df.map(lambda v: json.dumps(v) if isinstance(v, (dict, list)) else v).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_published_shapes_by_their_columns(tmp_path, shape, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (pip install pyarrow)")
    row, cols, (qid, gold, labels) = SHAPES[shape]
    if suffix == ".csv" and isinstance(row.get("answer_index"), int):
        cols = dict(cols, answer="answer")  # every CSV cell is text: the letter column (docs/own-questions.md)
    (q,) = own.read_columns(_write_shape(tmp_path / f"{shape}{suffix}", [row]), **cols)
    assert q.question == row["question"] and list(q.options) == labels and q.answer == gold
    assert q.id == (qid or own.content_id(q.question, q.options))


@pytest.mark.parametrize(
    "shape,cols,pattern",
    [
        ("arc", dict(choices="choice"), r"line 1: no column 'choice' \(--choices-col\); the row has \['id', 'que"),
        ("arc", dict(choices="choices", answer="key"), r"line 1: no column 'key' \(--answer-col\)"),
        ("arc", dict(choices="choices", answer="answerKey", id="nope"), r"line 1: no column 'nope' \(--id-col\)"),
        ("arc", dict(question="question.stem", choices="choices"), r"no column 'question.stem' \(--question-col\)"),
        ("arc", dict(choices="id"), r"line 1: field 'options' must be a list of texts or a label -> text map"),
        ("truthfulqa", dict(choices="mc2_targets"), r"line 1: column 'mc2_targets' marks 2 choices correct; AceMAD "
         r"scores one answer per question \(a multi-answer target such as TruthfulQA's mc2_targets: use mc1_targ"),
        ("arc3", dict(choices="choices"), r"line 1: column 'choices': its labels must be one distinct label per ch"),
        ("arc2", dict(choices="choices"), r"line 1: column 'choices': its labels must be one distinct label per ch"),
        ("arc", dict(choices="choices", id="null_id"), r"line 1: --id-col 'null_id': an id must be text or a whole"),
        ("arc", dict(choices="choices", id="float_id"), r"line 1: --id-col 'float_id': an id must be text or a whol"),
    ],
)  # fmt: skip
def test_a_wrong_column_is_one_line_naming_it(tmp_path, shape, cols, pattern):
    row = dict(SHAPES["arc" if shape.startswith("arc") else shape][0], null_id=None, float_id=1.0)
    if shape != "arc":  # ARC's two lists of unequal length, or a label given twice: no option may vanish or move
        row["choices"] = {"text": ["x", "y", "z"], "label": ["A", "B"] if shape == "arc2" else ["A", "A", "B"]}
    path = _write_shape(tmp_path / "rows.jsonl", [row] * 2)
    with pytest.raises(DataError, match=pattern) as e:
        own.read_columns(path, **cols)
    assert "\n" not in str(e.value) and str(e.value).startswith(f"{path}, ")


def test_nested_columns_option_columns_and_index_answers(tmp_path):
    """ARC's original nesting (question.stem, a list of {text, label}), one column per option, 0-based indexes."""
    choices = [{"text": "one", "label": "A"}, {"text": "two", "label": "B"}]
    arc = {"id": "x", "answerKey": "B", "question": {"stem": "Pick two?", "choices": choices}}
    (q,) = own.read_columns(_write(tmp_path / "o.jsonl", [arc]), "question.stem", "question.choices", "answerKey", "id")
    assert (q.question, q.options, q.answer) == ("Pick two?", {"A": "one", "B": "two"}, "B")
    csv = tmp_path / "cols.csv"
    csv.write_text("q,A,B,C,gold\nWhich?,x,y,,y\n", encoding="utf-8")
    (q,) = own.read_columns(csv, "q", "A,B,C", "gold")
    assert q.options == {"A": "x", "B": "y"} and q.answer == "B"
    bad = _write(tmp_path / "i.jsonl", [{"question": "q?", "options": ["a", "b"], "answer_index": 2}])
    with pytest.raises(DataError, match=r"line 1: answer index 2 is outside the 2 options \(0-based\)"):
        own.read_columns(bad, choices="options", answer="answer_index")


def test_parquet_without_an_engine_says_what_to_install(tmp_path, monkeypatch):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed: its import fails
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DataError, match=r"x\.parquet: reading Parquet needs pyarrow: pip install pyarrow"):
        own.read_columns(path, choices="options")


def test_a_parquet_file_without_its_columns_named_is_told_to_name_them(tmp_path, capsys):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1")
    assert main(["run", str(path), "--synthetic"]) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert "x.parquet: a .parquet file is read by its columns: add --choices-col" in err, err


def test_the_viewer_page_of_an_api_run_goes_beside_the_run_and_shows_its_questions(elsewhere):
    """viewer_page(results) without `out` finds the run where `run` put it (not the default folder), and its page
    carries the question text stored with the run; the Single Agent's mark (over half its runs right) is explained."""
    qs = [own.make_question(f"Which colour is {c}?", ["red", "blue", "green"], answer="A", id=f"q{i}") for i, c in
          enumerate(("ruby", "cherry"))]  # fmt: skip
    res = api.run(qs, ["acemad", "single"], synthetic=True, out=elsewhere / "mine", name="colours")
    page = api.viewer_page(res)
    assert page.is_relative_to(elsewhere / "mine" / "viewer") and not (elsewhere / "acemad_runs").exists()
    html = page.read_text(encoding="utf-8")
    assert "Which colour is ruby?" in _page_text(html) and "not recorded in this run" not in _page_text(html)
    assert "Single Agent" in html and "a record is the share of its runs that were right" in html


def test_the_viewer_command_names_a_run_not_made_in_one_line_and_creates_nothing(tmp_path):
    env = {**os.environ, "ACEMAD_ROOT": str(tmp_path)}
    env.pop("ACEMAD_SMOKE", None)
    for arg, says in (("default/mian", "error: no run 'default/mian'"), ("--help", "usage: python -m")):
        p = subprocess.run([sys.executable, "-m", "acemad_utils.report.viewer", arg], env=env, capture_output=True,
                           text=True, timeout=120)  # fmt: skip
        assert p.returncode == 1 and p.stderr.strip().splitlines() == [p.stderr.strip()], p.stderr
        assert p.stderr.startswith(says), p.stderr
    assert not (tmp_path / "outputs").exists()


def _page_text(html: str) -> str:
    """Every debate fragment of a run page, decoded from its embedded blocks."""
    blocks = re.findall(r'id="acemad-part-\d+">([^<]+)</script>', html)
    return "".join("".join(json.loads(zlib.decompress(base64.b64decode(b)))) for b in blocks)


def test_two_threads_with_different_out_folders_are_refused_not_mixed(elsewhere):
    """The output folder is process-wide (the run's own threads read it): a second thread's run with another `out`
    while the first runs would write into the first's folder, so it is refused in one line; the first is unharmed."""
    inside, release, errors = threading.Event(), threading.Event(), []

    def hold():
        with outputs_root(elsewhere / "one"):
            inside.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(30)
    try:
        api.run(_three_questions(), ["majority"], synthetic=True, out=elsewhere / "two", name="two")
    except RuntimeError as e:
        errors.append(str(e))
    finally:
        release.set()
        t.join()
    assert errors and errors[0].startswith("another thread of this process is running with out=")
    assert not (elsewhere / "one" / "runs").exists() and not (elsewhere / "two" / "runs").exists()
    res = api.run(_three_questions(), ["majority"], synthetic=True, out=elsewhere / "two", name="two")  # then it runs
    assert res.run_dir.is_relative_to(elsewhere / "two")


def _three_questions():
    return [own.make_question(f"Item {i}: which?", ["a", "b", "c"], answer="A", id=f"t{i}") for i in range(3)]


def test_metadata_is_kept_in_the_run_folder_and_must_be_json(elsewhere):
    q = own.make_question("Which?", ["a", "b"], answer="A", id="m1", metadata={"source": "exam 3", "year": 2024})
    res = api.run([q], ["majority"], synthetic=True, out=elsewhere / "o", name="meta")
    assert json.loads((res.run_dir / "questions.json").read_text())["m1"]["metadata"] == {"source": "exam 3",
                                                                                          "year": 2024}  # fmt: skip
    with pytest.raises(ValueError, match="field 'metadata' must hold JSON values only"):
        own.make_question("Which?", ["a", "b"], metadata={"when": datetime.date(2024, 1, 1)})


def test_numpy_integers_are_whole_numbers_and_a_run_without_gold_answers_splits_to_nothing(elsewhere):
    """A sweep over np.arange passes numpy integers; questions without a gold answer have no gain to split."""
    qs = [own.make_question(f"Which {i}?", ["a", "b", "c"], id=f"g{i}") for i in range(3)]
    res = api.run(qs, ["acemad"], synthetic=True, out=elsewhere / "o", rounds=np.int64(2), agents=np.int32(3),
                  seed=np.int64(1), workers=np.int64(2))  # fmt: skip
    assert res.run_dir.name.endswith("-seed1") and {r.record["config_hash"] for r in res}
    assert res.split().empty and res.table().empty
