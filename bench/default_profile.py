"""The default profile from a true fresh clone, for several commits in one command (before/after ratios).

    python bench/default_profile.py                      # 3dd154b and HEAD
    python bench/default_profile.py 3dd154b main perf    # any commits; the first is the reference
    python bench/default_profile.py --quick HEAD         # smoke mode (ACEMAD_SMOKE=1), seconds
    python bench/default_profile.py --repeat 3           # 3 rounds of the commits in turn; the median ratio

Each commit is cloned (`git clone` of this repository, then a detached checkout) into a temp dir and runs
`python -m acemad_utils.reproduce --profile default` there from empty outputs/, with this interpreter and
PYTHONPATH set to the clone (no venv per clone). Printed per commit: CPU seconds of the whole process tree
(user + system of the driver and everything it waited for: kernels, forked workers; `os.wait4`), wall seconds,
peak RSS of the tree (the sum over the driver's live descendants, sampled from /proc every 0.2 s: a kernel's own
peak alone understates it), the load before and after. Then a rerun with nothing changed. Asserts nothing.
A VM's speed can move by ~10% between runs minutes apart: with --repeat, each round's ratio and their median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_rss(root: int) -> int:
    """Bytes resident in `root` and all its live descendants."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            parent[int(d)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            rss[int(d)] = int(Path(f"/proc/{d}/statm").read_text().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    tree, todo = {root}, [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in tree]
        tree.update(kids)
        todo += kids
    return sum(rss.get(p, 0) for p in tree)


def run_tree(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, float, str]:
    """(CPU s of the tree, wall s, peak tree RSS MB, stdout) of one command."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = proc.stdout.read() if proc.stdout else ""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.time() - t0
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}) in {cwd}:\n{out[-3000:]}")
    return ru.ru_utime + ru.ru_stime, wall, peak[0] / 2**20, out


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def measure(commit: str, quick: bool) -> tuple[str, float]:
    sha = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", commit], capture_output=True, text=True)
    sha_s = sha.stdout.strip() or sys.exit(f"unknown commit {commit}")
    with tempfile.TemporaryDirectory(prefix="acemad-clone-") as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(HERE), str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach", sha_s], check=True)
        env = {**os.environ, "PYTHONPATH": str(repo), "ACEMAD_SMOKE": "1" if quick else "0"}
        env.setdefault("ACEMAD_DATA_DIR", str(HERE.parent / "shared" / "benchmarks"))
        env.setdefault("ACEMAD_PAPER_DIR", str(HERE.parent / "shared" / "paper" / "tables"))
        cmd = [sys.executable, "-m", "acemad_utils.reproduce", "--profile", "default"]
        before = load()
        cpu, wall, peak, out = run_tree(cmd, repo, env)
        print(
            f"{commit} ({sha_s}) from empty: CPU {cpu:.1f} s, wall {wall:.1f} s, peak tree RSS {peak:.0f} MB; "
            f"{before} -> {load()}"
        )
        for line in out.splitlines():
            if line.lstrip().startswith("[") and "s" in line:
                print("   ", line.strip()[:110])
        cpu2, wall2, peak2, _ = run_tree(cmd, repo, env)
        print(
            f"{commit} ({sha_s}) rerun, nothing changed: CPU {cpu2:.1f} s, wall {wall2:.1f} s, "
            f"peak tree RSS {peak2:.0f} MB; {load()}"
        )
    return f"{commit} ({sha_s})", cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("commits", nargs="*", default=["3dd154b", "HEAD"], help="the first is the reference")
    ap.add_argument("--quick", action="store_true", help="smoke mode (ACEMAD_SMOKE=1)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every commit in turn (the median ratio)")
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores; {load()}; python {sys.executable}")
    rounds = [[measure(c, args.quick) for c in args.commits] for _ in range(max(args.repeat, 1))]
    ref = rounds[0][0][0]
    for i, (name, _) in enumerate(rounds[0][1:], 1):
        ratios = [r[i][1] / r[0][1] for r in rounds]
        each = f" (median of {len(ratios)} rounds: {', '.join(f'{x:.3f}' for x in ratios)})" if len(ratios) > 1 else ""
        print(f"{name}: {statistics.median(ratios):.2f}x the CPU of {ref}{each}")


if __name__ == "__main__":
    main()
