"""The debate viewer: one record as HTML, examples picked by rule, the static page of a run."""

from __future__ import annotations

import base64
import json
import re
import shutil
import zlib
from pathlib import Path

import pytest
from IPython.display import HTML
from nbconvert.filters.strings import clean_html

from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data import transcripts
from acemad_utils.experiments import runner
from acemad_utils.experiments.runner import failed_record
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.report import viewer as V

ITEMS = make_items(12, k=4, seed=3)
CELL = re.compile(r'<td class="acemad-cell[ "]')


def record(method="acemad", q=ITEMS[0], **kw):
    return run_question(q, SimPopulation(seed=1), DebateConfig(method=method, **kw))


@pytest.mark.parametrize(
    "method, n, t, extra",
    [("acemad", 5, 3, "weighted (AceMAD weights)"), ("acemad", 4, 2, "score "), ("acemad", 3, 5, "score "),
     ("single", 5, 1, "runs correct"), ("majority", 5, 1, "plurality decides"), ("decentralized", 5, 3, "mean belief"),
     ("centralized", 5, 3, "the moderator decides"), ("sparse", 5, 3, "mean belief")],
)  # fmt: skip
def test_every_method_renders_n_by_t_cells_and_marks_the_correct_answer(method, n, t, extra):
    acemad = method == "acemad"
    rec = record(method, **({"n_agents": n, "rounds": t} if acemad else {}))
    html = V.debate_html(rec)
    assert f'<div class="acemad-debate" data-agents="{n}" data-rounds="{t}"' in html
    assert len(CELL.findall(html)) == n * t and extra in html
    assert html.count('<td class="ad-mod') == (t if method == "centralized" else 0)
    assert f'class="ad-ok acemad-answer">{rec["answer"]}<' in html
    assert html.count("<b>*") == n * t + html.count('<td class="ad-mod')  # one bold, starred line per cell
    assert (html.count("score ") == n * t) if acemad else "score " not in html  # only AceMAD has scores


def test_final_round_weighted_answer_is_the_methods_decision():
    for q in ITEMS:
        rec = record(q=q)
        html = V.debate_html(rec, {"methods": {rec["method"]: {"seed": 0, "weight_exponent": 2.0}}})
        last = re.findall(r'<td class="ad-weighted"><span class="ad-(?:ok|bad)">(\w+) ', html)[-1]
        assert last == rec["final"]["answer"]


def test_parse_failure_is_flagged_escaped_and_never_votes():
    rec = record(n_agents=3, rounds=2)
    rec["rounds"][0][1].update(parse_failure=True, p=[0.25] * 4, message="<script>alert(1)</script> I cannot decide")
    html = V.debate_html(rec)
    assert html.count("ad-pf") == 1 and html.count("parse failure") == 1
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    rec = record(method="decentralized", n_agents=3, rounds=1)
    for e in rec["rounds"][0]:
        e["parse_failure"] = True
    html = V.debate_html(rec)  # nobody parsed: no round answer, plurality nor weighted
    assert all(f'<td class="ad-{c}"><span class="ad-bad">none</span>' in html for c in ("plur", "weighted"))


def test_short_arguments_show_whole_long_ones_fold():
    rec = record(n_agents=2, rounds=1)
    rec["rounds"][0][0]["message"] = "The answer is: C."
    rec["rounds"][0][1]["message"] = "Because " + "x" * 200
    html = V.debate_html(rec, fold=True)  # the run page's markup
    assert '<div class="ad-short">The answer is: C.</div>' in html
    assert html.count("<details>") == 1 and "x" * 200 in html
    plain = V.debate_html(rec)  # the notebook's: no <details> (sanitizers drop it), the first CLIP characters
    assert "<details>" not in plain and "x" * (V.CLIP - 10) in plain and "x" * 200 not in plain


# What nbconvert's sanitizer (clean_html), JupyterLab's untrusted sanitizer and a code host's renderer all keep.
SAFE_TAGS = {"div", "span", "b", "i", "pre", "table", "tr", "td", "ul", "li"}


@pytest.mark.parametrize("method", ["acemad", "single", "centralized"])
def test_notebook_view_needs_no_script_svg_or_style(method):
    rec = record(method)
    rec["question"] = {"text": "Which <b>one</b>?", "options": [["A", "<script>x</script>"], ["B", "b"]]}
    html = V.debate_html(rec)
    tags = set(re.findall(r"<([a-z]+)", html))
    assert tags <= SAFE_TAGS, tags - SAFE_TAGS
    assert " style=" not in html
    clean = clean_html(html)  # keeps every tag but the <tbody> HTML parsing inserts, and every number
    escaped = re.findall(r"&lt;(/?[a-z]+)", re.sub(r"&lt;/?tbody&gt;", "", clean))
    assert len(escaped) == len(re.findall(r"&lt;(/?[a-z]+)", html)), escaped  # the question's own text only
    assert clean.count("<pre") == html.count("<pre") > 0 and re.search(r"[█▏▎▍▌▋▊▉]+[ \xa0]+\.\d\d", clean)
    assert "Which &lt;b&gt;one&lt;/b&gt;?" in html and "&lt;script&gt;x&lt;/script&gt;" in html


