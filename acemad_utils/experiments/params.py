"""The notebook parameters: names, types and defaults live in each notebook's annotated `parameters` cell only; RULES
adds what a value may be, checked once, when a profile is loaded or a Setup built."""

from __future__ import annotations

import ast
import contextlib
import copy
import datetime
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlparse

from acemad_utils.data.paths import ROOT, UnsafeName, safe_segment
from acemad_utils.data.sim_params import POPULATIONS
from acemad_utils.experiments.paper_tables import ALL_BENCHMARKS, PAPER_TABLES
from acemad_utils.experiments.subsets import SYNTHETIC_SLUG, model_slug
from acemad_utils.protocol.config import ETA

PHASE_ETA = (0.0, 0.5, 1.0, ETA, 4.0, 8.0, 16.0)  # notebook 00's phase grid (theory.py); the paper's eta among them
PHASE_T_MAX = 5
# Largest accepted values: more questions than any benchmark holds, more threads than an endpoint takes, more agents
# and rounds than a prompt fits; eta above 64 overflows exp(eta * S) over 50 rounds.
MAX_ITEMS, MAX_WORKERS, MAX_AGENTS, MAX_ROUNDS, MAX_ETA, MAX_SEED, MAX_TOKENS = (
    10**6, 256, 100, 50, 64.0, 2**32 - 1, 10**6,
)  # fmt: skip
ENTRY_KEYS = ("table", "paper_model", "model", "base_url")  # an OTHER_MODELS entry, in this order
#: The parameters a notebook passes to notebook.start (Setup's arguments, lower-cased).
SETUP_NAMES = ("PROFILE", "BACKEND", "POPULATION", "SOURCE", "BENCHMARKS", "N_ITEMS", "SEED", "WORKERS", "MODEL",
               "BASE_URL", "CALLS", "SUBSET_MODEL", "ARGUE_MAX_TOKENS")  # fmt: skip
_ITEM = {"str": "text", "int": "a whole number", "float": "a number", "bool": "true or false"}
_TEXT = {
    "url": "an http(s) URL with a host, or empty for the default endpoint",
    "segment": "one path segment of letters, digits, '.', '_' or '-'",
    "model": "a model name with a letter or digit (at most 100 characters), or empty",
}


def assignments(source: str) -> dict[str, tuple[str, Any]]:
    """NAME -> (annotation, literal value) of a cell's `NAME: type = value` / `NAME = value` lines."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            annotation = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
            with contextlib.suppress(ValueError):  # not a literal
                if isinstance(target, ast.Name):
                    out[target.id] = (annotation, ast.literal_eval(node.value))
    return out


def _parameters_cell(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if "parameters" in c["metadata"].get("tags", []))["source"])


#: notebook -> NAME -> (type, default), from every notebook's parameters cell
PATHS = {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
DECLARED = {nb: assignments(_parameters_cell(path)) for nb, path in PATHS.items()}
NOTEBOOKS = tuple(DECLARED)


@dataclass(frozen=True)
class Param:
    """kind: the cell's annotation; choices or [lo, hi] bound every item; text: 'url', 'segment' or 'model'."""

    name: str
    kind: str
    choices: Optional[tuple] = None
    lo: Optional[float] = None
    hi: Optional[float] = None
    nullable: bool = False
    text: Optional[str] = None

    def allowed(self) -> str:
        base = self.kind.removeprefix("list[").removesuffix("]")
        if self.kind == "list[dict]":
            return f"a list of maps with exactly the keys {list(ENTRY_KEYS)}, table one of {sorted(PAPER_TABLES)}"
        if self.choices is not None:
            text = f"one of {list(self.choices)}"
        elif self.lo is not None:
            text = f"{_ITEM[base]} from {self.lo:g} to {self.hi:g}"
        else:
            text = _TEXT.get(self.text or "", _ITEM[base])
        if self.kind.startswith("list["):
            text = f"a non-empty list, each {text}"
        return text + (", or null" if self.nullable else "")


