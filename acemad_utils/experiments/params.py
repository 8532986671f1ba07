"""Every notebook parameter in one typed schema (type, allowed values, default, notebooks); each notebook declares
them in an annotated `parameters` cell (`ETA: float = 2.0  # meaning`) that a test holds to this schema."""

from __future__ import annotations

import copy
import datetime
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import urlparse

from acemad_utils.data.paths import ROOT, UnsafeName, safe_segment
from acemad_utils.data.sim_params import POPULATIONS
from acemad_utils.experiments.paper_tables import ALL_BENCHMARKS, PAPER_TABLES
from acemad_utils.experiments.subsets import SYNTHETIC_SLUG, model_slug
from acemad_utils.experiments.theory import PHASE_ETA, PHASE_T_MAX
from acemad_utils.protocol.config import ARGUE_MAX_TOKENS, ETA, N_AGENTS, ROUNDS, TABLE2_ROUNDS

BACKENDS = ("sim", "local", "openai")
SOURCES = ("synthetic", "benchmarks", "demo")
CALLS = ("two", "single")
# Largest accepted values: more questions than any benchmark holds, more threads than an endpoint takes, more agents
# and rounds than a prompt fits; eta above 64 overflows exp(eta * S) over 50 rounds.
MAX_ITEMS, MAX_WORKERS, MAX_AGENTS, MAX_ROUNDS, MAX_ETA, MAX_SEED, MAX_TOKENS = (
    10**6, 256, 100, 50, 64.0, 2**32 - 1, 10**6,
)  # fmt: skip
ENTRY_KEYS = ("table", "paper_model", "model", "base_url")  # an OTHER_MODELS entry, in this order
SETUP = ("01", "02", "03", "04", "05", "06", "07", "08", "09")  # the notebooks that build a Setup (notebook.start)
NOTEBOOKS = ("00_theory", "01_subset_construction", "02_baselines", "03_main_results", "04_heterogeneity",
             "05_ablation", "06_scaling", "07_other_models", "08_claims", "09_assumption_map")  # fmt: skip
_ITEM = {"str": "text", "int": "a whole number", "float": "a number", "bool": "true or false"}
_TEXT = {
    "url": "an http(s) URL with a host, or empty for the default endpoint",
    "segment": "one path segment of letters, digits, '.', '_' or '-'",
    "model": "a model name with a letter or digit (at most 100 characters), or empty",
}


@dataclass(frozen=True)
class Param:
    """kind: str, int, float, bool, list[...] of those, or 'models' (OTHER_MODELS entries); choices or [lo, hi] bound
    every item; text: 'url', 'segment' or 'model'; by_notebook: other defaults."""

    name: str
    kind: str
    default: Any
    notebooks: tuple[str, ...]
    choices: Optional[tuple] = None
    lo: Optional[float] = None
    hi: Optional[float] = None
    nullable: bool = False
    text: Optional[str] = None
    by_notebook: Mapping[str, Any] = field(default_factory=dict)
    setup_arg: Optional[str] = None

    def default_for(self, nb: str) -> Any:
        return copy.deepcopy(self.by_notebook.get(nb, self.default))

    def allowed(self) -> str:
        base = self.kind.removeprefix("list[").removesuffix("]")
        if self.kind == "models":
            text = f"a list of maps with exactly the keys {list(ENTRY_KEYS)}, table one of {sorted(PAPER_TABLES)}"
        elif self.choices is not None:
            text = f"one of {list(self.choices)}"
        elif self.lo is not None:
            text = f"{_ITEM[base]} from {self.lo:g} to {self.hi:g}"
        else:
            text = _TEXT.get(self.text or "", _ITEM[base])
        if self.kind.startswith("list["):
            text = f"a non-empty list, each {text}"
        return text + (", or null" if self.nullable else "")


def _nbs(*nums: str) -> tuple[str, ...]:
    return tuple(nb for nb in NOTEBOOKS if nb[:2] in nums)


