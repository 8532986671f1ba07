"""The public API (docs/own-questions.md, section 1): AceMAD and the baselines on your questions through the notebooks'
runner (cache, retries, MAX_USD, resume) into `<out>/runs/<name>/<model slug>-<12 hex of the questions' hash>`
(`-seed<k>` added for a seed k > 0), so a changed question or seed is a new run; the key comes only from
OPENAI_API_KEY, never an argument that could reach a log."""

from __future__ import annotations

import hashlib
import json
import operator
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union, cast
from urllib.parse import urlparse

import pandas as pd

from acemad_utils.agents.budget import UnpricedModel
from acemad_utils.agents.client import DEFAULT_MODEL
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.prices import price_of
from acemad_utils.agents.redact import safe_url
from acemad_utils.agents.sim import SimPopulation
from acemad_utils.data.benchmarks import data_hash
from acemad_utils.data.own import from_record
from acemad_utils.data.paths import outputs, outputs_root, safe_segment
from acemad_utils.data.settings import env
from acemad_utils.experiments.params import MAX_AGENTS, MAX_ROUNDS, MAX_WORKERS  # the profiles' limits
from acemad_utils.experiments.runner import failure_line, run_and_load  # noqa: F401  (failure_line: public)
from acemad_utils.experiments.subsets import SYNTHETIC_SLUG, model_slug
from acemad_utils.protocol.config import GENERALIST, MAX_ETA, METHODS, NAIVE_AGENT, SKEPTIC, DebateConfig
from acemad_utils.protocol.schema import Question
from acemad_utils.report import premise as PR
from acemad_utils.report import tables as TB
from acemad_utils.report.readable import pvalue
from acemad_utils.report.stats import interval
from acemad_utils.report.viewer import write_run_page

if TYPE_CHECKING:
    from acemad_utils.cost.estimate import RunEstimate

DEFAULT_OUT = "acemad_runs"
#: The roles a model can be given by name (Table 3's "Different LLMs"); every other agent uses the run's model.
ROLES = ("generalist", "skeptic", "moderator")
Roles = Optional[Mapping[str, Union[str, tuple]]]
Methods = Union[str, Sequence[Union[str, DebateConfig]]]  # method names (comma-separated) or configs
QuestionsLike = Union[Question, Mapping[str, Any], Sequence[Union[Question, Mapping[str, Any]]]]


def _shown(url: str) -> str:
    try:
        return safe_url(url)
    except ValueError:  # too broken to parse: no part of it is shown as a URL's parts
        return url.split("@")[-1].split("?")[0]


def check_url(url: Optional[str], what: str, *, recorded: bool = False) -> Optional[str]:
    """None or an http(s) URL with a host; a role's URL (`recorded` in meta.json) without credentials or query."""
    if url in ("", None):
        return None
    try:
        u = urlparse(str(url))
        ok = u.scheme in ("http", "https") and bool(u.hostname) and u.port != 0
    except ValueError:  # an unparsable host, a port that is not a number or above 65535 (.port raises)
        ok = False
    if not ok:  # shown without user:password@ or a query: the URL may hold a key
        raise ValueError(f"{what} {_shown(str(url))!r:.80}: need an http:// or https:// URL with a host (a port: 1 "
                         "to 65535)")  # fmt: skip
    if recorded and (u.username or u.password or u.query):
        raise ValueError(f"{what} {url!r:.80}: no user:password@ or query in a role's URL (it is recorded in "
                         "meta.json); the key is OPENAI_API_KEY")  # fmt: skip
    return str(url)


def not_empty(**given: Optional[str]) -> None:
    """'' is an unset shell variable, not a choice: never the paid default model or endpoint in its place."""
    for what, v in given.items():
        if v == "":
            raise ValueError(f"{what}='': empty; leave it out for the default")


def check_model(model: Any, what: str = "model") -> None:
    if not isinstance(model, str) or not re.fullmatch(r"[\x21-\x7e]{1,200}", model):  # it is sent and names a folder
        raise ValueError(f"{what}={model!r:.80}: need 1-200 printable ASCII characters without spaces")
    model_slug(model)


def parse_roles(roles: Roles) -> dict[str, tuple[str, Optional[str]]]:
    """{role: (model, URL or None)} from {role: "NAME", "NAME@URL" or (NAME, URL)}, checked as model= and base_url=."""
    out = {}
    for role, value in (roles or {}).items():
        if role not in ROLES:
            raise ValueError(f"role {role!r}: choose from {list(ROLES)}")
        if isinstance(value, str):
            m = re.fullmatch(r"(.+?)@(https?://.*)", value)
            value = (m.group(1), m.group(2)) if m else (value, None)
        if not isinstance(value, tuple) or len(value) != 2:
            raise ValueError(f"role {role}: expected NAME, NAME@URL or (NAME, URL), got {value!r:.80}")
        check_model(value[0], f"role {role}'s model")
        out[role] = (value[0], check_url(value[1], f"role {role}'s URL", recorded=True))
    return out