def test_bars_are_text_in_eighths_of_one_width_without_breakable_spaces():
    assert [V.bar(x, 4) for x in (0, 1, 0.5, 0.03, 0.07)] == ["    ", "████", "██  ", "▏   ", "▎   "]
    for pre in re.findall(r'<pre class="ad-bars">(.*?)</pre>', V.debate_html(record(n_agents=2, rounds=1)), re.S):
        lines = re.sub(r"</?b>", "", pre).split("\n")
        assert len({len(x) for x in lines}) == 1, lines  # one width: right-aligned cells keep the columns
        assert not any(" " in x for x in lines), lines  # no breakable space: JupyterLab wraps a <pre>


def test_source_label_failed_records_and_the_notebooks_html_object():
    bad = failed_record(ITEMS[0], DebateConfig(method="acemad"), SimPopulation(seed=1), 0, RuntimeError("HTTP 503 <x>"))
    html = V.debate_html(bad)
    assert 'data-agents="0" data-rounds="0"' in html and "status failed" in html and "HTTP 503 &lt;x&gt;" in html
    with pytest.raises(ValueError):
        V.debate_html({"rounds": []})
    rec = record()
    assert V.source_of(rec) == V.SYNTHETIC_LABEL
    meta = {"population": {"synthetic": False, "model": "gpt-4o-mini"}, "model": "gpt-4o-mini", "synthetic": False}
    assert V.source_of(rec, meta) == "model: gpt-4o-mini"
    assert isinstance(V.show(rec), HTML) and V.show(rec).data == V.debate_html(rec)


def hand(qid, r1, final_correct, method="M", status="ok"):
    """Round-1 answers `r1` (labels) over options A-C, truth A."""
    onehot = {"A": [0.8, 0.1, 0.1], "B": [0.1, 0.8, 0.1], "C": [0.1, 0.1, 0.8]}
    rounds = [[{"agent": i, "p": onehot[a], "q": None, "parse_failure": False, "message": a} for i, a in enumerate(r1)]]
    final = {"answer": "A" if final_correct else "B", "correct": final_correct}
    return {"question_id": qid, "method": method, "labels": ["A", "B", "C"], "answer": "A", "status": status,
            "final": final, "rounds": rounds}  # fmt: skip


def test_pick_examples_follows_its_rule():
    recs = [
        hand("q3", "BBA", True),  # overturned
        hand("q1", "BCC", True),  # overturned (first by id)
        hand("q2", "BBA", False),  # not overturned
        hand("q4", "AAB", True),  # round-1 plurality already right: neither
        hand("q5", "AAB", False),  # right then wrong: neither
        hand("q0", "BBB", True, status="failed"),  # failed: never an example
        hand("q0", "BBB", True, method="other"),  # another method
    ]
    got = V.pick_examples(recs, "M", n=2)
    assert [r["question_id"] for r in got["overturned"]] == ["q1", "q3"]
    assert [r["question_id"] for r in got["not_overturned"]] == ["q2"]
    assert [r["question_id"] for r in V.pick_examples(recs, "M")["overturned"]] == ["q1"]
    assert V.pick_examples(recs, "other") == {"overturned": [recs[-1]], "not_overturned": []}
    assert V.pick_examples([hand("q9", "AAA", True)], "M") == {"overturned": [], "not_overturned": []}
    with pytest.raises(ValueError, match="no record of method 'X'"):  # a notebook's reader sees this line
        V.pick_examples(recs, "X")
    with pytest.raises(ValueError):
        V.pick_examples(recs, "M", n=0)


ROW = re.compile(r'<tr tabindex="0" data-m="(\d+)" data-b="\d+" data-o="(\d?)" data-k="(\d+)"><td>([^<]*)')
PART = re.compile(r'<script type="application/octet-stream" id="acemad-part-(\d+)">(.*?)</script>')


def read_page(page: str) -> tuple[list, list]:
    """What the page's JS reads: the listed rows (question id as shown, outcome) and each row's fragment."""
    parts = {int(m): json.loads(zlib.decompress(base64.b64decode(b))) for m, b in PART.findall(page)}
    rows = ROW.findall(page)
    return [(qid, o) for _, o, _, qid in rows], [parts[int(m)][int(k)] for m, _, k, _ in rows]