#: What a value may be beyond its annotated type (OTHER_MODELS: _entries_problem).
RULES: dict[str, dict[str, Any]] = {
    "PROFILE": {"text": "segment"},
    **dict.fromkeys(("MODEL", "SUBSET_MODEL", "SECOND_MODEL"), {"text": "model"}),
    **dict.fromkeys(("BASE_URL", "SECOND_BASE_URL"), {"text": "url"}),
    "BACKEND": {"choices": ("sim", "local", "openai")},
    "POPULATION": {"choices": tuple(POPULATIONS)},
    "SOURCE": {"choices": ("synthetic", "benchmarks", "demo")},
    "CALLS": {"choices": ("two", "single")},
    **dict.fromkeys(("BENCHMARKS", "FULL_BENCHMARKS"), {"choices": tuple(ALL_BENCHMARKS)}),
    **dict.fromkeys(("N_ITEMS", "N_MAX", "FULL_N_MAX"), {"lo": 1, "hi": MAX_ITEMS, "nullable": True}),  # null: all
    **dict.fromkeys(("GRID_N_MAX", "THEORY_ITEMS"), {"lo": 1, "hi": MAX_ITEMS}),
    "SEED": {"lo": 0, "hi": MAX_SEED},
    "WORKERS": {"lo": 1, "hi": MAX_WORKERS},
    "ARGUE_MAX_TOKENS": {"lo": 1, "hi": MAX_TOKENS, "nullable": True},
    "N_VALUES": {"lo": 1, "hi": MAX_AGENTS},
    "N_TABLE": {"lo": 2, "hi": MAX_AGENTS},
    **dict.fromkeys(("ROUNDS", "THEORY_ROUNDS"), {"lo": 1, "hi": MAX_ROUNDS}),
    "ETA": {"lo": 0, "hi": MAX_ETA},
    "ETA_PHASE": {"choices": PHASE_ETA},
    "T_PHASE": {"lo": 1, "hi": PHASE_T_MAX},
    # notebook 09's map axes: SimParams values (docs/population.md)
    **dict.fromkeys(("LINKS", "INSIGHTS", "CROWD_CALIBRATIONS", "CROWD_COPIES"), {"lo": 0, "hi": 1}),
    "TRAP_CONCENTRATIONS": {"lo": 1e-3, "hi": 1e6},
}
_KINDS = {name: kind for nb in (*NOTEBOOKS[1:], NOTEBOOKS[0]) for name, (kind, _) in DECLARED[nb].items()}
SCHEMA: dict[str, Param] = {name: Param(name, _KINDS[name], **RULES.get(name, {})) for name in _KINDS}


def names(nb: str) -> list[str]:
    return list(DECLARED.get(nb, {}))  # a notebook outside notebooks/ (a test's) declares none


def defaults(nb: str) -> dict[str, Any]:
    return {name: copy.deepcopy(value) for name, (_, value) in DECLARED.get(nb, {}).items()}


def notebooks_of(name: str) -> list[str]:
    return [nb for nb, declared in DECLARED.items() if name in declared]


