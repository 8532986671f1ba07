"""In a real browser: JupyterLab runs notebooks 03 and 05 (smoke mode), shows the committed 05 with its stored
figures without running it, and the run viewer page opens a debate.

Drives the system's headless Chromium (/usr/bin/chromium, Debian's `chromium` package; `.ci/run` installs
it when missing) with playwright-python; playwright's own browser download is not used. Skipped, with the
reason, only where no Chromium or no playwright is available (and the committed-notebook case while the
notebooks are committed without outputs). Screenshots go to outputs/smoke/: browser_03_main_results.png (the
notebook at its debate view), browser_05_ablation.png, browser_committed_05_ablation.png and
browser_viewer_page.png (the run page).

    ACEMAD_SMOKE=1 .venv/bin/python -m pytest tests/test_browser.py -m browser -s

What a reader sees (screenshots outputs/smoke/reader_lab_*.png and reader_sanitized_*.png): every
notebook opened untrusted in JupyterLab as `make lab` serves it, the same through nbconvert's sanitized HTML, and
`make lab` plus a save (Ctrl+S) leaving `git status` clean. By default they build the committed state in a fresh clone
(03, 05 and 07 run in smoke mode and stored by nbtools); after `make notebooks` and a commit, check the committed
notebooks themselves:

    ACEMAD_READER_COMMITTED=1 ACEMAD_SMOKE=1 .venv/bin/python -m pytest tests/test_browser.py -m browser \
        -k "read_the_same or save_leaves" -s
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from acemad_utils.agents.local_server import free_port, stop
from acemad_utils.data import paths as P

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = os.environ.get("ACEMAD_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Run in JupyterLab (smoke mode): 03 has the debate views, 05 a figure. COMMITTED is opened as committed, unrun.
RUN = ["03_main_results.ipynb", "05_ablation.ipynb"]
COMMITTED = "05_ablation.ipynb"
SHOTS = P.ROOT / "outputs" / "smoke"
BARS = re.compile(r"[█▏▎▍▌▋▊▉]+[ \xa0]+(\.\d\d|1\.0)")  # a debate view's text bar and its number (no-break spaces)
JUPYTER = Path(sys.executable).parent / "jupyter"
# JupyterLab settings for this throw-away server: every cell in the DOM (no windowing, so outputs far down
# the notebook can be counted), no autosave (the copy is never written back), no news or update checks.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}


def _playwright():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install -y chromium; .ci/run does it as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright-python is not installed (pip install -e '.[test]')")
    return sync_playwright


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _playwright()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a free loopback port with a random token, serving copies of the RUN notebooks and, under
    committed/, of the COMMITTED one (with its stored outputs); stopped at the end."""
    if not JUPYTER.exists():
        pytest.skip(f"no {JUPYTER} (jupyterlab is a dependency: make venv)")
    tmp = tmp_path_factory.mktemp("lab")
    root, settings = tmp / "notebooks", tmp / "settings"
    (root / "committed").mkdir(parents=True)
    for name in RUN:
        shutil.copy(P.ROOT / "notebooks" / name, root / name)
    shutil.copy(P.ROOT / "notebooks" / COMMITTED, root / "committed" / COMMITTED)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for rel, value in SETTINGS.items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(value))
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "ACEMAD_SMOKE": "1",
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
    }
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(
        [
            str(JUPYTER),
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        ]
        + (["--allow-root"] if os.geteuid() == 0 else []),  # CI containers run as root
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=P.ROOT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start:\n{(tmp / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield {
            # One JupyterLab workspace per notebook: the default one would reopen the notebooks opened before.
            # one workspace per path: the committed 05 must not reopen beside the 05 an earlier test ran
            "url": lambda name: (
                f"{base}/lab/workspaces/{re.sub(r'[^A-Za-z0-9_]', '-', name)}/tree/{name}?token={token}"
            ),
            "base": base,
            "root": root,
            "log": tmp / "lab.log",
            "token": token,
        }
    finally:
        stop(proc, timeout=20)
        log.close()


def _kernels(lab) -> list[dict]:
    # jupyter_server answers 500 while a kernel is still starting (its last_activity is None): ask again
    for attempt in range(20):
        try:
            with urllib.request.urlopen(f"{lab['base']}/api/kernels?token={lab['token']}", timeout=5) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as err:
            if err.code != 500 or attempt == 19:
                raise
            time.sleep(0.5)
    return []


def _external(requests: list[str], allowed: tuple[str, ...]) -> list[str]:
    return [u for u in requests if not u.startswith(allowed)]


def _open(page, lab, name: str) -> None:
    """Open notebook `name` (a path under the lab's root) and wait until its kernel is connected and idle."""
    earlier = {k["id"] for k in _kernels(lab)}  # an earlier test's kernel must not pass for this notebook's
    page.goto(lab["url"](name))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # The status bar can say idle before the browser's kernel connection is up, and cells run then are lost
    # (they stay [ ]): wait until the server sees the notebook's kernel connected and idle, then the UI idle.
    deadline = time.monotonic() + 60
    while not any(
        k["id"] not in earlier and k.get("connections", 0) >= 1 and k.get("execution_state") == "idle"
        for k in _kernels(lab)
    ):
        assert time.monotonic() < deadline, f"the notebook's kernel never connected: {_kernels(lab)}"
        time.sleep(0.25)
    page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"] >> visible=true', timeout=60_000)


def _run_all(page, lab, name: str) -> None:
    """Run > Run All Cells, through the menu a reader would use, and wait until it is over."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    # Run All marks every code cell [*] at once; it is over when the kernel is idle and no cell is queued or
    # running (after an error the remaining cells stay [ ], so this ends on failures too).
    state = """() => {
            const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
                .map(p => p.textContent.trim());
            const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
            return ind && ind.dataset.status === 'idle' && !prompts.some(p => p.startsWith('[*]'))
                && prompts.some(p => /^\\[\\d+\\]/.test(p));
        }"""
    try:
        page.wait_for_function(state, timeout=120_000, polling=250)
    except Exception as err:  # say where it stuck: the prompts and the kernel status, and keep a screenshot
        page.screenshot(path=str(SHOTS / f"browser_{Path(name).stem}_stuck.png"))
        raise AssertionError(
            "Run All did not finish: "
            + page.evaluate(
                "() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]"
                ".map(p => p.textContent.trim()).join(' ') + ' kernel=' + "
                "document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status"
            )
            + "\nJupyterLab log:\n"
            + lab["log"].read_text()[-3000:]
        ) from err


def _save(page, saved: Path) -> dict:
    """File > Save, then the notebook JupyterLab wrote (errors and stderr look alike in the DOM; the file says)."""
    before = saved.stat().st_mtime_ns
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Save( Notebook)?$")).click()
    nb, deadline = None, time.monotonic() + 20
    while nb is None and time.monotonic() < deadline:  # a changed mtime can mean a write still in progress:
        time.sleep(0.2)  # wait for a complete JSON document
        if saved.stat().st_mtime_ns != before:
            try:
                nb = json.loads(saved.read_text())
            except json.JSONDecodeError:
                pass
    assert nb is not None, "JupyterLab did not save the notebook (File > Save), or left it unreadable"
    return nb


def _figures_rendered(page, code: list[dict]) -> int:
    """How many figure images the page shows; asserts one per figure cell (save_figure shows its figure)."""
    plots = sum(bool(re.search(r"\bsave_figure\(", "".join(c["source"]))) for c in code)
    images = page.locator(".jp-Notebook .jp-OutputArea-output img")
    assert images.count() >= plots, f"{plots} figure cell(s) but {images.count()} image(s) rendered"
    for i in range(images.count()):
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0"), f"image {i} is broken"
    return images.count()


def _check_debates(page) -> None:
    text = "\n".join(page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts())
    assert re.search(r"SUMMARY: \[SYNTHETIC population \(no LLM\)\] average accuracy", text), text[-2000:]
    debates = page.locator(".jp-Notebook .acemad-debate")
    assert debates.count() >= 1, "no debate view rendered"
    for i in range(debates.count()):
        d = debates.nth(i)
        n, t = int(d.get_attribute("data-agents")), int(d.get_attribute("data-rounds"))
        assert (n, t) == (5, 3)  # notebook 03's AceMAD (T=3): N = 5 agents, T = 3 rounds
        assert d.locator("td.acemad-cell").count() == n * t
        assert d.locator("pre.ad-bars").count() == n * t  # text bars: no SVG, no style element
        assert BARS.search(d.locator("pre.ad-bars").first.inner_text())
    # The screenshot: the viewer's code cell at the top, then its first debate.
    page.evaluate(
        "() => document.querySelector('.jp-Notebook .jp-CodeCell:has(.acemad-debate)').scrollIntoView({block: 'start'})"
    )


@pytest.mark.parametrize("name", RUN)
def test_notebook_runs_in_jupyterlab(browser, lab, name):
    """Run All in JupyterLab (smoke mode): every cell runs, no error and no stderr output (progress bars are
    widgets there), every figure renders as an image; 03 also shows its debates."""
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    _open(page, lab, name)
    _run_all(page, lab, name)
    nb = _save(page, lab["root"] / name)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, "error output in the notebook: " + "; ".join(f"{o['ename']}: {o['evalue']}" for o in errors)
    assert all(c.get("execution_count") for c in code), "some code cells did not run"
    stderr = [o for c in code for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert not stderr, "stderr output: " + "; ".join("".join(o["text"])[:200] for o in stderr[:3])
    assert page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').count() == 0
    _figures_rendered(page, code)
    if name == "03_main_results.ipynb":
        _check_debates(page)
    else:  # the screenshot shows the first figure
        page.locator(".jp-Notebook .jp-OutputArea-output img").first.scroll_into_view_if_needed()
    shot = SHOTS / f"browser_{Path(name).stem}.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    assert not _external(seen, (lab["base"] + "/", "data:", "blob:")), _external(
        seen, (lab["base"] + "/", "data:", "blob:")
    )
    ctx.close()


def test_committed_notebook_shows_its_figures_unrun(browser, lab):
    """The committed notebook, opened and not run, already shows its figures (make notebooks stored them)."""
    committed = P.ROOT / "notebooks" / COMMITTED
    nb = json.loads(committed.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if not any(c.get("outputs") for c in code):
        pytest.skip(f"notebooks/{COMMITTED} is committed without outputs: run `make notebooks` and commit them")
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    _open(page, lab, f"committed/{COMMITTED}")
    assert _figures_rendered(page, code) >= 1
    assert page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').count() == 0
    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
    assert all(re.match(r"\[\d+\]", p.strip()) for p in prompts), f"unexecuted cells in the committed copy: {prompts}"
    page.locator(".jp-Notebook .jp-OutputArea-output img").first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"browser_committed_{Path(COMMITTED).stem}.png"))
    ctx.close()


def test_run_viewer_page_opens_a_debate(browser, monkeypatch):
    from acemad_utils.data.transcripts import load_run
    from acemad_utils.report import viewer as V

    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    try:
        meta, _ = load_run("default/main")
    except FileNotFoundError:
        pytest.fail("no smoke run default/main: test_notebook_runs_in_jupyterlab[03_main_results] (run first) makes it")
    path = V.write_run_page("default/main")
    label = next(m for m, c in meta["methods"].items() if c["method"] == "acemad" and c["rounds"] == 3)
    n, t = meta["methods"][label]["n_agents"], meta["methods"][label]["rounds"]

    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    page.goto(path.as_uri())
    page.select_option("#f-method", label)
    rows = page.locator("#list tr.q-row")
    assert rows.count() == meta["n_questions"]
    page.select_option("#f-outcome", "correct")
    assert 0 < rows.count() < meta["n_questions"]
    rows.first.click()
    d = page.locator("#debate .acemad-debate")
    assert d.get_attribute("data-method") == label
    assert (int(d.get_attribute("data-agents")), int(d.get_attribute("data-rounds"))) == (n, t)
    assert d.locator("td.acemad-cell").count() == n * t
    assert d.locator("td.ad-weighted").last.inner_text().endswith("✓")  # a "correct" record: last round right
    d.locator("td.acemad-cell details summary").first.click()  # unfold one argument for the screenshot
    shot = P.ROOT / "outputs" / "smoke" / "browser_viewer_page.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    assert all(u.startswith("file://") for u in seen), seen
    ctx.close()


def test_run_viewer_page_survives_hostile_replies(browser, smoke_outputs):
    """Replies holding <!--, <script, </script>, ]]> and U+2028: every row renders and each
    debate opens with its reply text shown as text."""
    from acemad_utils.report import viewer as V
    from tests.test_viewer import HOSTILE, hostile_run

    recs = hostile_run("t/hostile")
    path = V.write_run_page("t/hostile")
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    rows = page.locator("#list tr.q-row")
    assert rows.count() == len(recs) and page.title() == "acemad debates: t/hostile", errors
    assert page.locator("#count").inner_text() == f"{len(recs)} of {len(recs)} records"
    for i, text in enumerate(HOSTILE):
        rows.nth(i).click()
        d = page.locator(f'#debate .acemad-debate[data-question="{recs[i]["question_id"]}"]')
        assert d.count() == 1 or d.wait_for() is None
        cell = d.locator(
            f'td.acemad-cell[data-round="1"][data-agent="{i % 3}"] .ad-short, '
            f'td.acemad-cell[data-round="1"][data-agent="{i % 3}"] .ad-msg'
        )
        assert cell.first.text_content() == text
    assert errors == [] and page.evaluate("document.scripts.length") == 2 + 1  # data, one method, the JS
    ctx.close()


# ----------------------------------------------------------------------------- what a reader sees
# The committed notebooks, read as a newcomer reads them: untrusted in JupyterLab straight after a clone, through
# nbconvert's sanitized HTML, and opened then saved in `make lab`. The branches carry their notebooks without
# outputs, so by default the fixture makes the committed state itself: a fresh clone, the READER notebooks run in
# smoke mode there and stored over its notebooks by `nbtools store` (what `make notebooks` does), committed in the
# clone. ACEMAD_READER_COMMITTED=1 reads the clone's committed notebooks as they are instead (after `make notebooks`
# and a commit: every notebook with outputs; skipped, saying so, when none has any).
READER = ["03_main_results.ipynb", "05_ablation.ipynb", "07_other_models.ipynb"]  # debates, Figure 4, paper tables


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """(a fresh clone whose notebooks carry stored outputs, the names of those notebooks)."""
    from acemad_utils.reproduce import nbtools

    repo = tmp_path_factory.mktemp("clone") / "acemad"
    subprocess.run(["git", "clone", "-q", str(P.ROOT), str(repo)], check=True)
    # The notebooks as committed, whenever they carry outputs (what a reader of a fresh clone opens); built here
    # from a smoke run only while a branch holds them output-free (ACEMAD_READER_COMMITTED=1 insists on the former).
    names = [
        p.name
        for p in sorted((repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
        if nbtools.has_outputs(json.loads(p.read_text()))
    ]
    if names or os.environ.get("ACEMAD_READER_COMMITTED") == "1":
        if not names:
            pytest.skip("the committed notebooks have no outputs: run `make notebooks`, commit them, then rerun")
        return repo, names
    env = {**os.environ, "PYTHONPATH": str(repo), "ACEMAD_SMOKE": "1", "ACEMAD_PROGRESS": "0"}
    # one at a time: side by side, two notebooks build the same subset in a fresh clone and one removes the other's
    # temporary file (runner.remove_stale_temp_files; reported to the lead)
    run = [sys.executable, "-m", "acemad_utils.reproduce", "--profile", "default", "--jobs", "1", "--only"]
    subprocess.run(run + [Path(n).stem for n in READER], cwd=repo, env=env, check=True, capture_output=True)
    executed = repo / "outputs" / "smoke" / "notebooks" / "default"
    store = [sys.executable, "-m", "acemad_utils.reproduce.nbtools", "store", "--executed", str(executed)]
    out = subprocess.run(store + [f"notebooks/{n}" for n in READER], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qam", "stored outputs (test)")
    return repo, READER


def _lab_server(repo: Path, tmp: Path, settings: dict):
    """Start JupyterLab as `make lab` does (+ a token and throw-away settings, runtime and data dirs: nothing trusted)
    in `repo`; returns (process, base URL, token)."""
    for rel, value in settings.items():
        (tmp / "settings" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "settings" / rel).write_text(json.dumps(value))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, **{f"JUPYTER_{k}_DIR": str(tmp / k.lower()) for k in ("CONFIG", "RUNTIME", "DATA")}}
    command = _lab_command(repo, port)
    args = ["--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
    args += [f"--LabApp.user_settings_dir={tmp / 'settings'}", f"--LabApp.workspaces_dir={tmp / 'workspaces'}"]
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(command + args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=repo)
    base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                return proc, base, token
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc, timeout=5)
                raise RuntimeError(f"JupyterLab did not start:\n{(tmp / 'lab.log').read_text()[-3000:]}") from None
            time.sleep(0.3)


def _lab_command(repo: Path, port: int) -> list[str]:
    """What `make lab` runs (its recipe, with the venv step taken as done), with this interpreter's venv."""
    venv = Path(sys.executable).parent.parent
    recipe = ["make", "-s", "-n", "-o", f"{venv}/.base", "lab", f"VENV={venv}", f"LAB_PORT={port}"]
    out = subprocess.run(recipe, cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout.replace("\\\n", " ").split()


def _scroll_to_what_matters(page) -> None:
    """For the screenshot: the first debate view, else the first figure, else the assumption sentence."""
    for sel in (".acemad-debate", "img", "text=This synthetic result rests on"):
        if page.locator(sel).count():
            page.locator(sel).first.scroll_into_view_if_needed()
            return


def _shown(locator, timeout_ms: int = 30_000) -> bool:
    """Whether the locator's first match is attached, or becomes so within timeout_ms: under load JupyterLab renders
    the Markdown cells one by one after the first cell appears, so a count taken at once can miss one."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        locator.first.wait_for(state="attached", timeout=timeout_ms)
    except PlaywrightTimeout:
        return False
    return True


def _check_reader_view(page, nb: dict, name: str) -> None:
    """What every committed notebook must show, whatever renders it: each debate view with its question, text bars
    and numbers (no SVG or style needed), each figure an image with its caption below, the narrative as Markdown."""
    debates = page.locator(".acemad-debate")
    if name.startswith("03_"):
        assert debates.count() >= 1, f"{name}: no debate view"
    for i in range(debates.count()):
        d = debates.nth(i)
        cells, bars = d.locator("td.acemad-cell"), d.locator("pre.ad-bars")
        assert cells.count() >= 5 and bars.count() == cells.count(), (name, cells.count(), bars.count())
        for k in range(bars.count()):
            assert BARS.search(bars.nth(k).inner_text()), f"{name}: debate {i} cell {k}: no bar and number"
        assert "Q:" in d.inner_text() and d.locator("svg, style").count() == 0
    cells = nb["cells"]
    for k, c in enumerate(cells):
        if c["cell_type"] == "code" and re.search(r"\bsave_figure\(", "".join(c["source"])):
            caption = "".join(cells[k + 1]["source"]) if k + 1 < len(cells) else ""
            assert caption.startswith("**Figure"), f"{name}: figure cell {k} has no caption after it"
            first = re.sub(r"[*_`$\\]", "", caption.split(".", 1)[0]).strip()  # "Figure 4, above [the source ...]"
            assert _shown(page.get_by_text(first, exact=False)), f"{name}: caption {first!r} not shown"
    images = page.locator("img")
    figures = sum(bool(re.search(r"\bsave_figure\(", "".join(c["source"]))) for c in cells if c["cell_type"] == "code")
    assert images.count() >= figures, f"{name}: {figures} figure(s), {images.count()} image(s)"
    for i in range(images.count()):
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0"), f"{name}: image {i} broken"
    if name.startswith(("03_", "07_")):  # the "What we see" paragraph: Markdown, with its assumption sentence
        assert _shown(page.get_by_text(re.compile(r"This synthetic result rests on"))), name


def test_committed_notebooks_read_the_same_untrusted_in_jupyterlab(browser, clone, tmp_path):
    """Every committed notebook opened untrusted (a fresh clone, a fresh Jupyter data dir) in JupyterLab, as `make
    lab` serves it: debate views, figures with captions and Markdown narrative all there without `jupyter trust`."""
    repo, names = clone
    settings = {**SETTINGS}  # every cell in the DOM, no autosave, no news pop-up over the screenshot
    proc, base, token = _lab_server(repo, tmp_path, settings)
    try:
        ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
        page = ctx.new_page()
        for name in names:
            page.goto(f"{base}/lab/workspaces/r-{Path(name).stem}/tree/notebooks/{name}?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_timeout(1500)
            nb = json.loads((repo / "notebooks" / name).read_text())
            notebook = page.locator(".jp-Notebook").first
            _check_reader_view(notebook, nb, name)
            _scroll_to_what_matters(notebook)
            page.screenshot(path=str(SHOTS / f"reader_lab_{Path(name).stem}.png"))
        ctx.close()
    finally:
        stop(proc, timeout=20)


def test_committed_notebooks_read_the_same_through_nbconvert_sanitized_html(browser, clone, tmp_path):
    """The same checks on nbconvert's sanitized HTML (HTMLExporter(sanitize_html=True), what nbviewer-like tools
    serve): its tag list is tiny (it escapes headings, paragraphs and <tbody> everywhere), yet the debate views keep
    their bars and numbers and every figure its image and caption text."""
    from nbconvert import HTMLExporter

    repo, names = clone
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    for name in names:
        html, _ = HTMLExporter(sanitize_html=True).from_filename(str(repo / "notebooks" / name))
        out = tmp_path / f"{Path(name).stem}.html"
        out.write_text(html, encoding="utf-8")
        page.goto(out.as_uri())
        _check_reader_view(page, json.loads((repo / "notebooks" / name).read_text()), name)
        _scroll_to_what_matters(page)
        page.screenshot(path=str(SHOTS / f"reader_sanitized_{Path(name).stem}.png"))
    ctx.close()


def test_make_lab_then_save_leaves_the_checkout_clean(browser, clone, tmp_path):
    """`make lab`, every notebook opened (its kernel started) and saved as Lab saves it (Ctrl+S; autosave writes
    the same, but only a document that changed: an opened committed notebook is not, so waiting for autosave
    tested nothing): `git status` stays clean, because `make notebooks` (nbtools store) stored what Lab writes."""
    repo, _ = clone
    every = sorted(p.name for p in (repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    stored = [n for n in every if n in clone[1]]  # notebooks with outputs; the others as the branch has them
    proc, base, token = _lab_server(repo, tmp_path, SETTINGS)
    lab = {"url": lambda n: f"{base}/lab/workspaces/a-{Path(n).stem}/tree/{n}?token={token}", "base": base}
    lab["token"] = token
    opened = stored if os.environ.get("ACEMAD_READER_COMMITTED") != "1" else every
    try:
        ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
        page = ctx.new_page()
        for name in opened:
            path = repo / "notebooks" / name
            before = path.stat().st_mtime_ns
            _open(page, lab, f"notebooks/{name}")
            page.locator(".jp-Notebook").first.click()  # focus the notebook: Ctrl+S saves the current document
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + 30
            while path.stat().st_mtime_ns == before:
                assert time.monotonic() < deadline, f"Lab did not save {name}: this test would test nothing"
                time.sleep(0.1)
        ctx.close()
    finally:
        stop(proc, timeout=20)
    assert _git(repo, "status", "--porcelain") == "", _git(repo, "diff")[:3000]
