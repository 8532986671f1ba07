"""Broken files as one line naming the file, what is wrong and the fix that keeps results:

meta = read_json(path, need=("methods",), fix="delete that file alone and rerun")   # DamagedFile if not
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class DamagedFile(ValueError):
    """A file the project wrote cannot be read as it should; str() is the one line to show (file, what, fix)."""


def damaged(path: Path, what: str, fix: str) -> DamagedFile:
    return DamagedFile(f"{path} is damaged ({what}): {fix}")


def read_json(path: Path, *, need: Sequence[str] = (), fix: str) -> Any:
    """The JSON object in `path` (a dict holding every key of `need`), else DamagedFile naming `fix`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise damaged(path, f"not UTF-8 text: {e.reason} at byte {e.start}", fix) from None
    try:
        obj = json.loads(text)
    except ValueError as e:  # JSONDecodeError: truncated, garbled
        raise damaged(path, f"not whole JSON: {e}" if text.strip() else "empty", fix) from None
    if not isinstance(obj, dict):
        raise damaged(path, f"a JSON {type(obj).__name__}, not an object", fix)
    missing = [k for k in need if k not in obj]
    if missing:
        raise damaged(path, f"no {', '.join(map(repr, missing))}", fix)
    return obj
