"""In headless Chromium (the system's, by playwright-python; skipped, saying why, without either): a fresh clone's
`make lab` runs notebooks 03 and 05 (smoke mode) and shows the stored notebooks untrusted, as nbconvert's sanitized
HTML does, with their debate views, figures and captions, and saves them leaving `git status` clean; the run viewer
page opens a debate. Screenshots go to outputs/smoke/. The clone stores 03, 05 and 07 run in smoke mode, as `make
notebooks` does; ACEMAD_READER_COMMITTED=1 reads the committed notebooks instead (after `make notebooks`)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from acemad_utils.agents.local_server import free_port, stop
from acemad_utils.data import paths as P

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = os.environ.get("ACEMAD_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
RUN = ["03_main_results.ipynb", "05_ablation.ipynb"]  # run in JupyterLab: 03 has the debate views, 05 a figure
READER = ["03_main_results.ipynb", "05_ablation.ipynb", "07_other_models.ipynb"]  # debates, Figure 4, paper tables
SHOTS = P.root() / "outputs" / "smoke"
BARS = re.compile(r"[█▏▎▍▌▋▊▉]+[ \xa0]+(\.\d\d|1\.0)")  # a debate view's text bar and its number (no-break spaces)
# the throw-away server's settings: every cell in the DOM (no windowing: outputs far down are counted), no autosave
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}
FIGURE_CELL = re.compile(r"\bsave_figure\(")


def _until(condition, seconds: float, what: str):
    """condition()'s first truthy value, polled for at most `seconds` (a server or a file that cannot notify)."""
    deadline = time.monotonic() + seconds
    while not (got := condition()):
        assert time.monotonic() < deadline, what()
        time.sleep(0.2)
    return got


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, or a skip naming what is missing."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install -y chromium; .ci/run does it as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright-python is not installed (pip install -e '.[test]')")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    yield ctx.new_page()
    ctx.close()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """(a fresh clone whose notebooks carry stored outputs, the names of those notebooks)."""
    from acemad_utils.reproduce import nbtools

    repo = tmp_path_factory.mktemp("clone") / "acemad"
    subprocess.run(["git", "clone", "-q", str(P.ROOT), str(repo)], check=True)
    nbs = sorted((repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    names = [p.name for p in nbs if nbtools.has_outputs(json.loads(p.read_text()))]
    if names or os.environ.get("ACEMAD_READER_COMMITTED") == "1":
        if not names:
            pytest.skip("the committed notebooks have no outputs: run `make notebooks`, commit them, then rerun")
        return repo, names
    env = {**os.environ, "PYTHONPATH": str(repo), "ACEMAD_ROOT": str(repo), "ACEMAD_SMOKE": "1", "ACEMAD_PROGRESS": "0"}
    # one at a time: side by side, two notebooks build the same subset in a fresh clone
    run = [sys.executable, "-m", "acemad_utils.reproduce", "--profile", "default", "--jobs", "1", "--only"]
    subprocess.run(run + [Path(n).stem for n in READER], cwd=repo, env=env, check=True, capture_output=True)
    executed = repo / "outputs" / "smoke" / "notebooks" / "default"
    store = [sys.executable, "-m", "acemad_utils.reproduce.nbtools", "store", "--executed", str(executed)]
    out = subprocess.run(store + [f"notebooks/{n}" for n in READER], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qam", "stored outputs (test)")
    return repo, READER


@pytest.fixture(scope="module")
def lab(clone, tmp_path_factory):
    """JupyterLab by `make lab`'s recipe in the clone: a free loopback port, a random token, throw-away settings and
    data dirs (nothing trusted), kernels in smoke mode writing under "root"."""
    repo, tmp = clone[0], tmp_path_factory.mktemp("lab")
    for rel, value in SETTINGS.items():
        (tmp / "settings" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "settings" / rel).write_text(json.dumps(value))
    port, token, venv = free_port(), secrets.token_hex(16), Path(sys.executable).parent.parent
    recipe = ["make", "-s", "-n", "-o", f"{venv}/.base", "lab", f"VENV={venv}", f"LAB_PORT={port}"]
    command = subprocess.run(recipe, cwd=repo, check=True, capture_output=True, text=True).stdout
    args = ["--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
    args += [f"--LabApp.user_settings_dir={tmp / 'settings'}", f"--LabApp.workspaces_dir={tmp / 'workspaces'}"]
    env = {**os.environ, **{f"JUPYTER_{k}_DIR": str(tmp / k.lower()) for k in ("CONFIG", "RUNTIME", "DATA")}}
    env.update(ACEMAD_SMOKE="1", ACEMAD_ROOT=str(tmp / "root"))
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(command.replace("\\\n", " ").split() + args, env=env, stdout=log, stderr=log, cwd=repo)
    base = f"http://127.0.0.1:{port}"

    def get(path: str):
        try:
            with urllib.request.urlopen(f"{base}{path}?token={token}", timeout=5) as r:
                return json.loads(r.read())
        except OSError:  # not up yet; jupyter_server answers 500 while a kernel is still starting
            return None

    def kernel(path: str) -> dict | None:
        """The kernel of the notebook at `path` (its session's), once the browser is connected to it and it is idle."""
        ids = {s["kernel"]["id"] for s in get("/api/sessions") or [] if s["path"] == path}
        ready = [k for k in get("/api/kernels") or [] if k["id"] in ids and k.get("connections")]
        return next((k for k in ready if k.get("execution_state") == "idle"), None)

    def close(path: str) -> None:  # an earlier test's session of `path` would be reused, its kernel half-connected
        for s in get("/api/sessions") or []:
            if s["path"] == path:
                request = urllib.request.Request(f"{base}/api/sessions/{s['id']}?token={token}", method="DELETE")
                urllib.request.urlopen(request, timeout=30).close()

    def url(name: str) -> str:  # one workspace per notebook: the default one would reopen those opened before
        return f"{base}/lab/workspaces/{re.sub(r'[^A-Za-z0-9_]', '-', name)}/tree/{name}?token={token}"

    try:
        _until(lambda: get("/api/status"), 60, lambda: f"JupyterLab did not start:\n{(tmp / 'lab.log').read_text()}")
        yield dict(repo=repo, base=base, url=url, kernel=kernel, close=close, get=get, root=tmp / "root")
    finally:
        stop(proc, timeout=20)
        log.close()


def _open(page, lab, name: str) -> None:
    """Open notebook `name` (a path under the clone) in a kernel of its own and wait until it is connected and idle."""
    lab["close"](name)
    page.goto(lab["url"](name))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # The status bar can say idle before the browser's kernel connection is up, and cells run then are lost
    # (they stay [ ]): wait until the server sees the notebook's kernel connected and idle, then the UI idle.
    _until(
        lambda: lab["kernel"](name), 90, lambda: f"the kernel of {name} never connected: {lab['get']('/api/sessions')}"
    )
    page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"] >> visible=true', timeout=60_000)


def _save(page, path: Path) -> dict:
    """Ctrl+S, then the notebook JupyterLab wrote (whole JSON: a changed mtime may be mid-write)."""
    before = path.stat().st_mtime_ns
    page.locator(".jp-Notebook").first.click()  # focus the notebook: Ctrl+S saves the current document
    page.keyboard.press("Control+s")

    def written():
        try:
            return path.stat().st_mtime_ns != before and json.loads(path.read_text())
        except json.JSONDecodeError:
            return None

    return _until(written, 30, lambda: f"JupyterLab did not save {path.name}: this test would test nothing")


def _check_view(view, nb: dict, name: str) -> None:
    """What a notebook must show, whatever renders it: each debate view its n x t cells with text bars and numbers
    (no SVG or style) and its question, each figure an image (not broken) with its caption below."""
    debates = view.locator(".acemad-debate")
    if name.startswith("03_"):  # outputs render after the first cell appears
        debates.first.wait_for(state="attached", timeout=30_000)
    for i in range(debates.count()):  # (sanitizers drop data- attributes: count the cells, not n x t)
        d = debates.nth(i)
        cells, bars = d.locator("td.acemad-cell"), d.locator("pre.ad-bars")
        assert cells.count() >= 5 and bars.count() == cells.count(), (name, cells.count(), bars.count())
        assert all(BARS.search(b) for b in bars.all_inner_texts()), f"{name}: debate {i}: a cell without bar and number"
        assert "Q:" in d.inner_text() and d.locator("svg, style").count() == 0
    cells = nb["cells"]
    figures = [k for k, c in enumerate(cells) if c["cell_type"] == "code" and FIGURE_CELL.search("".join(c["source"]))]
    for k in figures:
        caption = "".join(cells[k + 1]["source"]) if k + 1 < len(cells) else ""
        assert caption.startswith("**Figure"), f"{name}: figure cell {k} has no caption after it"
        first = re.sub(r"[*_`$\\]", "", caption.split(".", 1)[0]).strip()  # "Figure 4, above [the source ...]"
        view.get_by_text(first, exact=False).first.wait_for(state="attached", timeout=30_000)  # rendered one by one
    images = view.locator("img")
    assert images.count() >= len(figures), f"{name}: {len(figures)} figure(s), {images.count()} image(s)"
    assert all(images.nth(i).evaluate("i => i.complete && i.naturalWidth > 0") for i in range(images.count())), name
    target = next((s for s in (".acemad-debate", "img") if view.locator(s).count()), None)
    if target:  # for the screenshot
        view.locator(target).first.scroll_into_view_if_needed()


@pytest.mark.parametrize("name", RUN)
def test_notebook_runs_in_jupyterlab(page, lab, name):
    """Run > Run All Cells in JupyterLab (smoke mode), as a reader would: every cell runs with no error and no stderr
    output (progress bars are widgets there), figures and debate views render, nothing is fetched from elsewhere."""
    copy = lab["repo"] / "outputs" / "smoke" / "lab" / name  # git-ignored: the clone stays clean for the tests below
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(lab["repo"] / "notebooks" / name, copy)
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    _open(page, lab, copy.relative_to(lab["repo"]).as_posix())
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    # Over when the kernel is idle and no cell is queued or running (after an error the rest stay [ ]).
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
                .map(p => p.textContent.trim());
            const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
            return ind && ind.dataset.status === 'idle' && !prompts.some(p => p.startsWith('[*]'))
                && prompts.some(p => /^\\[\\d+\\]/.test(p));
        }""",
        timeout=300_000,
        polling=250,
    )
    nb = _save(page, copy)  # errors and stderr look alike in the DOM; the file says which is which
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"], [o.get("evalue") for o in outputs]
    assert all(c.get("execution_count") for c in code), "some code cells did not run"
    assert not [o for o in outputs if o.get("name") == "stderr"], "stderr output in the notebook"
    _check_view(page.locator(".jp-Notebook").first, nb, name)
    if name.startswith("03_"):
        text = "\n".join(page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts())
        assert re.search(r"SUMMARY: \[SYNTHETIC population \(no LLM\)\] average accuracy", text), text[-2000:]
    page.screenshot(path=str(SHOTS / f"browser_{Path(name).stem}.png"))
    assert [u for u in seen if not u.startswith((lab["base"] + "/", "data:", "blob:"))] == []


def test_committed_notebooks_read_the_same_sanitized(page, clone, tmp_path):
    """As nbconvert's sanitized HTML (it escapes headings, paragraphs and <tbody>): debate views with their bars and
    numbers, figures and captions all there."""
    from nbconvert import HTMLExporter

    repo, names = clone
    for name in names:
        html, _ = HTMLExporter(sanitize_html=True).from_filename(str(repo / "notebooks" / name))
        (tmp_path / f"{name}.html").write_text(html, encoding="utf-8")
        page.goto((tmp_path / f"{name}.html").as_uri())
        _check_view(page, json.loads((repo / "notebooks" / name).read_text()), name)
        page.screenshot(path=str(SHOTS / f"reader_sanitized_{Path(name).stem}.png"))


def test_committed_notebooks_read_untrusted_in_lab_and_save_unchanged(page, lab, clone):
    """Every committed notebook opened untrusted (a fresh clone and Jupyter data dir, no `jupyter trust`) shows what
    the sanitized HTML does, and saved as Lab saves it (autosave writes the same, but only a changed document) leaves
    `git status` clean, because `make notebooks` (nbtools store) stored what Lab writes."""
    repo, stored = clone
    every = sorted(p.name for p in (repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for name in every if os.environ.get("ACEMAD_READER_COMMITTED") == "1" else stored:
        _open(page, lab, f"notebooks/{name}")
        if name in stored:  # a notebook without outputs shows no figure
            _check_view(page.locator(".jp-Notebook").first, json.loads((repo / "notebooks" / name).read_text()), name)
            page.screenshot(path=str(SHOTS / f"reader_lab_{Path(name).stem}.png"))
        _save(page, repo / "notebooks" / name)
    assert _git(repo, "status", "--porcelain") == "", _git(repo, "diff")[:3000]


def test_run_viewer_page_opens_a_debate(page, lab, monkeypatch):
    """The page of the run notebook 03 made in JupyterLab: filter by method and outcome, open a debate."""
    from acemad_utils.data.transcripts import load_run
    from acemad_utils.report import viewer as V

    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    monkeypatch.setenv("ACEMAD_ROOT", str(lab["root"]))
    try:
        meta, _ = load_run("default/main")
    except FileNotFoundError:
        pytest.fail("no smoke run default/main: test_notebook_runs_in_jupyterlab[03_main_results] (run first) makes it")
    label = next(m for m, c in meta["methods"].items() if c["method"] == "acemad" and c["rounds"] == 3)
    n, t = meta["methods"][label]["n_agents"], meta["methods"][label]["rounds"]
    page.goto(V.write_run_page("default/main").as_uri())
    page.select_option("#f-method", label=label)
    rows = page.locator("#list tr[data-k]:visible")
    assert rows.count() == meta["n_questions"]
    page.select_option("#f-outcome", label="correct")
    assert 0 < rows.count() < meta["n_questions"]
    rows.first.click()
    d = page.locator("#debate .acemad-debate")
    assert d.get_attribute("data-method") == label
    assert (int(d.get_attribute("data-agents")), int(d.get_attribute("data-rounds"))) == (n, t)
    assert d.locator("td.acemad-cell").count() == n * t
    assert d.locator("td.ad-weighted").last.inner_text().endswith("✓")  # a "correct" record: last round right
    d.locator("td.acemad-cell details summary").first.click()  # unfold one argument for the screenshot
    page.screenshot(path=str(SHOTS / "browser_viewer_page.png"))


def test_run_viewer_page_survives_hostile_replies(page, smoke_outputs):
    """Replies holding <!--, <script, </script>, ]]> and U+2028: every row renders and each debate opens with its
    reply text shown as text."""
    from acemad_utils.report import viewer as V
    from tests.test_viewer import HOSTILE, hostile_run

    recs = hostile_run("t/hostile")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(V.write_run_page("t/hostile").as_uri())
    rows = page.locator("#list tr[data-k]")
    assert rows.count() == len(recs) and page.title() == "acemad debates: t/hostile", errors
    assert page.locator("#count").inner_text() == f"{len(recs)} of {len(recs)} records"
    assert rows.first.locator("td").first.inner_text() == recs[0]["question_id"]
    for i, text in enumerate(HOSTILE):
        rows.nth(i).click()
        d = page.locator(f'#debate .acemad-debate[data-question="{recs[i]["question_id"]}"]')
        agent = f'#debate td.acemad-cell[data-round="1"][data-agent="{i % 3}"]'
        assert d.count() == 1 or d.wait_for() is None
        assert page.locator(f"{agent} .ad-short, {agent} .ad-msg").first.text_content() == text
    assert errors == [] and page.evaluate("document.scripts.length") == 1 + 1  # one method's block, the JS


def test_run_viewer_page_works_by_keyboard_and_wraps_an_unbroken_word(page, smoke_outputs):
    """Tab reaches the rows; Enter opens one, the arrows open the next shown; a 10,000-character word in an argument
    wraps inside its cell instead of widening the page past the window."""
    from acemad_utils.report import viewer as V
    from tests.test_viewer import hostile_run

    recs = hostile_run("t/keys")
    page.goto(V.write_run_page("t/keys").as_uri())
    for _ in range(5):  # three filters and the id box, then the first row
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.k") == "0"
    page.keyboard.press("Enter")
    page.locator(f'#debate .acemad-debate[data-question="{recs[0]["question_id"]}"]').wait_for()
    page.keyboard.press("ArrowDown")
    page.locator(f'#debate .acemad-debate[data-question="{recs[1]["question_id"]}"]').wait_for()
    assert page.evaluate("document.activeElement.dataset.k") == "1"
    width = page.evaluate("window.innerWidth")
    page.evaluate("""w => document.querySelectorAll('#debate .ad-short, #debate .ad-msg')
                        .forEach(e => { e.textContent = w; })""", "x" * 10_000)  # fmt: skip
    assert page.evaluate("document.documentElement.scrollWidth") <= width
