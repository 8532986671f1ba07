"""The papermill driver as a user meets it: profile values checked before anything runs, `--set` overrides, one
clear line per failed notebook (keys redacted), notebooks side by side after what they read, Ctrl-C, runs of
different profiles kept apart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import nbformat
import pytest
import yaml

from acemad_utils.data import paths as P
from acemad_utils.data.transcripts import load_run
from acemad_utils.experiments import profiles, theory
from acemad_utils.reproduce import cli as reproduce
from acemad_utils.reproduce import uptodate


def _profile(tmp_path, body) -> str:
    path = tmp_path / "mine.yaml"
    path.write_text(body if isinstance(body, str) else yaml.safe_dump(body))
    return str(path)


@pytest.mark.parametrize("body", ["", "# only a comment\n", "- a\n- list\n", "profile: [unclosed\n"])
def test_an_empty_or_malformed_profile_is_an_error_and_null_counts_mean_every_item(tmp_path, body):
    with pytest.raises(SystemExit, match=r"mine.yaml (is empty or not a mapping|is not valid YAML)"):
        profiles.load_profile(_profile(tmp_path, body))
    prof = profiles.load_profile(_profile(tmp_path, {"profile": "mine", "common": {"N_ITEMS": None, "N_MAX": None}}))
    assert prof["common"] == {"N_ITEMS": None, "N_MAX": None}


def test_set_overrides_every_notebook_parses_yaml_and_is_checked(monkeypatch):
    prof = profiles.load_profile("paper", {"BASE_URL": "http://127.0.0.1:1/v1"})
    assert prof["common"]["BASE_URL"] == "http://127.0.0.1:1/v1" and prof["common"]["MODEL"] == "gpt-4o-mini"
    with pytest.raises(SystemExit, match="N_MAX = 'x' is not allowed"):
        profiles.load_profile("default", {"N_MAX": "x"})
    with pytest.raises(SystemExit, match="common parameter 'BASE_URLL'"):
        profiles.load_profile("default", {"BASE_URLL": "x"})
    # paper.yaml gives 04 its own SECOND_BASE_URL: a --set must reach that notebook, not only common
    prof = profiles.load_profile("paper", {"SECOND_BASE_URL": "http://h:2/v1"})
    assert profiles.params_for(prof, "04_heterogeneity")["SECOND_BASE_URL"] == "http://h:2/v1"
    seen = {}
    monkeypatch.setattr(reproduce, "run", lambda profile, only, overrides, **kw: seen.update(overrides) or 0)
    reproduce.main(["--set", "N_MAX=3", "--set", "BASE_URL=http://h:1/v1", "--set", "MODEL="])
    assert seen == {"N_MAX": 3, "BASE_URL": "http://h:1/v1", "MODEL": ""}
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        reproduce.main(["--set", "N_MAX"])


def test_a_set_parameter_names_the_selected_notebooks_it_does_not_reach(monkeypatch, capsys):
    class Stop(Exception): ...

    def stop(*a):
        raise Stop

    monkeypatch.setattr(reproduce, "_data_preflight", stop)  # the lines are printed before anything is checked or run
    for only, missed in [(["00_theory", "02_baselines", "03_main_results"], True), (["03_main_results"], False)]:
        with pytest.raises(Stop):
            reproduce.run("default", only=only, overrides={"ETA": 4.0, "MAX_USD": 3})
        out = capsys.readouterr().out
        line = "--set ETA does not reach 00_theory (it takes ETA_PHASE), 02_baselines: they do not take ETA"
        assert (line in out) is missed and "--set MAX_USD" not in out  # a run setting reaches the whole run


def _notebook(path, code: str) -> None:
    params = nbformat.v4.new_code_cell('PROFILE = "default"')
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


def _driver(monkeypatch, nbs: dict, reads: dict | None = None, **prof) -> None:
    monkeypatch.setattr(reproduce, "notebooks", lambda: nbs)
    monkeypatch.setattr(reproduce, "READS", reads or {})
    monkeypatch.setattr(reproduce, "load_profile", lambda name, overrides=None: {"profile": "mine", **prof})


@pytest.mark.slow
def test_a_failed_notebook_is_one_redacted_line_and_the_others_still_run(tmp_outputs, monkeypatch, capsys):
    canary = "sk-canary-" + "7" * 30
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    nbs = {"01_fails": tmp_outputs / "01_fails.ipynb", "02_works": tmp_outputs / "02_works.ipynb"}
    _notebook(nbs["01_fails"], f'raise RuntimeError("endpoint said: Incorrect API key provided: {canary}")')
    _notebook(nbs["02_works"], 'print("SUMMARY: fine")')
    _driver(monkeypatch, nbs)
    assert reproduce.run("mine") == 1
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].startswith("[mine] 01_fails FAILED after ")
    assert "RuntimeError: endpoint said: Incorrect API key provided: ***" in lines[0]
    assert lines[1].strip().startswith("full traceback: ") and lines[1].endswith("01_fails.ipynb (cell 3)")  # +injected
    assert lines[2].startswith("[mine] 02_works") and lines[2].endswith("fine")
    assert lines[3:] == ["[mine] 1 of 2 notebook(s) failed"] and canary not in out and "Traceback" not in out


RUN_INTERRUPTED = ("from acemad_utils.experiments.runner import RunInterrupted\n"
                   'raise RunInterrupted("interrupted: 1 of 3 records saved; rerun to resume")')  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("jobs, raised, says", [
    (1, RUN_INTERRUPTED, "RunInterrupted: interrupted: 1 of 3 records saved; rerun to resume"),
    (2, RUN_INTERRUPTED, "RunInterrupted: interrupted: 1 of 3 records saved; rerun to resume"),
    (1, "raise KeyboardInterrupt", "interrupted outside a run (its saved records are kept)"),  # between runs
])  # fmt: skip
def test_ctrl_c_in_a_notebook_stops_the_whole_reproduce_with_130(tmp_outputs, monkeypatch, capsys, jobs, raised,
                                                                 says):  # fmt: skip
    """The kernel sees Ctrl-C first (RunInterrupted): the later notebooks must not start, one at a time or side
    by side (where 02 waits for 01 because it READS it)."""
    log = tmp_outputs / "ran.txt"
    nbs = {"01_stops": tmp_outputs / "01_stops.ipynb", "02_never": tmp_outputs / "02_never.ipynb"}
    _notebook(nbs["01_stops"], raised)
    _notebook(nbs["02_never"], f'open({str(log)!r}, "w").write("ran"); print("SUMMARY: ran")')
    _driver(monkeypatch, nbs, {"02_never": ("01_stops",)}, jobs=jobs)
    assert reproduce.run("mine") == 130
    assert capsys.readouterr().out.strip().splitlines() == [f"[mine] 01_stops {says}; the later notebooks did not run"]
    assert not log.exists()


def test_theory_runs_of_two_profiles_do_not_mix(tmp_outputs, monkeypatch):
    monkeypatch.setattr(theory, "PHASE_CAL", (0.0,))
    monkeypatch.setattr(theory, "PHASE_N", (3,))
    theory.run_all(n_items=6, seed=0, rounds=2, progress=False, profile="pa")
    theory.run_all(n_items=9, seed=0, rounds=2, progress=False, profile="pb")
    assert load_run("pa/theory_acemad")[0]["n_questions"] == 6 and load_run("pb/theory_acemad")[0]["n_questions"] == 9
    with pytest.raises(ValueError) as e:  # a real mix still refuses, naming the folder and both identities
        theory.run_all(n_items=7, seed=0, rounds=2, progress=False, profile="pa")
    assert "pa/theory_martingale_symmetric holds a run with a different data_hash: saved 6 questions of" in str(e.value)
    assert "this run 7 questions of ['synthetic']" in str(e.value) and "Delete " in str(e.value)
    assert json.loads(json.dumps(theory.phase_table(etas=(2.0,), profile="pb").to_dict()))  # reads its own runs


@pytest.mark.slow
def test_a_synthetic_runs_notebooks_share_a_kernel_reset_to_what_a_new_one_starts_from(tmp_outputs, monkeypatch):
    """One kernel serves the notebooks one after the other (its start and imports paid once), but a notebook sees no
    variable, execution count, directory, open figure or package memo of the one before; a failed notebook's kernel
    is not used again."""
    log = tmp_outputs / "seen.jsonl"
    probe = (
        "import os, json, matplotlib.pyplot as plt\nfrom acemad_utils.report.stats import resample_indices as memo\n"
        "from acemad_utils.experiments import theory\n"
        "seen = [os.getpid(), 'leftover' in globals(), get_ipython().execution_count, os.getcwd(), plt.get_fignums(),\n"
        "        memo.cache_info().currsize, len(theory._held())]\n"
        f"open({str(log)!r}, 'a').write(json.dumps(seen) + '\\n')\n"
        "leftover = 1; plt.figure(); os.chdir('/'); memo(0, 2, (3,)); theory._held()['held'] = []\n"
    )
    nbs = {name: tmp_outputs / f"{name}.ipynb" for name in ("01_a", "02_b", "03_fails", "04_d")}
    for name, path in nbs.items():
        _notebook(path, probe + ("raise RuntimeError('broken')" if name == "03_fails" else "print('SUMMARY: ok')"))
    _driver(monkeypatch, nbs)
    assert reproduce.run("mine") == 1
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s[0] for s in seen].count(seen[0][0]) == 3 and seen[3][0] != seen[0][0]
    assert all(s[1:] == [False, seen[0][2], str(tmp_outputs), [], 0, 0] for s in seen)  # 01's kernel was new


# ----------------------------------------------------------------------------- notebooks side by side (jobs)
# Each notebook logs (name, start, end); `meet` waits for another notebook's start (a rendezvous, not a sleep).
STAMP = (
    "import json, time, pathlib\n"
    "log, t0 = pathlib.Path({log!r}), time.time()\n"
    "pathlib.Path({log!r} + '.{name}').touch()\n"
    "while {meet!r} and not pathlib.Path({log!r} + '.' + {meet!r}).exists():\n"
    "    assert time.time() < t0 + 300, 'never ran beside ' + {meet!r}; time.sleep(0.05)\n"
    "with log.open('a') as f: f.write(json.dumps([{name!r}, t0, time.time()]) + '\\n')\n"
    "{extra}print('SUMMARY: {name} done')"
)


def _stamped(tmp_path, specs: dict) -> tuple[dict, object]:
    """specs: name -> (the notebook it must meet, or "", extra code)."""
    log = tmp_path / "log.jsonl"
    nbs = {name: tmp_path / f"{name}.ipynb" for name in specs}
    for name, (meet, extra) in specs.items():
        _notebook(nbs[name], STAMP.format(log=str(log), meet=meet, name=name, extra=extra))
    return nbs, log


def _intervals(log) -> dict:
    return {name: (t0, t1) for name, t0, t1 in map(json.loads, log.read_text().splitlines())}


@pytest.mark.slow
def test_jobs_runs_notebooks_side_by_side_after_what_they_read(tmp_outputs, monkeypatch, capsys):
    """jobs: 2 runs two notebooks at once (01 and 02 meet); a notebook that READS another starts after it ended,
    "*" after all; a failed notebook does not stop the others and the run exits 1 with its one line."""
    spec = {"01_first": ("02_beside", ""), "02_beside": ("01_first", ""), "03_after_first": ("", ""),
            "04_fails": ("", "raise RuntimeError('broken on purpose')\n"), "05_last": ("", "")}  # fmt: skip
    nbs, log = _stamped(tmp_outputs, spec)
    _driver(monkeypatch, nbs, {"03_after_first": ("01_first",), "05_last": ("*",)}, jobs=2)
    assert reproduce.run("mine") == 1
    out, at = capsys.readouterr().out.strip().splitlines(), _intervals(log)
    assert at["03_after_first"][0] >= at["01_first"][1]
    assert at["05_last"][0] >= max(t1 for name, (_, t1) in at.items() if name != "05_last")
    assert any(line.startswith("[mine] 04_fails FAILED after ") for line in out), out
    assert out[-1] == "[mine] 1 of 5 notebook(s) failed" and sum(" done" in x for x in out) == 4


@pytest.mark.slow
def test_jobs_starts_the_longest_notebook_first(tmp_outputs, monkeypatch):
    """Among the notebooks that may start, a LONGEST one starts first: started last it would run alone at the end."""
    nbs, log = _stamped(tmp_outputs, {"01_short": ("", ""), "02_short": ("", ""), "03_long": ("", "")})
    _driver(monkeypatch, nbs, jobs=2)
    monkeypatch.setattr(reproduce, "LONGEST", ("03_long",))
    assert reproduce.run("mine") == 0
    at = _intervals(log)
    assert at["02_short"][0] >= min(at["01_short"][1], at["03_long"][1])  # 02 waited for a free slot


def test_on_a_real_model_notebook_09_runs_after_notebook_03_whose_run_it_reads():
    """Notebook 09's premise measured on a real model (table 9b) is notebook 03's run: on the local and paper
    profiles 09 starts after 03 and runs again when 03 does (else it shows "no notebook 03 run yet" for good); a
    synthetic profile's 09 reads nothing of 03 and still starts right after 01."""
    before, now = {"03_main_results": "a", "09_assumption_map": "b"}, {"03_main_results": "c", "09_assumption_map": "b"}
    for name in ("local", "paper"):
        needs = profiles.reads(profiles.load_profile(name), profiles.READS)
        assert "03_main_results" in needs["09_assumption_map"]
        assert uptodate.stale(now, before, needs) == ["03_main_results", "09_assumption_map"]
        assert reproduce._reads(needs, "09_assumption_map", "03_main_results")
    needs = profiles.reads(profiles.load_profile("default"), profiles.READS)
    assert needs == profiles.READS and uptodate.stale(now, before, needs) == ["03_main_results"]