# Notebook 07's default: each of the paper's other tables with the model it printed (a synthetic stand-in with sim).
_OTHER_MODELS = [
    {"table": table, "paper_model": model, "model": model, "base_url": ""}
    for table, model in (
        ("table2_main_results", "Qwen3-235B-A22B-Instruct"),
        ("table4_deepseek", "DeepSeek-V3.1"),
        ("table5_llama8b", "Llama-3.1-8B-Instruct"),
    )
]

_PARAMS = (
    Param("PROFILE", "str", "default", NOTEBOOKS, text="segment", setup_arg="profile"),
    Param("BACKEND", "str", "sim", _nbs(*SETUP), choices=BACKENDS, setup_arg="backend"),
    Param("POPULATION", "str", "fitted", _nbs(*SETUP), choices=tuple(POPULATIONS), setup_arg="population"),
    Param("SOURCE", "str", "synthetic", _nbs(*SETUP), choices=SOURCES, setup_arg="source"),
    Param("BENCHMARKS", "list[str]", list(ALL_BENCHMARKS), _nbs(*SETUP), choices=tuple(ALL_BENCHMARKS),
          setup_arg="benchmarks"),
    Param("N_ITEMS", "int", 600, _nbs(*SETUP), lo=1, hi=MAX_ITEMS, nullable=True, setup_arg="n_items"),
    Param("N_MAX", "int", 300, _nbs(*SETUP[:-2], "09"), lo=1, hi=MAX_ITEMS, nullable=True),
    Param("SEED", "int", 0, NOTEBOOKS, lo=0, hi=MAX_SEED, setup_arg="seed"),
    Param("WORKERS", "int", 8, _nbs(*SETUP), lo=1, hi=MAX_WORKERS, setup_arg="workers"),
    Param("MODEL", "str", "", _nbs(*SETUP), setup_arg="model", text="model"),
    Param("BASE_URL", "str", "", _nbs(*SETUP), text="url", setup_arg="base_url"),
    Param("CALLS", "str", "two", _nbs(*SETUP), choices=CALLS, setup_arg="calls"),
    Param("ARGUE_MAX_TOKENS", "int", ARGUE_MAX_TOKENS, _nbs(*SETUP), lo=1, hi=MAX_TOKENS, nullable=True,
          setup_arg="argue_max_tokens"),
    Param("SUBSET_MODEL", "str", "", _nbs("02", "03", "04", "05", "06", "07", "09"), setup_arg="subset_model",
          text="model"),
    Param("N_VALUES", "list[int]", [1, 2, 3, 5, 7, 10, 12, 15], _nbs("02", "06"), lo=1, hi=MAX_AGENTS,
          by_notebook={"02_baselines": [1, 2, 3, 5]}),
    Param("N_TABLE", "int", N_AGENTS, _nbs("02"), lo=2, hi=MAX_AGENTS),
    Param("ROUNDS", "list[int]", list(TABLE2_ROUNDS), _nbs("03"), lo=1, hi=MAX_ROUNDS),
    # every notebook that runs AceMAD takes it, so a ledger never mixes eta values
    Param("ETA", "float", ETA, _nbs("03", "04", "05", "06", "07", "08", "09"), lo=0, hi=MAX_ETA),
    Param("SECOND_MODEL", "str", "synthetic-model-b", _nbs("04"), text="model"),
    Param("SECOND_BASE_URL", "str", "", _nbs("04"), text="url"),
    Param("OTHER_MODELS", "models", _OTHER_MODELS, _nbs("07")),
    Param("PER_MODEL_SUBSETS", "bool", False, _nbs("07")),
    Param("FULL_BENCHMARKS", "list[str]", list(PAPER_TABLES["table6_full_datasets"]["benchmarks"]), _nbs("07"),
          choices=tuple(ALL_BENCHMARKS)),
    Param("FULL_N_MAX", "int", 300, _nbs("07"), lo=1, hi=MAX_ITEMS, nullable=True),
    Param("GRID_N_MAX", "int", 50, _nbs("08"), lo=1, hi=MAX_ITEMS),
    Param("THEORY_ITEMS", "int", 400, _nbs("00"), lo=1, hi=MAX_ITEMS),
    Param("THEORY_ROUNDS", "int", 6, _nbs("00"), lo=1, hi=MAX_ROUNDS),
    Param("ETA_PHASE", "float", ETA, _nbs("00"), choices=PHASE_ETA),
    Param("T_PHASE", "int", ROUNDS, _nbs("00"), lo=1, hi=PHASE_T_MAX),
    # notebook 09's map axes: SimParams values (docs/population.md)
    Param("LINKS", "list[float]", [0.0, 0.25, 0.5, 0.75, 1.0], _nbs("09"), lo=0, hi=1),
    Param("INSIGHTS", "list[float]", [0.1, 0.3, 0.5, 0.7, 0.9], _nbs("09"), lo=0, hi=1),
    Param("TRAP_CONCENTRATIONS", "list[float]", [0.5, 1.0, 2.0, 4.0, 16.0], _nbs("09"), lo=1e-3, hi=1e6),
    Param("CROWD_CALIBRATIONS", "list[float]", [0.0, 0.25, 0.5, 0.75, 1.0], _nbs("09"), lo=0, hi=1),
    Param("CROWD_COPIES", "list[float]", [0.0, 0.5, 1.0], _nbs("09"), lo=0, hi=1),
)  # fmt: skip
SCHEMA: dict[str, Param] = {p.name: p for p in _PARAMS}


