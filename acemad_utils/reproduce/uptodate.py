"""Skip a notebook whose executed copy is current, as make would, but by content (sha256): its cells, parameters, the
package's code, settings, versions, and the files the notebooks write and read, which make's file times cannot see."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

from acemad_utils.agents.budget import ENV_SINCE
from acemad_utils.agents.health import PROGRESS_ENV
from acemad_utils.agents.locks import HOLDER_SUFFIX, LOCK_HOLDER_ENV
from acemad_utils.agents.redact import URL_SECRETS_ENV
from acemad_utils.data import paths
from acemad_utils.data.benchmarks import ENV_VAR as DATA_DIR_ENV
from acemad_utils.data.benchmarks import HUB
from acemad_utils.data.settings import env

STAMP = ".uptodate.json"
#: The driver's per-run bookkeeping: it changes without changing what a notebook computes.
VOLATILE_ENV = {ENV_SINCE, "ACEMAD_PROGRESS", PROGRESS_ENV, URL_SECRETS_ENV, LOCK_HOLDER_ENV}
_IGNORED_SUFFIXES = (".lock", HOLDER_SUFFIX, ".progress.log", STAMP)  # a lock and its holder change every run


@lru_cache(maxsize=1)
def _environment_hash(env_items: tuple) -> str:
    h = hashlib.sha256(sys.version.encode())
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    # the installed versions by their *.dist-info folder names (name-version): importlib.metadata parses every
    # METADATA file with the email parser, seconds of an up-to-date run
    h.update("\n".join(sorted(p.name for e in sys.path if os.path.isdir(e) for p in Path(e).glob("*.*-info"))).encode())
    h.update(json.dumps(env_items).encode())
    return h.hexdigest()


def environment(extra: Mapping[str, str]) -> tuple:
    items = {k: v for k, v in os.environ.items() if k.startswith("ACEMAD_")} | dict(extra)
    items["ACEMAD_SMOKE"] = "1" if paths.smoke() else ""  # unset, '' and '0' all mean off ('' is left out)
    return tuple(sorted((k, v) for k, v in items.items() if k not in VOLATILE_ENV and v != ""))


def fingerprint(notebook: Path, params: Mapping, env_items: tuple) -> str:
    try:  # json, not nbformat: its import (jsonschema's grammars) costs an up-to-date run seconds
        cells = [(c["cell_type"], "".join(c["source"])) for c in json.loads(Path(notebook).read_bytes())["cells"]]
    except (OSError, ValueError, KeyError, TypeError):  # unreadable: never current (it runs, fails with its line)
        return "unreadable-" + os.urandom(8).hex()
    blob = json.dumps([cells, dict(params), _environment_hash(env_items)], sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


def _digest(path: str) -> str:
    """sha256 of a regular file; another kind (a FIFO, whose read would block) by its kind."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        return f"not a regular file ({stat.S_IFMT(mode):o})"
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()  # type: ignore[attr-defined]


def tree_state(roots: Iterable[Path], *, skip: Iterable[Path] = ()) -> str:
    """The content of every file under `roots`, links followed, each directory once (a link to a parent would loop)."""
    h, skipped = hashlib.sha256(), {Path(s).resolve() for s in skip}
    for i, root in enumerate(map(lambda r: Path(r).resolve(), roots)):
        if not root.is_dir():
            try:
                h.update(f"{i}\0{_digest(str(root))}\n".encode())
            except OSError:
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
            for name in sorted(f for f in files if not f.endswith(_IGNORED_SUFFIXES)):
                path = os.path.join(folder, name)
                try:
                    h.update(f"{i}\0{Path(path).relative_to(root)}\0{_digest(path)}\n".encode())
                except FileNotFoundError:  # removed while we walked, a dead link
                    continue
    return h.hexdigest()


def _outside() -> list[Path]:
    out = []
    if raw := env(DATA_DIR_ENV):
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
    out += [paths.ROOT / "notebooks" / "matplotlibrc", config / "matplotlibrc", config / "stylelib"]
    return out + ([Path(rc), Path(rc) / "matplotlibrc"] if rc else [])


def _written_state() -> str:
    base = paths.outputs(create=False)
    skip = [base / "cache", base / "viewer"] + ([] if paths.smoke() else [base / "smoke"])  # no notebook reads them
    return tree_state([base, paths.root() / "data" / "subsets"], skip=skip)


def _read_state() -> str:  # data/, the benchmark files or hub cache, matplotlibrc
    return tree_state([paths.DATA, *_outside()], skip=[paths.DATA / "subsets"])


def stale(fingerprints: Mapping[str, str], recorded: Mapping[str, str], reads: Mapping[str, tuple]) -> list[str]:
    """The notebooks that must run: a changed fingerprint, or reading (transitively) one that runs."""
    out = {nb for nb, fp in fingerprints.items() if recorded.get(nb) != fp}
    while grew := [
        nb for nb in fingerprints
        if nb not in out and (out - {nb} if "*" in reads.get(nb, ()) else out.intersection(reads.get(nb, ())))
    ]:  # fmt: skip
        out.update(grew)
    return [nb for nb in fingerprints if nb in out]


class Stamp:
    """A profile's last clean run: the state of what the notebooks wrote and read, and every current fingerprint."""

    def __init__(self, profile: str):
        self.path = paths.outputs("notebooks", profile, create=False) / STAMP
        self.recorded: dict[str, str] = {}
        self.read_before = _read_state()  # before any notebook of this run reads it
        with contextlib.suppress(OSError, ValueError, AttributeError):
            data = json.loads(self.path.read_text())
            if data.get("inputs") == [_written_state(), self.read_before] and isinstance(data.get("notebooks"), dict):
                self.recorded = {str(k): str(v) for k, v in data["notebooks"].items()}

    def save(self, fingerprints: Mapping[str, str], *, ran: Iterable[str], reads: Mapping[str, tuple]) -> str:
        """After a clean run; returns '' or why nothing was recorded (a file they read changed while they ran)."""
        read_now = _read_state()
        if read_now != self.read_before:
            self.forget()
            return (
                "a file the notebooks read (data/, ACEMAD_DATA_DIR, matplotlibrc) changed while they ran: nothing is "
                "recorded as up to date, the next run executes them again"
            )
        ran, known = set(ran), {**self.recorded, **fingerprints}
        touched = stale(known, {nb: fp for nb, fp in known.items() if nb not in ran}, reads)
        current = {nb: fp for nb, fp in self.recorded.items() if nb not in touched} | dict(fingerprints)
        self.path.parent.mkdir(parents=True, exist_ok=True)  # first: a missing outputs/ hashes unlike an empty one
        inputs = [_written_state(), read_now]
        paths.atomic_write(self.path, json.dumps({"inputs": inputs, "notebooks": current}, indent=1))
        return ""

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)
