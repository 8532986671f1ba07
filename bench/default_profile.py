"""The default profile end to end: seconds and MB per notebook, the largest viewer page, and a rerun.

    python bench/default_profile.py                    # this checkout (writes its outputs/, like make reproduce)
    python bench/default_profile.py --ref main         # another commit, in a temporary git worktree (before/after)
    python bench/default_profile.py --only 01_subset_construction 06_scaling   # two notebooks only
    python bench/default_profile.py --quick            # smoke mode (ACEMAD_SMOKE=1): seconds, for a dry run

Each notebook runs alone (`python -m acemad_utils.reproduce --profile default --only NAME`, the driver of
`make reproduce`) from empty run folders, so its seconds include one kernel start (about 2 s) and its MB are
the run folders it wrote (outputs/runs/default/...). Then the viewer page of every run is built and the
largest one is reported. Then the whole profile runs in one driver three times: again with nothing changed (the
rerun a user makes: notebooks whose inputs did not change are skipped as up to date, reproduce/uptodate.py), with
`--force` (every notebook re-executed, everything on disk), and from empty run folders (a fresh clone). Another
commit (`--ref`) runs in a temporary worktree with this checkout's virtual environment (PYTHONPATH points
the kernels at the worktree's package); it is removed at the end. Prints figures; asserts nothing about
time. The machine's load (`uptime`) is printed first and last, because wall times depend on it; the CPU
seconds (of the driver and its kernels) depend on it much less. Peak RSS ("peak MB") is the largest process of
each driver run, the driver or one of its kernels (GNU time's %M; not shown without /usr/bin/time).
`--no-viewer` skips the viewer pages (and Chromium) but keeps the reruns.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def notebooks(repo: Path) -> list[str]:
    """The numbered notebooks of the checkout being measured (another commit may have fewer)."""
    return sorted(p.stem for p in (repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _mb(path: Path) -> float:
    if not path.exists():
        return 0.0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def _sizes(runs: Path) -> dict[str, float]:
    return {d.name: _mb(d) for d in sorted(runs.iterdir()) if d.is_dir()} if runs.exists() else {}


def _cpu() -> float:
    """CPU seconds of the finished children (the driver and, reaped by it, its kernels)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


_PEAK: list[float] = []  # MB: the largest process (driver or kernel) of the last _reproduce, if /usr/bin/time exists


def _reproduce(repo: Path, env: dict, only: list[str], *, force: bool = True) -> tuple[float, str]:
    """Run the driver (`force`: every notebook executes, none is skipped as up to date); returns (seconds, stdout)
    and sets _PEAK to its largest process's peak RSS (GNU time's %M: the maximum over the driver and every kernel
    it waited for)."""
    cmd = [sys.executable, "-m", "acemad_utils.reproduce", "--profile", "default", "--only", *only]
    if force and "--force" in _driver_help(repo, env):  # --ref of a commit before the up-to-date check has none
        cmd.append("--force")
    timer = ["/usr/bin/time", "-f", "PEAK_RSS_KB %M"] if os.access("/usr/bin/time", os.X_OK) else []
    t0 = time.time()
    out = subprocess.run(timer + cmd, cwd=repo, env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"reproduce failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    m = re.search(r"PEAK_RSS_KB (\d+)", out.stderr)
    _PEAK[:] = [int(m.group(1)) / 1024] if m else []
    return time.time() - t0, out.stdout


def _driver_help(repo: Path, env: dict) -> str:
    cmd = [sys.executable, "-m", "acemad_utils.reproduce", "--help"]
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True).stdout


def _peak() -> str:
    return f"; peak RSS {_PEAK[0]:.0f} MB" if _PEAK else ""


