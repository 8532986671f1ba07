"""Skip a notebook whose executed copy is current, as `make` skips a target: `make reproduce` twice does the work once.

    stamp = Stamp(profile)                                    # what the last clean run of this profile recorded
    prints = {nb: fingerprint(path, params, environment(env)) for ...}  # what each notebook would run now
    todo = stale(prints, stamp.recorded, READS)               # what must run, with every notebook that reads one
    ...run them...
    stamp.save(prints, ran=todo, reads=READS) if the run ended cleanly else stamp.forget()

A notebook is up to date when the last run of this profile ended cleanly (exit status 0) and nothing it could depend
on has changed since:
- its fingerprint: the source of its cells, its parameters, the package's code, the ACEMAD_* environment, Python and
  the installed libraries' versions;
- the state of every file under outputs/ and data/ (path, size, modification time, as make compares), the response
  cache and lock files aside: a deleted table, a transcript edited or removed, another profile's run, anything.
A notebook that is not up to date runs, and so does every notebook that reads its runs (profiles.READS). A run
that did not end cleanly (a failed notebook, failed records, Ctrl-C, MAX_USD) records nothing and forgets the
last record: the next run executes everything. `--force` executes every selected notebook. Why not content
hashes of outputs/: a paper-scale profile holds gigabytes of transcripts; sizes and times are read in
milliseconds, and a file rewritten with the same bytes only costs a re-execution, never a stale result.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
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


def tree_state(roots: Iterable[Path], *, skip: Iterable[Path] = ()) -> str:
    """Path, size and modification time of every file under `roots` (folders in `skip` left out), hashed."""
    h, skipped = hashlib.sha256(), {Path(s).resolve() for s in skip}
    for root in roots:
        root = Path(root).resolve()
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if Path(folder, d) not in skipped)
            for name in sorted(files):
                if name.endswith(_IGNORED_SUFFIXES):
                    continue
                path = Path(folder, name)
                try:
                    st = path.stat()
                except FileNotFoundError:  # removed while we walked (another process's temp file)
                    continue
                h.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _inputs_state() -> str:
    """Everything a notebook may read or write: outputs/ (or outputs/smoke/) and data/, the response cache aside
    (transcripts are the source of truth; the cache only saves calls), and outside smoke mode the smoke folder."""
    base = paths.outputs(create=False)
    skip = [base / "cache"] + ([] if paths.smoke() else [base / "smoke"])
    return tree_state([base, paths.DATA], skip=skip)


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
    """The record of a profile's last clean run: the state of outputs/ and data/ when it ended, and the fingerprint
    of every notebook that was current then. Kept in outputs/notebooks/<profile>/.uptodate.json."""

    def __init__(self, profile: str):
        self.path = paths.outputs("notebooks", profile, create=False) / STAMP
        self.recorded: dict[str, str] = {}
        try:
            data = json.loads(self.path.read_text())
            if data.get("inputs") == _inputs_state() and isinstance(data.get("notebooks"), dict):
                self.recorded = {str(k): str(v) for k, v in data["notebooks"].items()}
        except (OSError, ValueError, AttributeError):  # none yet, or unreadable: nothing is up to date
            pass

    def save(self, fingerprints: Mapping[str, str], *, ran: Iterable[str], reads: Mapping[str, tuple]) -> None:
        """After a clean run: the notebooks of this run are current, with today's files. A notebook recorded
        earlier stays current unless it reads (transitively) one that ran: `--only 01` leaves 02 to run next."""
        ran = set(ran)
        known = {**self.recorded, **fingerprints}
        touched = stale(known, {nb: fp for nb, fp in known.items() if nb not in ran}, reads)
        notebooks = {nb: fp for nb, fp in self.recorded.items() if nb not in touched}
        notebooks.update(fingerprints)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        paths.atomic_write(self.path, json.dumps({"inputs": _inputs_state(), "notebooks": notebooks}, indent=1))

    def forget(self) -> None:
        """After a run that did not end cleanly: the next run executes every notebook."""
        self.path.unlink(missing_ok=True)
