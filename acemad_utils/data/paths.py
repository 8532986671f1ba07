"""Where things live. Everything is relative to the repository root, whatever the working directory.

    from acemad_utils.data.paths import outputs
    outputs("figures")      # <root>/outputs/figures, or <root>/outputs/smoke/figures when ACEMAD_SMOKE=1
    root()                  # where outputs/ and data/subsets/ are written: $ACEMAD_ROOT, else the checkout
    with outputs_root("my_runs"): ...   # outputs(...) under ./my_runs instead (the public API's `out=`)
    PAPER                   # <repo>/data/paper: our transcription of the paper's printed Tables 1-6
    shared_paper_dir()      # the copy data/paper/ is checked against ($ACEMAD_PAPER_DIR or ../shared/paper/tables)
    safe_segment(name, "profile name")   # name, or UnsafeName: one path segment, nothing outside outputs/

Smoke runs (CI, the browser test) write under outputs/smoke/ so they never overwrite a real reproduction.
What the code reads (notebooks/, profiles/, data/paper, data/demo) always comes from the checkout, ROOT.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from acemad_utils.data.settings import env, flag

ROOT = Path(__file__).resolve().parents[2]  # acemad_utils/data/paths.py -> the repository
CHECKOUT = ROOT  # the checkout this code is imported from
CHECKOUT_ENV = "ACEMAD_CHECKOUT"
DATA = ROOT / "data"
PAPER = DATA / "paper"  # the paper's printed Tables 1-6 as transcribed here (see data/paper/README.md)


def root() -> Path:
    """The folder holding what acemad writes (outputs/, data/subsets/): $ACEMAD_ROOT, read at every call so a
    test or a user can move it (a read-only checkout, a bigger disk), else the checkout."""
    raw = env("ACEMAD_ROOT")
    return Path(raw).expanduser().resolve() if raw else ROOT


def smoke() -> bool:
    """True when ACEMAD_SMOKE is set to anything but '' or '0': notebooks shrink to seconds."""
    return flag("ACEMAD_SMOKE")


def progress_bars() -> bool:
    """False when ACEMAD_PROGRESS is '0': papermill runs (make reproduce, make notebooks) and nbval set it, so an
    executed notebook stores no progress output (a widget there is dead, tqdm's text fallback is stderr noise);
    in JupyterLab the bars render as widgets (tqdm.auto with ipywidgets)."""
    return env("ACEMAD_PROGRESS") != "0"


def shared_paper_dir() -> Path:
    """The shared transcription of the paper's printed tables (table1_voting_vs_mad.csv, ...) that the project's
    own data/paper/ is compared with, cell by cell, in tests/test_paper_transcription.py: $ACEMAD_PAPER_DIR, else
    ../shared/paper/tables beside the repository (where CI keeps it). Nothing reads the paper's numbers from here;
    the folder may not exist (the test then skips). A relative ACEMAD_PAPER_DIR is tried from the working
    directory, then from the repository root."""
    raw = env("ACEMAD_PAPER_DIR") or None
    if raw is None:
        return ROOT.parent / "shared" / "paper" / "tables"
    path = Path(raw).expanduser()
    return path if path.is_absolute() or path.is_dir() else ROOT / path


class UnsafeName(ValueError):
    """A user-given name (profile, model, run) that is not one safe path segment; str() is the one line to show."""


# One path segment: letters, digits, '.', '_', '-'; not starting with '.' or '-' (no '..', no hidden file, no option).
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def safe_segment(value: str, what: str) -> str:
    """`value` if it is one safe path segment (a profile, model slug or run name becomes a folder or file name
    under outputs/), else UnsafeName naming `what` and the rule. A profile name '../../tmp/x' once made a run
    write its notebook and transcripts outside outputs/."""
    if not isinstance(value, str) or not _SEGMENT.fullmatch(value):
        raise UnsafeName(
            f"{what} {value!r} is not allowed: it becomes a folder name under outputs/, so it must be one path "
            "segment of letters, digits, '.', '_' or '-' (at most 128, not starting with '.' or '-')"
        )
    return value


# The folder outputs() writes under when a caller chose one (the public API, `python -m acemad_utils run`); None:
# the repository's outputs/ (the notebooks). A process-wide value, not a context variable: the runner's threads
# and worker processes must see the same folder as the call that chose it.
_ROOT_OVERRIDE: list[Path] = []


@contextlib.contextmanager
def outputs_root(root: os.PathLike | str):
    """Inside the block, outputs(...) is <root>/<parts...> instead of <repo>/outputs/ (no smoke/ subfolder: the
    caller named the folder). Runs, the response cache and viewer pages then live under `root`."""
    _ROOT_OVERRIDE.append(Path(root).expanduser().resolve())
    try:
        yield _ROOT_OVERRIDE[-1]
    finally:
        _ROOT_OVERRIDE.pop()


def outputs(*parts: str, create: bool = True) -> Path:
    """<root>/outputs/<parts...> (created), or <root>/<parts...> inside `outputs_root(root)`. Every part is one or
    more '/'-joined safe segments: nothing a user names can reach outside that folder."""
    for part in parts:
        for seg in str(part).split("/"):
            safe_segment(seg, "path part")
    if _ROOT_OVERRIDE:
        base = _ROOT_OVERRIDE[-1]
    else:
        base = root() / "outputs" / "smoke" if smoke() else root() / "outputs"
    path = base.joinpath(*parts)
    if create:  # a reader that only looks (create=False) leaves no empty folder behind
        path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: Path, text: str) -> None:
    """Write a whole file or nothing: a unique temp file in the same folder, fsync, then rename over."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """atomic_write for bytes (a compressed transcript)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these files are meant to be shared
        os.replace(tmp, path)
    except BaseException:  # a full disk (ENOSPC), Ctrl-C: no half-written temp file stays behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