def test_run_page_embeds_every_record_and_loads_nothing_from_the_network(smoke_outputs):
    cfgs = [DebateConfig(method=m) for m in ("single", "majority", "centralized", "acemad")]
    runner.run_experiment("t/main", ITEMS[:6], cfgs, SimPopulation(seed=2), workers=1)
    meta, records = transcripts.load_run("t/main")
    path = V.write_run_page("t/main")
    assert path == smoke_outputs / "outputs" / "smoke" / "viewer" / "t" / "main.html"
    page = path.read_text(encoding="utf-8")
    rows, pages = read_page(page)
    order = {m: i for i, m in enumerate(meta["methods"])}
    records.sort(key=lambda r: (order[r["method"]], r["question_id"], r["repeat"]))
    assert len(records) == 6 * 4
    # the page shows exactly the fragments the notebook draws (long arguments folded), listed in the same order
    assert pages == [V.debate_html(r, meta, fold=True) for r in records]
    assert rows == [(r["question_id"], str(int(r["final"]["correct"] > 0.5))) for r in records]
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page and V.SYNTHETIC_LABEL in page
    q = next(q for q in ITEMS if q.id == records[0]["question_id"])  # the question, from the run's side file
    assert q.question in pages[0] and "Synthetic item (generated text" in pages[0]
    assert all(f"<b>{k}.</b> {v}" in pages[0] for k, v in q.options.items())
    assert "not recorded in this run" in V.debate_html(records[0])  # no meta: no run to read it from
    for bad in ("../x", "/abs/run", ""):
        with pytest.raises(ValueError):
            V.page_path(bad)
    with pytest.raises(FileNotFoundError):
        V.write_run_page("absent")


# Reply texts that end or reopen a <script> element, or a JS line, if embedded as they are.
HOSTILE = [
    "<!--<script>",
    "a <script>alert(1)</script> b",
    "</script><script>document.title='owned'</script>",
    "]]> <![CDATA[ x",
    "line\u2028separator\u2029paragraph",
    "<!-- unclosed comment <script type=text/javascript>",
]


def hostile_run(name: str) -> list[dict]:
    """A saved run whose replies (and a question id) hold every HOSTILE text."""
    recs = []
    for i, (q, text) in enumerate(zip(make_items(len(HOSTILE), k=4, seed=5), HOSTILE)):
        rec = run_question(q, SimPopulation(seed=2), DebateConfig(method="acemad", n_agents=3, rounds=2))
        rec["rounds"][0][i % 3]["message"] = text
        rec["rounds"][1][0]["message"] = text * 40  # a long one: folded in <details>
        recs.append(rec)
    recs[0]["question_id"] = "q<!--<script>"  # ids are shown in the list too
    d = runner.run_dir(name)
    (d / "meta.json").write_text(json.dumps({"methods": {"AceMAD (T=2)": {"config_hash": recs[0]["config_hash"]}}}))
    (d / "transcripts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return recs


def test_run_page_survives_any_reply_text(smoke_outputs):
    recs = hostile_run("t/hostile")
    page = V.write_run_page("t/hostile").read_text(encoding="utf-8")
    rows, pages = read_page(page)
    assert [qid for qid, _ in rows] == [V.esc(r["question_id"]) for r in recs] and len(pages) == len(recs)
    for html, r in zip(pages, recs):  # every reply comes back, escaped
        assert all(V.esc(e["message"]) in html for rd in r["rounds"] for e in rd)
    assert not any(text in page for text in HOSTILE)  # no hostile text raw anywhere: escaped or inside base64
    assert "<!--" not in page and page.count("</script>") == 1 + len(PART.findall(page)) == 2


def test_run_page_is_rebuilt_only_when_its_run_or_the_viewer_changed(smoke_outputs, monkeypatch):
    cfgs = [DebateConfig(method="acemad")]
    runner.run_experiment("t/stamp", ITEMS[:4], cfgs, SimPopulation(seed=2), workers=1)
    path = V.write_run_page("t/stamp")
    first, written = path.read_bytes(), (path.stat().st_ino, path.stat().st_mtime_ns)
    assert V.write_run_page("t/stamp", loaded=transcripts.load_run("t/stamp")) == path
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == written  # same run, same code: the file is not rewritten
    shutil.rmtree(transcripts.run_dir("t/stamp"))  # the run redone with two more questions
    runner.run_experiment("t/stamp", ITEMS[:6], cfgs, SimPopulation(seed=2), workers=1)
    V.write_run_page("t/stamp")
    assert len(read_page(path.read_text(encoding="utf-8"))[1]) == 6 and path.read_bytes() != first
    again = path.read_bytes()
    monkeypatch.setattr(V, "_CODE", [*V._CODE, Path(runner.__file__)])  # "the code changed"
    V.write_run_page("t/stamp")
    stamp = re.compile(rb'content="[0-9a-f]{64}"')
    assert path.read_bytes() != again and stamp.sub(b"", path.read_bytes()) == stamp.sub(b"", again)