def names(nb: str) -> list[str]:
    return [p.name for p in _PARAMS if nb in p.notebooks]


def defaults(nb: str) -> dict[str, Any]:
    return {n: SCHEMA[n].default_for(nb) for n in names(nb)}


def setup_defaults() -> dict[str, Any]:
    return {p.setup_arg: copy.deepcopy(p.default) for p in _PARAMS if p.setup_arg}


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
    why = not_plain(value)
    if why:
        return f"it holds {why}"
    if value is None:
        return None if p.nullable else "null is not allowed here"
    if p.kind == "models":
        return _entries_problem(value) if isinstance(value, list) else "need a list"
    if not _type_ok(p.kind, value):
        return f"need {p.kind}, got {type(value).__name__}"
    if value == []:
        return "the list is empty: name at least one"
    return next(filter(None, (_item_problem(p, x) for x in (value if isinstance(value, list) else [value]))), None)


def _short(value: Any, limit: int = 80) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def check(where: str, name: str, value: Any) -> None:
    why = problem(name, value)
    if why:
        raise SystemExit(
            f"{where}: {name} = {_short(value)} is not allowed ({why}); {name} takes {SCHEMA[name].allowed()} "
            "(acemad_utils/experiments/params.py)"
        )


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
        "`acemad_utils/experiments/params.py` (parameters) and `acemad_utils/data/settings.py` (environment).",
        "A profile sets parameters per notebook (`common:` or `notebooks:`), `--set NAME=VALUE` for one run.",
        "",
        "| name | type | allowed | default | notebooks | meaning |",
        "|---|---|---|---|---|---|",
    ]
    meaning = meanings()
    for p in _PARAMS:
        default = f"`{p.default!r}`" if p.kind != "models" else "the paper's three tables"
        default += "".join(f"; {nb[:2]}: `{v!r}`" for nb, v in p.by_notebook.items())
        nbs = ", ".join(nb[:2] for nb in p.notebooks)
        out.append(f"| `{p.name}` | {p.kind} | {p.allowed()} | {default} | {nbs} | {meaning[p.name]} |")
    out += ["", "| environment variable | meaning |", "|---|---|"]
    out += [f"| `{k}` | {v} |" for k, v in env_vars.items()]
    return "\n".join(out) + "\n"