def test_jobs_is_checked_and_refused_for_llm_notebooks(tmp_path):
    for bad in (0, "two", True, 99):
        with pytest.raises(SystemExit, match="jobs = .* is not allowed: need a whole number of notebooks at once"):
            profiles.load_profile(_profile(tmp_path, {"profile": "mine", "common": {"SEED": 0}, "jobs": bad}))
    assert profiles.load_profile("default", {"jobs": 1})["jobs"] == 1  # --jobs 1 / --set JOBS=1
    llm = _profile(tmp_path, {"profile": "mine", "common": {"BACKEND": "openai", "MODEL": "m"}, "jobs": 2})
    with pytest.raises(SystemExit, match="jobs = 2: notebooks run side by side only when none calls an LLM"):
        reproduce.run(llm, only=["03_main_results"])
    for name, needs in profiles.READS.items():  # every notebook a notebook reads exists
        assert name in profiles.notebooks() and all(n == "*" or n in profiles.notebooks() for n in needs)


DRIVER = """
import os, sys
from pathlib import Path
from acemad_utils.reproduce import cli
from tests.test_reproduce import _notebook
tmp = Path(sys.argv[1])
os.environ["ACEMAD_ROOT"] = str(tmp)  # the driver's and its kernels' outputs: never the checkout's
code = (
    "from acemad_utils.agents.sim import SimPopulation, make_items\\n"
    "from acemad_utils.experiments.runner import run_experiment\\n"
    "from acemad_utils.protocol.config import DebateConfig\\n"
    "cfg = [DebateConfig(method='acemad', n_agents=15, rounds=5)]\\n"
    "run_experiment({name!r}, make_items(20000, seed=1), cfg, SimPopulation(), progress=False)\\n"
)
nbs = {name: tmp / f"{name}.ipynb" for name in ("01_long", "02_long")}
for name, path in nbs.items():
    _notebook(path, code.format(name=name))
cli.notebooks = lambda: nbs
cli.load_profile = lambda name, overrides=None: {"profile": "mine", "jobs": 2}
sys.exit(cli.run("mine"))
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


def kernels_of(pid: int) -> set[int]:  # this driver's kernels, not the machine's
    out = subprocess.run(["pgrep", "-P", str(pid), "-f", "ipykernel"], capture_output=True).stdout.split()
    return {int(x) for x in out}


@pytest.mark.slow
def test_ctrl_c_to_the_driver_reaches_notebooks_running_side_by_side(tmp_path):
    """Kernels run in sessions of their own, so the driver passes its Ctrl-C on: both runs stop between records
    (whole records), the driver exits 130 and no kernel is left running."""
    env = {**os.environ, "ACEMAD_SMOKE": "0", "ACEMAD_PROGRESS": "0"}
    reset = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # (as a terminal starts it, not `&`)
    # cwd: DRIVER imports `tests` from the checkout, whatever directory this worker is in
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], stdout=subprocess.PIPE, cwd=P.CHECKOUT,
                            stderr=subprocess.STDOUT, text=True, env=env, preexec_fn=reset)  # fmt: skip
    names = ("01_long", "02_long")
    files = [tmp_path / "outputs" / "runs" / n / "transcripts.jsonl" for n in names]
    deadline, ours = time.monotonic() + 400, set[int]()  # two kernels' starts on a loaded machine
    while not all(f.exists() and f.stat().st_size > 0 for f in files):
        early = proc.poll() is not None and (proc.stdout.read() or "(no output)")  # the driver exited first
        assert time.monotonic() < deadline and not early, f"the notebooks never started their runs: {early}"
        ours |= kernels_of(proc.pid)
        time.sleep(0.05)
    ours |= kernels_of(proc.pid)
    os.kill(proc.pid, signal.SIGINT)  # the driver only, as a terminal's Ctrl-C reaches it
    out, _ = proc.communicate(timeout=120)
    lines = out.strip().splitlines()
    assert proc.returncode == 130, out
    assert lines[0].startswith("[mine] interrupted: waiting for 01_long, 02_long to stop"), out
    assert lines[-1].startswith("[mine] interrupted; rerun the same command to resume")
    for n, f in zip(names, files):
        assert any(x.startswith(f"[mine] {n} RunInterrupted: interrupted: ") for x in lines), out
        raw = f.read_bytes()
        assert raw.endswith(b"\n") and all(json.loads(x)["status"] == "ok" for x in raw.splitlines())
    assert len(ours) == 2 and not [k for k in ours if _running(k)]  # both ran side by side; papermill shut them down


@pytest.mark.slow
def test_a_kernel_ends_when_its_driver_is_killed():
    """A SIGKILLed driver (the OOM killer, a closed terminal) leaves no kernel computing on (ipykernel's parent
    poller ends a kernel whose JPY_PARENT_PID is gone)."""
    env = {**os.environ, "ACEMAD_SMOKE": "1", "PYTHONPATH": str(P.CHECKOUT)}
    cmd = [sys.executable, "-m", "acemad_utils.reproduce", "--profile", "default", "--only", "00_theory"]
    proc = subprocess.Popen(cmd, cwd=P.CHECKOUT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, kernels = time.monotonic() + 400, set[int]()  # a bound, not a wait: a kernel's start under load
    while not kernels and time.monotonic() < deadline:  # bounded poll until a kernel has started
        kernels |= kernels_of(proc.pid)
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert kernels, "no kernel started"
    deadline = time.monotonic() + 30
    while any(map(_running, kernels)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [k for k in kernels if _running(k)]
    for k in left:  # only when the test fails: leave nothing behind
        os.kill(k, signal.SIGKILL)
    assert left == [], f"kernels {left} outlived the killed driver"