def _spec(base, role: Optional[tuple]):
    return base if role is None else replace(base, model=role[0], base_url=role[1])


@dataclass(frozen=True)
class Result:
    """One method on one question: per round and agent `p`, `q` (label -> probability) and AceMAD's `scores`/`weights`
    (a Single Agent's runs are one round and `correct` their mean); `record` is the transcript's."""

    question_id: str
    method: str
    answer: Optional[str]
    correct: Union[bool, float, None]
    status: str
    p: list = field(repr=False)
    q: list = field(repr=False)
    scores: list = field(repr=False)
    weights: list = field(repr=False)
    usage: dict = field(repr=False)
    record: dict = field(repr=False, compare=False)

    @classmethod
    def from_record(cls, rec: dict) -> Result:
        rounds = [rec["runs"]] if "runs" in rec else rec.get("rounds") or []
        per = lambda f: [[f(e) for e in r] for r in rounds]
        dist = lambda k: per(lambda e: None if e.get(k) is None else dict(zip(rec["labels"], e[k])))
        acemad = lambda k: per(lambda e: e.get(k)) if any(e.get(k) is not None for r in rounds for e in r) else []
        ok = rec.get("status", "ok") == "ok"  # a failed record measured nothing: not wrong, unknown
        return cls(rec["question_id"], rec["method"], rec["final"].get("answer"), rec["final"].get("correct") if ok
                   else None, rec.get("status", "ok"), dist("p"), dist("q"), acemad("score"), acemad("weight"),
                   dict(rec.get("usage", {})), rec)  # fmt: skip

    def to_record(self) -> dict:
        return dict(self.record)


class FailedRecords(UserWarning):
    """run() returned failed records (status "failed": no answer, not counted); running it again retries them."""


class Results(list):
    """The Results of one run (methods, then questions, as given) and where they are on disk."""

    def __init__(self, items: Sequence[Result], *, run_dir: Path, name: str, meta: dict):
        super().__init__(items)
        self.run_dir, self.name, self.meta = run_dir, name, meta

    @property
    def records(self) -> list[dict]:
        return [r.record for r in self]

    @property
    def seed(self) -> int:
        """The run's seed: its tables' bootstraps, permutation tests and tie-breaks draw from it (a notebook's SEED)."""
        first: dict = next(iter(self.meta.get("methods", {}).values()), {})
        return int(first.get("seed", 0))

    def failures(self) -> Optional[str]:
        """One line on the records that failed (per method, the first error), None when none did."""
        return failure_line(self.records)

    def table(self) -> pd.DataFrame:
        """accuracy_table, then the premise check and the gain split's controls."""
        table = accuracy_table(self.records, self.seed)
        if table.empty:
            return table
        return pd.concat([table, PR.table_rows(self.records, self.meta, self.seed)], ignore_index=True).fillna("")

    def premise(self) -> pd.DataFrame:
        """Does the top-scoring agent know more than a random one? (report.premise)"""
        return PR.premise(self.records, self.seed)

    def split(self) -> pd.DataFrame:
        """AceMAD paired against its controls re-decided and every other method run (report.premise)."""
        others = [m for m in dict.fromkeys(r.method for r in self) if not m.startswith("AceMAD")]
        return PR.split(self.records, self.seed, meta=self.meta, others=others)


def accuracy_table(records: Sequence[dict], seed: int = 0) -> pd.DataFrame:
    """Accuracy per method (n, 95% CI), then AceMAD's paired gain over each other method; gold answers only."""
    scored = [r for r in records if r.get("status", "ok") != "ok" or r["final"].get("correct") is not None]
    if not any(r["final"].get("correct") is not None for r in scored):
        return pd.DataFrame()
    long = TB.accuracy_long(scored, seed=seed)
    methods = list(dict.fromkeys(long["method"]))
    targets = [m for m in methods if m.startswith("AceMAD")]
    rows: dict[str, dict] = {}  # one row per (AceMAD method, other method): a cell per benchmark and the Average
    for m in [m for m in methods if m not in targets] if targets else []:
        for t in TB.versus_best(scored, targets, [m], seed=seed).itertuples():
            p = pvalue(cast(float, t.p_value))
            cell = f"{t.gain:+.1f} {interval(t.gain_lo, t.gain_hi, '+.1f')}, {p}, n={t.n_paired}"
            name = f"{t.method} minus {m} (paired)"
            rows.setdefault(name, {"method": name})[TB.bench_label(str(t.benchmark))] = cell
    return pd.concat([TB.wide(long), pd.DataFrame(list(rows.values()))], ignore_index=True).fillna("")