def _viewer_pages(repo: Path, env: dict, runs: Path) -> list[tuple[str, float, float]]:
    """(run, seconds to build, MB) of every run's viewer page."""
    pages = []
    for d in sorted(p for p in runs.iterdir() if (p / "meta.json").exists()):
        t0 = time.time()
        out = subprocess.run(
            [sys.executable, "-m", "acemad_utils.report.viewer", f"{runs.name}/{d.name}"],
            cwd=repo,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        secs = time.time() - t0
        page = Path(out.stdout.strip().splitlines()[-1])  # the viewer prints the page's path
        pages.append((d.name, secs, page.stat().st_size / 1e6 if page.exists() else 0.0))
    return pages


def chromium_load(page: Path) -> str:
    """Seconds until the page's list is drawn, and until a click on the last row shows its debate, in headless
    Chromium (/usr/bin/chromium via playwright, as tests/test_browser.py); a note when it is not available."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "(playwright not installed: no load time)"
    chromium = os.environ.get("ACEMAD_CHROMIUM", "/usr/bin/chromium")
    if not os.access(chromium, os.X_OK):
        return f"(no Chromium at {chromium}: no load time)"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--headless"])
        tab = browser.new_page()
        t0 = time.perf_counter()
        tab.goto(page.as_uri(), wait_until="load")
        tab.wait_for_function("document.getElementById('count').textContent.length > 0", timeout=120_000)
        loaded = time.perf_counter() - t0
        t1 = time.perf_counter()
        tab.locator("#list tr.q-row").last.click()
        tab.locator("#debate .acemad-debate").wait_for(timeout=120_000)
        opened = time.perf_counter() - t1
        browser.close()
    return f"loads in {loaded:.2f} s in Chromium, opens its last debate in {opened:.2f} s"


def measure(repo: Path, env: dict, only: list[str], extras: bool = True) -> None:
    runs = repo / "outputs" / ("smoke/runs" if env.get("ACEMAD_SMOKE") else "runs") / "default"
    shutil.rmtree(runs, ignore_errors=True)
    print(f"{'notebook':<24} {'seconds':>8} {'CPU s':>7} {'MB written':>11} {'peak MB':>8}  reported by the driver")
    total_s = total_cpu = 0.0
    for name in only:
        before = _sizes(runs)
        cpu0 = _cpu()
        secs, stdout = _reproduce(repo, env, [name])
        cpu = _cpu() - cpu0
        total_cpu += cpu
        after = _sizes(runs)
        wrote = sum(mb - before.get(run, 0.0) for run, mb in after.items())
        m = re.search(rf"\] {name}\s+([\d.]+)s", stdout)
        total_s += secs
        peak = f"{_PEAK[0]:8.0f}" if _PEAK else f"{'-':>8}"
        said = m.group(1) + " s" if m else stdout.strip()[-80:]
        print(f"{name:<24} {secs:8.1f} {cpu:7.1f} {wrote:11.1f} {peak}  {said}")
    print(
        f"{'total':<24} {total_s:8.1f} {total_cpu:7.1f} {_mb(runs):11.1f}  (outputs/runs/default: {_mb(runs):.1f} MB)"
    )
    if not extras:
        return
    pages = [] if env.get("BENCH_NO_VIEWER") else _viewer_pages(repo, env, runs)
    if pages:
        run, secs, mb = max(pages, key=lambda p: p[2])
        total = sum(p[2] for p in pages)
        print(f"largest viewer page: {run}.html {mb:.1f} MB (built in {secs:.1f} s); all pages {total:.1f} MB")
        largest = repo / "outputs" / "viewer" / runs.name / f"{run}.html"
        if env.get("ACEMAD_SMOKE"):
            largest = repo / "outputs" / "smoke" / "viewer" / runs.name / f"{run}.html"
        print(f"  {largest.name} {chromium_load(largest)}")
    _reproduce(repo, env, only, force=False)  # a clean run of the whole profile: what the up-to-date check records
    cpu0 = _cpu()
    secs, out = _reproduce(repo, env, only, force=False)
    print(f"CPU {_cpu() - cpu0:.1f} s; ", end="")
    skipped = out.count("  up to date  ")
    print(f"rerun, nothing changed (make reproduce again; {skipped} notebook(s) up to date): {secs:.1f} s{_peak()}")
    cpu0 = _cpu()
    secs, _ = _reproduce(repo, env, only)
    print(f"CPU {_cpu() - cpu0:.1f} s; ", end="")
    print(f"every notebook re-executed with everything on disk (--force, one driver): {secs:.1f} s{_peak()}")
    shutil.rmtree(runs, ignore_errors=True)  # what `make reproduce` does on a fresh clone: one driver, no runs
    cpu0 = _cpu()
    secs, _ = _reproduce(repo, env, only, force=False)
    print(f"CPU {_cpu() - cpu0:.1f} s; ", end="")
    print(f"from empty run folders ({len(only)} notebook(s), one driver, as make reproduce): {secs:.1f} s{_peak()}")


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", help="measure this git commit/branch in a temporary worktree (default: this checkout)")
    ap.add_argument("--only", nargs="+", help="notebooks to run (default: every numbered notebook of the checkout)")
    ap.add_argument("--quick", action="store_true", help="smoke mode (ACEMAD_SMOKE=1)")
    ap.add_argument("--notebooks-only", action="store_true", help="no viewer pages, no rerun")
    ap.add_argument("--no-viewer", action="store_true", help="no viewer pages (the reruns still run)")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.no_viewer:
        env["BENCH_NO_VIEWER"] = "1"
    env.setdefault("ACEMAD_DATA_DIR", str(HERE.parent / "shared" / "benchmarks"))
    if args.quick:
        env["ACEMAD_SMOKE"] = "1"
    print(f"load before: {_uptime()}  ({os.cpu_count()} cores)")
    if not args.ref:
        measure(HERE, env, args.only or notebooks(HERE), extras=not args.notebooks_only)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="acemad-bench-")) / "repo"
        subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(tmp), args.ref], check=True)
        try:
            env["PYTHONPATH"] = str(tmp)  # ahead of this checkout's editable install, in the driver and kernels
            head = subprocess.run(
                ["git", "-C", str(tmp), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            )
            print(f"measuring {args.ref} ({head.stdout.strip()}) in {tmp}")
            measure(tmp, env, args.only or notebooks(tmp), extras=not args.notebooks_only)
        finally:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(tmp)], check=False)
    print(f"load after: {_uptime()}")


if __name__ == "__main__":
    main()
