"""Where things live: the code reads from the checkout (ROOT) and writes under root() ($ACEMAD_ROOT, else the
checkout): outputs/ (outputs/smoke/ in smoke mode, so a smoke run never overwrites a real one) or `outputs_root`."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

from acemad_utils.data.settings import env, flag

ROOT = CHECKOUT = Path(__file__).resolve().parents[2]  # acemad_utils/data/paths.py -> the repository
CHECKOUT_ENV = "ACEMAD_CHECKOUT"
DATA = ROOT / "data"
PAPER = DATA / "paper"  # the paper's printed Tables 1-6 as transcribed here (see data/paper/README.md)


def root() -> Path:
    raw = env("ACEMAD_ROOT")  # read at every call
    return Path(raw).expanduser().resolve() if raw else ROOT


def smoke() -> bool:
    return flag("ACEMAD_SMOKE")


def progress_bars() -> bool:
    return env("ACEMAD_PROGRESS") != "0"  # papermill and nbval: an executed notebook stores no progress


def shared_paper_dir() -> Path:
    """The paper's tables data/paper/ is checked against (tests): $ACEMAD_PAPER_DIR, else ../shared/paper/tables."""
    if not (raw := env("ACEMAD_PAPER_DIR")):
        return ROOT.parent / "shared" / "paper" / "tables"
    path = Path(raw).expanduser()
    return path if path.is_absolute() or path.is_dir() else ROOT / path


class UnsafeName(ValueError):
    """A user-given name (profile, model, run) that is not one safe path segment; str() is the one line to show."""


# Letters, digits, '.', '_', '-'; not starting with '.' or '-' (no '..', no hidden file, no option).
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def safe_segment(value: str, what: str) -> str:
    """`value` if it is one safe path segment (a profile '../../tmp/x' once wrote outside outputs/)."""
    if not isinstance(value, str) or not _SEGMENT.fullmatch(value):
        raise UnsafeName(
            f"{what} {value!r} is not allowed: it becomes a folder name under outputs/, so it must be one path "
            "segment of letters, digits, '.', '_' or '-' (at most 128, not starting with '.' or '-')"
        )
    return value


# Process-wide, not a context variable: the runner's threads must see the folder the call chose. So two threads may
# not hold two different folders at once: the second is refused (its files would land in the first's folder).
_ROOT_OVERRIDE: list[tuple[Path, int]] = []  # (folder, thread) of each open block; the last one is the root
_GUARD = threading.Lock()


@contextlib.contextmanager
def outputs_root(root: os.PathLike | str):
    """Inside the block, outputs(...) is <root>/<parts...> (no smoke/ subfolder: the caller named the folder)."""
    path, me = Path(root).expanduser().resolve(), threading.get_ident()
    with _GUARD:
        if other := next((p for p, t in _ROOT_OVERRIDE if p != path and t != me), None):
            raise RuntimeError(f"another thread of this process is running with out={str(other)!r}: calls with "
                               "different `out` share one process-wide output folder, so run them one after another "
                               "or in separate processes")  # fmt: skip
        _ROOT_OVERRIDE.append((path, me))
    try:
        yield path
    finally:
        with _GUARD:
            del _ROOT_OVERRIDE[len(_ROOT_OVERRIDE) - 1 - _ROOT_OVERRIDE[::-1].index((path, me))]  # its last entry


def outputs(*parts: str, create: bool = True) -> Path:
    """<root>/outputs/<parts...>, each part '/'-joined safe segments; create=False leaves no empty folder behind."""
    for part in parts:
        for seg in str(part).split("/"):
            safe_segment(seg, "path part")
    base = _ROOT_OVERRIDE[-1][0] if _ROOT_OVERRIDE else root() / "outputs" / ("smoke" if smoke() else "")
    path = base.joinpath(*parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write a whole file or nothing: a unique temp file in the same folder, fsync, then rename over."""
    data = data.encode("utf-8") if isinstance(data, str) else data
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


def python() -> str:
    """This interpreter as a command to type: relative from inside its tree (`.venv/bin/python` from the repo)."""
    here = os.path.relpath(sys.executable)
    return sys.executable if here.startswith("..") else here