def not_plain(value: Any) -> Optional[str]:
    """What in `value` is not plain data (text, numbers, bools, None, lists, str-keyed maps), or None."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, dict) and any(not isinstance(k, str) for k in value):
        return f"a map key {next(k for k in value if not isinstance(k, str))!r} that is not text"
    if isinstance(value, (list, dict)):
        return next(filter(None, map(not_plain, value.values() if isinstance(value, dict) else value)), None)
    if isinstance(value, (datetime.date, datetime.time)):
        return f"a date or timestamp ({value}; quote it to pass text)"
    what: dict[type, str] = {bytes: "bytes (a !!binary value)", set: "a set (!!set)", frozenset: "a set (!!set)"}
    return what.get(type(value), f"a {type(value).__name__} value")


def _type_ok(kind: str, v: Any) -> bool:
    if kind.startswith("list["):
        return isinstance(v, list) and all(_type_ok(kind[5:-1], x) for x in v)
    if kind == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, {"str": str, "int": int, "bool": bool}[kind]) and (kind == "bool" or not isinstance(v, bool))


def _url_problem(v: str) -> Optional[str]:
    try:
        ok = v == "" or (urlparse(v).scheme in ("http", "https") and bool(urlparse(v).hostname))
    except ValueError:  # an unparsable port or host
        ok = False
    return None if ok else f"{v!r} is not an http:// or https:// URL with a host"


def _model_problem(v: str) -> Optional[str]:
    # a model name becomes a folder name (subsets.model_slug), also as a synthetic stand-in's
    try:
        model_slug(f"{SYNTHETIC_SLUG}-{v}", synthetic=True)
    except ValueError:
        return f"{_short(v)} does not make a folder name"
    return None if len(v) <= 100 else "the name is longer than 100 characters"


def _entry_problem(e: Any) -> Optional[str]:
    if not isinstance(e, dict) or set(e) != set(ENTRY_KEYS):
        return f"each entry needs exactly the keys {list(ENTRY_KEYS)}, got {_short(e)}"
    bad = [k for k in ENTRY_KEYS if not isinstance(e[k], str)]
    if bad:
        return f"{bad[0]} = {_short(e[bad[0]])} is not text"
    if e["table"] not in PAPER_TABLES:
        return f"unknown table {e['table']!r}; tables: {sorted(PAPER_TABLES)}"
    if not e["model"] or not e["paper_model"]:
        return "model and paper_model must not be empty"
    return _model_problem(e["model"]) or _model_problem(e["paper_model"]) or _url_problem(e["base_url"])


def _entries_problem(entries: list) -> Optional[str]:
    if why := next(filter(None, map(_entry_problem, entries)), None):
        return why
    for key in (lambda e: (e["table"], e["paper_model"]), lambda e: (e["table"], model_slug(e["model"]))):  # folder
        if len(set(map(key, entries))) < len(entries):
            return "two entries with the same table and model (each table runs once per model)"
    return None


def _item_problem(p: Param, x: Any) -> Optional[str]:
    if p.choices is not None and x not in p.choices:
        return f"{x!r} is not a choice"
    if p.lo is not None and p.hi is not None and not (math.isfinite(x) and p.lo <= x <= p.hi):
        return f"{x!r} is out of range"
    if p.text == "url":
        return _url_problem(x)
    if p.text == "model" and x:
        return _model_problem(x)
    if p.text == "segment":
        try:
            safe_segment(x, p.name)
        except UnsafeName:
            return f"{x!r} is not one path segment"
    return None


def problem(name: str, value: Any) -> Optional[str]:
    p = SCHEMA[name]
    if why := not_plain(value):
        return f"it holds {why}"
    if value is None:
        return None if p.nullable else "null is not allowed here"
    if p.kind == "list[dict]":
        return _entries_problem(value) if isinstance(value, list) else "need a list"
    if not _type_ok(p.kind, value):
        return f"need {p.kind}, got {type(value).__name__}"
    if value == []:
        return "the list is empty: name at least one"
    return next(filter(None, (_item_problem(p, x) for x in (value if isinstance(value, list) else [value]))), None)


def _short(value: Any, limit: int = 80) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def refusal(name: str, value: Any) -> Optional[str]:
    """The one line refusing `value` for parameter `name`, or None when it is allowed."""
    why = problem(name, value)
    return f"{name} = {_short(value)} is not allowed ({why}); {name} takes {SCHEMA[name].allowed()}" if why else None


def check(P: Mapping[str, Any]) -> None:
    """Raise the one-line refusal (ValueError) of the first parameter in P whose value is not allowed."""
    if refused := next(filter(None, (refusal(name, v) for name, v in P.items() if name in SCHEMA)), None):
        raise ValueError(refused)


def literal(value: Any) -> str:
    """The Python source of a plain value (papermill's injected cell): anything else is refused, never code."""
    why = not_plain(value)
    if why or (isinstance(value, float) and not math.isfinite(value)):
        raise TypeError(f"not a plain finite value: {why or value!r}")
    return repr(value)


def meanings() -> dict[str, str]:
    import papermill as pm  # seconds to import: only for the docs and the tests

    out: dict[str, str] = {}
    for nb in NOTEBOOKS:
        for name, p in pm.inspect_notebook(str(ROOT / "notebooks" / f"{nb}.ipynb")).items():
            out.setdefault(name, p["help"])
    return out


def markdown(env_vars: Mapping[str, str]) -> str:
    out = [
        "# Parameters and environment variables",
        "",
        "Generated by `.venv/bin/python -m acemad_utils.experiments.profiles --parameters-doc > docs/parameters.md`"
        " from",
        "the notebooks' parameters cells and `acemad_utils/experiments/params.py` (what a value may be), and",
        "`acemad_utils/data/settings.py` (environment).",
        "A profile sets parameters per notebook (`common:` or `notebooks:`), `--set NAME=VALUE` for one run.",
        "",
        "| name | type | allowed | default | notebooks | meaning |",
        "|---|---|---|---|---|---|",
    ]
    meaning = meanings()
    for p in SCHEMA.values():
        first, *rest = [(nb, DECLARED[nb][p.name][1]) for nb in notebooks_of(p.name)]
        default = f"`{first[1]!r}`" if p.kind != "list[dict]" else "the paper's three tables"
        default += "".join(f"; {nb[:2]}: `{v!r}`" for nb, v in rest if v != first[1])
        nbs = ", ".join(nb[:2] for nb, _ in [first, *rest])
        out.append(f"| `{p.name}` | {p.kind} | {p.allowed()} | {default} | {nbs} | {meaning[p.name]} |")
    out += ["", "| environment variable | meaning |", "|---|---|"]
    out += [f"| `{k}` | {v} |" for k, v in env_vars.items()]
    return "\n".join(out) + "\n"
