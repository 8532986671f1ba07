"""Skip a notebook whose executed copy is current, as `make` skips a target: `make reproduce` twice does the work once.

    stamp = Stamp(profile)                                    # what the last clean run of this profile recorded
    prints = {nb: fingerprint(path, params, environment(env)) for ...}  # what each notebook would run now
    todo = stale(prints, stamp.recorded, READS)               # what must run, with every notebook that reads one
    ...run them...
    stamp.save(prints, ran=todo, reads=READS) if the run ended cleanly else stamp.forget()

A notebook is up to date when the last run of this profile ended cleanly (exit status 0) and nothing it could depend
on has changed since:
- its fingerprint: the source of its cells, its parameters, the package's code, the ACEMAD_* environment, Python and
  the installed libraries' versions (the kernels import the driver's checkout: cli.py puts it first on PYTHONPATH);
- the content (sha256) of every file the notebooks write and read: outputs/ and data/ (the response cache and lock
  files aside), and what they read from outside the checkout: the benchmark files (ACEMAD_DATA_DIR, else the hub's
  cache of the benchmark datasets) and matplotlib's configuration (matplotlibrc, styles). Directory links are
  followed (outputs/runs on another disk). Contents, not size and time: a file edited and `touch -r`-ed back, or
  rewritten within the clock's tick, keeps both. Hashing 100 MB of runs (the default profile's) took 0.48 s at load
  14 on 2 cores; a rerun hashes them twice (before and after).
What the notebooks only read (data/ but data/subsets, the files outside the checkout) is hashed before the run and
again after it: a file edited while a notebook read it leaves nothing up to date (the notebook may have read the old
bytes), so the next run executes them again. What they write is recorded as it is when the run ends.
A notebook that is not up to date runs, and so does every notebook that reads its runs (profiles.READS). A run
that did not end cleanly (a failed notebook, failed records, Ctrl-C, MAX_USD) records nothing and forgets the
last record: the next run executes everything. `--force` executes every selected notebook.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

import nbformat

from acemad_utils.agents.budget import ENV_SINCE
from acemad_utils.agents.health import PROGRESS_ENV
from acemad_utils.agents.locks import LOCK_HOLDER_ENV
from acemad_utils.agents.redact import URL_SECRETS_ENV
from acemad_utils.data import paths
from acemad_utils.data.benchmarks import ENV_VAR as DATA_DIR_ENV
from acemad_utils.data.benchmarks import HUB
from acemad_utils.data.settings import env

STAMP = ".uptodate.json"
#: Environment variables that change from run to run without changing what a notebook computes: the driver's own
#: bookkeeping (budget start, progress file, URL credentials, lock holder) and the progress-bar switch.
VOLATILE_ENV = {ENV_SINCE, "ACEMAD_PROGRESS", PROGRESS_ENV, URL_SECRETS_ENV, LOCK_HOLDER_ENV}
#: Files that change while nothing a notebook reads does: locks, the driver's progress log, this stamp.
_IGNORED_SUFFIXES = (".lock", ".progress.log", STAMP)


def _package_root() -> Path:
    return Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def _environment_hash(env_items: tuple) -> str:
    """The package's code, Python, the installed libraries and the ACEMAD_* settings, hashed once per driver."""
    h = hashlib.sha256(sys.version.encode())
    root = _package_root()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    h.update("\n".join(dists).encode())
    h.update(json.dumps(env_items).encode())
    return h.hexdigest()


def environment(extra: Mapping[str, str]) -> tuple:
    """The ACEMAD_* settings a run's kernels get (this process's, then the profile's run settings), minus the
    driver's per-run bookkeeping: part of every notebook's fingerprint."""
    env = {k: v for k, v in os.environ.items() if k.startswith("ACEMAD_")}
    env.update(extra)
    env.pop("ACEMAD_SMOKE", None)  # unset, '' and '0' all mean off (`make notebooks` sets 0, `make reproduce` not)
    env.update({"ACEMAD_SMOKE": "1"} if paths.smoke() else {})
    return tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE_ENV and v != ""))


