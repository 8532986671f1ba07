"""Reading a run's transcripts: outputs/runs/<name>/transcripts.jsonl and meta.json (what every table reads).

    from acemad_utils.data.transcripts import load_run
    meta, records = load_run("default/main")

Writing them (resumable, whole lines, canonical order) is experiments.runner's job; reading lives here, below
the report, so that tables, figures and the viewer read runs without importing the code that makes them.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from acemad_utils.data.paths import outputs


def run_dir(name: str) -> Path:
    return outputs("runs", name)


def read_jsonl(path: Path) -> list[dict]:
    """Read records; a torn or corrupt line (a crash mid-write) is dropped with a warning, never parsed.
    Only JSON objects are records: any other line (a number, a list, bad UTF-8) counts as corrupt."""
    out = []
    if not path.exists():
        return out
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            rec = None
        if isinstance(rec, dict):
            out.append(rec)
        else:
            warnings.warn(f"{path}:{n}: dropped a torn/corrupt transcript line ({len(line)} bytes)", stacklevel=2)
    return out


def load_run(name: str) -> tuple[dict, list[dict]]:
    d = run_dir(name)
    meta_path = d / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"no run named {name!r} under {d.parent}; run its notebook first")
    meta = json.loads(meta_path.read_text())
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    return meta, [r for r in read_jsonl(d / "transcripts.jsonl") if r["config_hash"] in hashes]


def profile_runs(profile: str) -> dict[str, tuple[dict, list[dict]]]:
    """Every run of a profile that has a meta.json, {experiment name: (meta, records)} (the claims ledger's input)."""
    base = outputs("runs", profile)
    return {d.name: load_run(f"{profile}/{d.name}") for d in sorted(base.iterdir()) if (d / "meta.json").is_file()}