def _integer(v: Any) -> Optional[int]:
    """An int, or a numpy integer as one (a sweep over np.arange); None for anything else (a bool, 3.0, "3")."""
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def _whole(what: str, v: Any, hi: int) -> int:
    if (n := _integer(v)) is None or not 1 <= n <= hi:
        raise ValueError(f"{what}={v!r}: need a whole number from 1 to {hi}")
    return n


def configs(methods, *, rounds: int = 3, agents: int = 5, eta: float = 2.0, seed: int = 0, roles: Roles = None):
    """One checked DebateConfig per method name (a DebateConfig given is kept); eta is AceMAD's only (the baselines
    keep the notebooks' cache scopes); roles put AceMAD's Generalists and Skeptics on their own models."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS and not isinstance(m, DebateConfig)]
    if not methods or unknown:
        what = f"unknown method{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}" if unknown else "no method"
        raise ValueError(f"{what}; choose from {', '.join(METHODS)}")
    if (n := _integer(seed)) is None or n < 0:  # before any call: numpy refuses it late
        raise ValueError(f"seed={seed!r}: need a whole number >= 0")
    seed, rounds, agents = n, _whole("rounds", rounds, MAX_ROUNDS), _whole("agents", agents, MAX_AGENTS)
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not 0 <= eta <= MAX_ETA:  # NaN fails too
        raise ValueError(f"eta={eta!r}: need a number from 0 to {MAX_ETA:g}")
    parsed = parse_roles(roles)
    out = []
    for m in dict.fromkeys(methods):
        if isinstance(m, DebateConfig):  # the command's challenging-subset selection
            out.append(m)
            continue
        kw: dict = dict(method=m, n_agents=agents, rounds=rounds, seed=seed)
        debaters = {r: parsed[r] for r in ("generalist", "skeptic") if r in parsed}
        if m == "acemad":
            kw["eta"] = float(eta)
            if debaters:
                kw["crowd"] = _spec(GENERALIST, debaters.get("generalist"))
                kw["truth_holder"] = _spec(SKEPTIC, debaters.get("skeptic"))
                who = ", ".join(f"{r} {v[0]}" for r, v in debaters.items())
                kw["name"] = f"{DebateConfig(**kw).label[:-1]}; {who})"
        out.append(DebateConfig(**kw))
    return out


def as_questions(questions: QuestionsLike) -> list[Question]:
    """One question or a list; each a Question or a record {question, options, answer?, id?, benchmark?}."""
    items = [questions] if isinstance(questions, (Question, Mapping)) else list(questions)
    out = []
    for i, q in enumerate(items):
        if not isinstance(q, (Question, Mapping)):
            raise TypeError(f"question {i}: expected a Question or a dict, got {type(q).__name__}")
        try:
            out.append(q if isinstance(q, Question) else from_record(q, i))
        except KeyError as e:
            raise ValueError(f"question {i}: missing field {e.args[0]!r}") from None
        except ValueError as e:
            raise ValueError(f"question {i}: {e}") from None
    if not out:
        raise ValueError("no questions given")
    return out


def population(*, synthetic: bool, model: Optional[str], base_url: Optional[str], seed: int, workers: int,
               roles: Roles = None):  # fmt: skip
    """(the Population, its run's model slug + `_roles-<8 hex>` when a role has its own model); every endpoint is
    checked before any question runs; a synthetic population takes role models by name (their own traps)."""
    parsed = parse_roles(roles)
    blob = json.dumps(sorted(parsed.items()), separators=(",", ":"))
    suffix = f"_roles-{hashlib.sha256(blob.encode()).hexdigest()[:8]}" if parsed else ""
    if synthetic:
        if model or base_url or any(url for _, url in parsed.values()):
            raise ValueError("synthetic=True takes no model, base_url or role URL (the synthetic population answers)")
        if "moderator" in parsed:
            raise ValueError("synthetic=True: the synthetic moderator has no model; give roles to an endpoint run")
        return SimPopulation(seed=seed), SYNTHETIC_SLUG + suffix
    not_empty(model=model, base_url=base_url)
    check_url(base_url, "base_url")
    check_url(None if base_url else os.environ.get("OPENAI_BASE_URL"), "OPENAI_BASE_URL")  # the client's fallback
    model = model or os.environ.get("MODEL") or None
    if model is not None:
        check_model(model)
    pop = LLMPopulation(
        model=model, base_url=base_url or None, cache=outputs("cache") / "llm.sqlite", seed=seed,
        max_concurrency=workers, moderator_spec=_spec(NAIVE_AGENT, parsed.get("moderator")),
    )  # fmt: skip
    # every model on its endpoint, a role's too, before any paid call (not in the middle of the first debate)
    wanted = [(pop.client(None).model, None), *parsed.values()]
    for _, url in wanted:  # every endpoint's free check first: a role's endpoint that is down costs no model probe
        pop.client(url)
    for name, url in wanted:  # a role's model on the run's endpoint: its client priced only the run's model
        if (client := pop.client(url)).budget.max_usd is not None and not client.free and price_of(name) is None:
            raise UnpricedModel(name)
    for name, url in wanted:
        if not (client := pop.client(url)).check_first:  # a rerun its cache may answer checks at its first miss
            client.preflight(check_model=True, model=name)  # the listing its first check read; a probe if it lacks it
    return pop, model_slug(pop.client(None).model) + suffix


def run(
    questions: QuestionsLike, methods: Methods = ("acemad",), *, synthetic: bool = False,
    model: Optional[str] = None, base_url: Optional[str] = None, rounds: int = 3, agents: int = 5, eta: float = 2.0,
    seed: int = 0, out: Union[str, os.PathLike] = DEFAULT_OUT, name: str = "api", workers: int = 8,
    progress: bool = False, viewer: bool = False, roles: Roles = None,
) -> Results:  # fmt: skip
    """Run `methods` on `questions` (records streamed to `out`/runs/<name>/..., resumable); viewer=True also writes
    the run's debate viewer page. roles: {"skeptic": "NAME" or "NAME@URL", ...} (ROLES)."""
    qs, cfgs = as_questions(questions), configs(methods, rounds=rounds, agents=agents, eta=eta, seed=seed, roles=roles)
    seed = operator.index(seed)  # checked by configs: a numpy integer becomes an int before it reaches any file
    workers = _whole("workers", workers, MAX_WORKERS)
    safe_segment(name, "run name")
    with outputs_root(out):
        pop, slug = population(synthetic=synthetic, model=model, base_url=base_url, seed=seed, workers=workers,
                               roles=roles)  # fmt: skip
        experiment = f"{name}/{slug}-{data_hash(qs)[:12]}" + (f"-seed{seed}" if seed else "")  # a seed: its own run
        meta, records = run_and_load(experiment, qs, cfgs, pop, workers=workers, profile="api", progress=progress,
                                     extra_meta={"source": "own questions", "model": slug})  # fmt: skip
        results = Results([Result.from_record(r) for r in records], run_dir=outputs("runs", experiment),
                          name=experiment, meta=meta)  # fmt: skip
    if line := results.failures():
        warnings.warn(line, FailedRecords, stacklevel=2)
    if viewer:
        viewer_page(results, out)
    return results


def estimate(
    questions: QuestionsLike, methods: Methods = ("acemad",), *, model: Optional[str] = None,
    rounds: int = 3, agents: int = 5, eta: float = 2.0, seed: int = 0, workers: int = 8, roles: Roles = None,
) -> RunEstimate:  # fmt: skip
    """What `run` with these arguments will send, at most (cached replies are not paid again), before anything is
    sent (no network, no key): calls, tokens, dollars (None when unpriced) and wall time (`.line()`)."""
    from acemad_utils.cost.estimate import estimate_run  # the replay machinery only when asked

    qs, cfgs = as_questions(questions), configs(methods, rounds=rounds, agents=agents, eta=eta, seed=seed, roles=roles)
    seed = operator.index(seed)  # checked by configs: a numpy integer becomes an int before it reaches any file
    workers = _whole("workers", workers, MAX_WORKERS)
    not_empty(model=model)
    if model is not None:
        check_model(model)
    moderator = _spec(NAIVE_AGENT, parse_roles(roles).get("moderator"))
    main = model or os.environ.get("MODEL") or env("ACEMAD_MODEL") or DEFAULT_MODEL  # the client's default
    return estimate_run(qs, cfgs, main, moderator=moderator, workers=workers, seed=seed)


def viewer_page(results: Results, out: Union[str, os.PathLike, None] = None) -> Path:
    """Write (or refresh) the debate viewer page of a run made by `run`, beside its runs/ folder (`out`: the `out` the
    run was given; by default the one its results came from); returns its path."""
    if out is None:  # results.run_dir is <out>/runs/<name>: its questions are read from there, not another folder
        out = results.run_dir.parents[len(Path(results.name).parts)]
    with outputs_root(out):
        return write_run_page(results.name, loaded=(results.meta, results.records))