def fingerprint(notebook: Path, params: Mapping, env_items: tuple) -> str:
    """What the notebook would run: its cells' sources (not their outputs: `make notebooks` stores those into the
    same file), its parameters and the environment hash."""
    try:
        cells = [(c.cell_type, c.source) for c in nbformat.read(str(notebook), as_version=4).cells]
    except (OSError, ValueError, AttributeError):  # unreadable: never current (it runs, and fails with its own line)
        return "unreadable-" + os.urandom(8).hex()
    blob = json.dumps([cells, dict(params), _environment_hash(env_items)], sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


def _digest(path: str) -> str:
    """sha256 of a regular file's bytes; another kind of file (a FIFO, whose read would block) by its kind only."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        return f"not a regular file ({stat.S_IFMT(mode):o})"
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def tree_state(roots: Iterable[Path], *, skip: Iterable[Path] = ()) -> str:
    """The content of every file under `roots` (a root may be a single file; a missing one counts as missing),
    by path, directory links followed, each directory once (a link to a parent would loop); `skip` left out."""
    h, skipped = hashlib.sha256(), {Path(s).resolve() for s in skip}
    for i, root in enumerate(roots):
        root = Path(root).resolve()
        if not root.is_dir():
            try:
                h.update(f"{i}\0{_digest(str(root))}\n".encode())
            except OSError:  # absent (or unreadable): counted as such
                h.update(f"{i}\0missing\n".encode())
            continue
        seen: set[tuple[int, int]] = set()
        for folder, dirs, files in os.walk(root, followlinks=True):
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen or Path(folder) in skipped:
                dirs[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            dirs.sort()
            for name in sorted(files):
                if name.endswith(_IGNORED_SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                try:
                    digest = _digest(path)
                except FileNotFoundError:  # removed while we walked (another process's temp file), a dead link
                    continue
                h.update(f"{i}\0{Path(path).relative_to(root)}\0{digest}\n".encode())
    return h.hexdigest()


def _outside() -> list[Path]:
    """What notebooks read from outside the checkout: the benchmark files (ACEMAD_DATA_DIR, else the hub's cache of
    the benchmark datasets) and matplotlib's configuration (a matplotlibrc or a style changes every figure)."""
    out = []
    raw = env(DATA_DIR_ENV)
    if raw:
        path = Path(raw).expanduser()
        out.append(path if path.is_absolute() or path.exists() else paths.ROOT / path)
    else:
        hf = Path(os.environ.get("HF_HOME") or "~/.cache/huggingface").expanduser()
        for cache, joint, prefix in (
            (os.environ.get("HF_DATASETS_CACHE") or hf / "datasets", "___", ""),
            (os.environ.get("HF_HUB_CACHE") or hf / "hub", "--", "datasets--"),
        ):
            out += [Path(cache) / (prefix + name.replace("/", joint)) for name, _, _ in HUB.values()]
    config = os.environ.get("MPLCONFIGDIR") or Path(os.environ.get("XDG_CONFIG_HOME") or "~/.config") / "matplotlib"
    config, rc = Path(config).expanduser(), os.environ.get("MATPLOTLIBRC")
    out += [paths.ROOT / "notebooks" / "matplotlibrc", config / "matplotlibrc", config / "stylelib"]  # kernels' cwd
    return out + ([Path(rc), Path(rc) / "matplotlibrc"] if rc else [])


def _written_state() -> str:
    """What the notebooks write: outputs/ (or outputs/smoke/; outside smoke mode the smoke folder aside) and
    data/subsets/, the response cache aside (transcripts are the source of truth; the cache only saves calls)."""
    base = paths.outputs(create=False)
    skip = [base / "cache"] + ([] if paths.smoke() else [base / "smoke"])
    return tree_state([base, paths.root() / "data" / "subsets"], skip=skip)


def _read_state() -> str:
    """What the notebooks only read: data/ (data/subsets aside: they write it) and the files outside the checkout."""
    return tree_state([paths.DATA, *_outside()], skip=[paths.DATA / "subsets"])


def stale(fingerprints: Mapping[str, str], recorded: Mapping[str, str], reads: Mapping[str, tuple]) -> list[str]:
    """The notebooks of `fingerprints` (in their order) that must run: those whose fingerprint differs from the
    recorded one, and every notebook that reads (transitively) one that runs ("*": reads every other notebook)."""
    out = {nb for nb, fp in fingerprints.items() if recorded.get(nb) != fp}
    grew = True
    while grew:
        grew = False
        for nb in fingerprints:
            needs = reads.get(nb, ())
            if nb not in out and (out - {nb} if "*" in needs else out.intersection(needs)):
                out.add(nb)
                grew = True
    return [nb for nb in fingerprints if nb in out]


class Stamp:
    """The record of a profile's last clean run: the content of what the notebooks wrote when it ended and of what
    they read (unchanged while they ran), and the fingerprint of every notebook that was current then. Kept in
    outputs/notebooks/<profile>/.uptodate.json."""

    def __init__(self, profile: str):
        self.path = paths.outputs("notebooks", profile, create=False) / STAMP
        self.recorded: dict[str, str] = {}
        self.read_before = _read_state()  # before any notebook of this run reads it
        try:
            data = json.loads(self.path.read_text())
            if data.get("inputs") == [_written_state(), self.read_before] and isinstance(data.get("notebooks"), dict):
                self.recorded = {str(k): str(v) for k, v in data["notebooks"].items()}
        except (OSError, ValueError, AttributeError):  # none yet, or unreadable: nothing is up to date
            pass

    def save(self, fingerprints: Mapping[str, str], *, ran: Iterable[str], reads: Mapping[str, tuple]) -> str:
        """After a clean run: the notebooks of this run are current, with today's files. A notebook recorded
        earlier stays current unless it reads (transitively) one that ran: `--only 01` leaves 02 to run next.
        Returns '' or, when a file the notebooks read changed while they ran, the line saying nothing was recorded."""
        read_now = _read_state()
        if read_now != self.read_before:
            self.forget()
            return (
                "a file the notebooks read (data/, ACEMAD_DATA_DIR, matplotlibrc) changed while they ran: nothing is "
                "recorded as up to date, the next run executes them again"
            )
        ran = set(ran)
        known = {**self.recorded, **fingerprints}
        touched = stale(known, {nb: fp for nb, fp in known.items() if nb not in ran}, reads)
        notebooks = {nb: fp for nb, fp in self.recorded.items() if nb not in touched}
        notebooks.update(fingerprints)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        state = {"inputs": [_written_state(), read_now], "notebooks": notebooks}
        paths.atomic_write(self.path, json.dumps(state, indent=1))
        return ""

    def forget(self) -> None:
        """After a run that did not end cleanly: the next run executes every notebook."""
        self.path.unlink(missing_ok=True)
