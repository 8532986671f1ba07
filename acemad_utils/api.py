"""The public API: AceMAD and the baselines on your own questions, with your endpoint or the synthetic population.

    from acemad_utils import make_question, run
    q = make_question("Which is heavier, a kilo of iron or a kilo of feathers?", ["iron", "feathers", "same"],
                      answer="C")
    results = run([q], methods=["acemad", "majority"], synthetic=True, out="acemad_runs")
    results[0].answer, results[0].correct, results[0].weights[-1], results.run_dir

Who answers: `synthetic=True` (the synthetic population: a mechanism model, never evidence about an LLM), or an
OpenAI-compatible endpoint: `model=`/`base_url=` (else MODEL / OPENAI_MODEL, OPENAI_BASE_URL; the key is always
OPENAI_API_KEY from the environment, never an argument that could end up in a notebook or a log).

Everything goes through the notebooks' runner (experiments.runner.run_and_load) and LLM client: the same response
cache (`<out>/cache/llm.sqlite`), retries, MAX_USD spend cap (ACEMAD_MAX_USD), failed-question records and resume.
`out` (default ./acemad_runs, under the current directory, never inside the package) receives runs/<name>/...,
the cache and viewer pages. A run is named `<name>/<model slug>-<first 12 hex of the questions' data_hash>`, so
changing a question makes a new run (an endpoint's unchanged calls are cache hits) and rerunning the same
questions resumes.

Per-role models (Table 3's "Different LLMs" row on your own questions): `roles={"skeptic": "NAME"}` or
`"NAME@URL"` gives AceMAD's Skeptics another model (and endpoint); also "generalist" (AceMAD's Generalists) and
"moderator" (Centralized MAD's moderator). Every other agent, and every baseline's, uses `model`. A run with roles
is its own run (`<model>_roles-<hash>`) and its AceMAD label names them. `estimate(...)` says what a run will send
(calls, dollars, wall time) without a call.

Gold answers are optional: a question without one is debated; its Result has `correct` None and tables leave it
out. A Result's `record` is the usual transcript record (what load_run returns, what the viewer reads).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union
from urllib.parse import urlparse

import pandas as pd

from acemad_utils.agents.client import DEFAULT_MODEL
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.sim import SimPopulation
from acemad_utils.data.benchmarks import data_hash
from acemad_utils.data.own import from_record, make_question, read_questions  # noqa: F401  (public names)
from acemad_utils.data.paths import outputs, outputs_root, safe_segment
from acemad_utils.data.settings import env
from acemad_utils.experiments.runner import run_and_load
from acemad_utils.experiments.subsets import SYNTHETIC_SLUG, model_slug
from acemad_utils.protocol.config import GENERALIST, METHODS, NAIVE_AGENT, SKEPTIC, DebateConfig
from acemad_utils.protocol.schema import AgentSpec, Question
from acemad_utils.report import premise as PR
from acemad_utils.report import tables as TB
from acemad_utils.report.viewer import write_run_page

if TYPE_CHECKING:
    from acemad_utils.cost.estimate import RunEstimate

DEFAULT_OUT = "acemad_runs"
# The profiles' limits and URL rule (experiments/profiles.py; not imported from there: it loads papermill, seconds
# of start-up for a one-question script): more agents and rounds than a debate prompt fits are refused.
MAX_AGENTS, MAX_ROUNDS, MAX_WORKERS = 100, 50, 256


def url_problem(v: Optional[str]) -> Optional[str]:
    """None for no URL (the environment's endpoint) or an http(s) URL with a host; else what is wrong (never
    file:// or a bare path)."""
    if v in ("", None):
        return None
    try:
        u = urlparse(str(v))
        ok = u.scheme in ("http", "https") and bool(u.hostname)
    except ValueError:  # an unparsable port or host
        ok = False
    return None if ok else "need an http:// or https:// URL with a host"


#: The roles a model can be given by name (the rest of every roster uses the run's model).
ROLES = ("generalist", "skeptic", "moderator")
Roles = Optional[Mapping[str, Union[str, tuple]]]


def parse_roles(roles: Roles) -> dict[str, tuple[str, Optional[str]]]:
    """{role: (model, base URL or None)} from {role: "NAME", "NAME@URL" or (NAME, URL)}, each checked as `model=`
    and `base_url=` are (a URL with credentials is refused: a role's URL is recorded in meta.json)."""
    out = {}
    for role, value in (roles or {}).items():
        if role not in ROLES:
            raise ValueError(f"role {role!r}: choose from {list(ROLES)}")
        if isinstance(value, str):
            m = re.fullmatch(r"(.+?)@(https?://.*)", value)
            value = (m.group(1), m.group(2)) if m else (value, None)
        if not isinstance(value, tuple) or len(value) != 2:
            raise ValueError(f"role {role}: expected NAME, NAME@URL or (NAME, URL), got {value!r:.80}")
        model, url = value
        check_model(model, f"role {role}'s model")
        problem = url_problem(url)
        if problem is None and url and (urlparse(url).username or urlparse(url).password or urlparse(url).query):
            problem = (
                "no user:password@ or query in a role's URL (it is recorded in meta.json); the key is OPENAI_API_KEY"
            )
        if problem:
            raise ValueError(f"role {role}'s URL {url!r:.80}: {problem}")
        out[role] = (model, url or None)
    return out


def check_model(model: Any, what: str = "model") -> None:
    if not isinstance(model, str) or not re.fullmatch(r"[\x21-\x7e]{1,200}", model):  # it is sent and names a folder
        raise ValueError(f"{what}={model!r:.80}: need 1-200 printable ASCII characters without spaces")
    model_slug(model)  # a model name that cannot name a folder stops here


def _spec(base: AgentSpec, role: Optional[tuple]) -> AgentSpec:
    return base if role is None else replace(base, model=role[0], base_url=role[1])


QuestionsLike = Union[Question, Mapping[str, Any], Sequence[Union[Question, Mapping[str, Any]]]]


@dataclass(frozen=True)
class Result:
    """One method on one question. Per round (outer list) and agent (inner list): `p` and `q` map each option
    label to a probability (q None where the method asks for no peer prediction), `scores`/`weights` are
    AceMAD's (None for the baselines). A Single Agent result holds its independent runs as one round and
    `correct` is their mean. `record` is the transcript record this was read from."""

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
        labels = rec["labels"]
        rounds = [rec["runs"]] if "runs" in rec else rec.get("rounds") or []

        def dist(v):
            return None if v is None else dict(zip(labels, v))

        return cls(
            question_id=rec["question_id"],
            method=rec["method"],
            answer=rec["final"].get("answer"),
            correct=rec["final"].get("correct"),
            status=rec.get("status", "ok"),
            p=[[dist(e["p"]) for e in r] for r in rounds],
            q=[[dist(e.get("q")) for e in r] for r in rounds],
            scores=[[e.get("score") for e in r] for r in rounds],
            weights=[[e.get("weight") for e in r] for r in rounds],
            usage=dict(rec.get("usage", {})),
            record=rec,
        )

    def to_record(self) -> dict:
        """The transcript record (a copy): what load_run returns and the viewer and tables read."""
        return dict(self.record)


class Results(list):
    """The Results of one run (methods as given, then questions as given), with where they are on disk."""

    def __init__(self, items: Sequence[Result], *, run_dir: Path, name: str, meta: dict):
        super().__init__(items)
        self.run_dir, self.name, self.meta = run_dir, name, meta

    @property
    def records(self) -> list[dict]:
        return [r.record for r in self]

    def table(self) -> pd.DataFrame:
        """Accuracy per method with n and 95% CIs, AceMAD's paired gain and p against each other method in
        parentheses, then (report.premise.table_rows) the premise check and the gain split's controls re-decided
        from AceMAD's commitments, paired; only questions with a gold answer count (empty when none has one)."""
        table = accuracy_table(self.records)
        if table.empty:
            return table
        return pd.concat([table, PR.table_rows(self.records, self.meta)], ignore_index=True).fillna("")

    def premise(self) -> pd.DataFrame:
        """The premise check of every AceMAD method (report.premise.premise): per round and over all rounds, the
        top-scoring agent's accuracy minus a random agent's (points, 95% CI), the within-question rank correlation
        of score and correctness, and the share of commitments that did not parse."""
        return PR.premise(self.records)

    def split(self) -> pd.DataFrame:
        """AceMAD's gain split (report.premise.split): each control re-decided from its commitments, and every other
        method run, paired against AceMAD (accuracy, difference, CI, p)."""
        others = [m for m in dict.fromkeys(r.method for r in self) if not m.startswith("AceMAD")]
        return PR.split(self.records, meta=self.meta, others=others)


def accuracy_table(records: Sequence[dict]) -> pd.DataFrame:
    """report.tables' wide table of the scored records (those with a gold answer): accuracy per method with n and
    95% CIs, then one row per other method with AceMAD's paired gain (points, CI), p-value and n (versus_best
    with that one baseline). An empty frame when no question has a gold answer."""
    scored = [r for r in records if r.get("status", "ok") != "ok" or r["final"].get("correct") is not None]
    if not any(r["final"].get("correct") is not None for r in scored):
        return pd.DataFrame()
    long = TB.accuracy_long(scored)
    methods = list(dict.fromkeys(long["method"]))
    targets = [m for m in methods if m.startswith("AceMAD")]
    rows = []
    for m in methods if targets else []:
        if m in targets:
            continue
        for t in TB.versus_best(scored, targets, [m], average=False).itertuples():
            cell = f"{t.gain:+.1f} [{t.gain_lo:+.1f}, {t.gain_hi:+.1f}], p={t.p_value:.2g}, n={t.n_paired}"
            rows.append({"method": f"{t.method} minus {m} (paired)", TB.bench_label(str(t.benchmark)): cell})
    return pd.concat([TB.wide(long), pd.DataFrame(rows)], ignore_index=True).fillna("")


def configs(
    methods: Sequence[str], *, rounds: int = 3, agents: int = 5, eta: float = 2.0, seed: int = 0, roles: Roles = None
):
    """One DebateConfig per method name (checked: names, 1 <= rounds <= MAX_ROUNDS, 1 <= agents <= MAX_AGENTS,
    eta finite and >= 0). eta is AceMAD's only: the baselines keep the notebooks' configs (and cache scopes).
    roles (parse_roles): AceMAD's Generalists and Skeptics on their role's model, named in its label."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"methods {list(methods)!r}: unknown or none; choose from {list(METHODS)}")
    for what, v, hi in (("rounds", rounds, MAX_ROUNDS), ("agents", agents, MAX_AGENTS)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ValueError(f"{what}={v!r}: need a whole number from 1 to {hi}")
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not math.isfinite(eta) or eta < 0:
        raise ValueError(f"eta={eta!r}: need a finite number >= 0")
    out = []
    for m in dict.fromkeys(methods):
        kw: dict = dict(method=m, n_agents=agents, rounds=rounds, seed=seed)
        if m == "acemad":
            kw["eta"] = float(eta)
            parsed = parse_roles(roles)
            debaters = {r: parsed[r] for r in ("generalist", "skeptic") if r in parsed}
            if debaters:
                kw["crowd"] = _spec(GENERALIST, debaters.get("generalist"))
                kw["truth_holder"] = _spec(SKEPTIC, debaters.get("skeptic"))
                named = DebateConfig(**kw)
                who = ", ".join(f"{r} {v[0]}" for r, v in debaters.items())
                kw["name"] = f"{named.label[:-1]}; {who})"
        out.append(DebateConfig(**kw))
    return out


def as_questions(questions: QuestionsLike) -> list[Question]:
    """One question or a list; each a Question (from make_question) or a record {question, options, answer?, id?}."""
    items = [questions] if isinstance(questions, (Question, Mapping)) else list(questions)
    out = []
    for i, q in enumerate(items):
        if isinstance(q, Question):
            out.append(q)
        elif isinstance(q, Mapping):
            try:
                out.append(from_record(q, i))
            except KeyError as e:
                raise ValueError(f"question {i}: missing field {e.args[0]!r}") from None
            except ValueError as e:
                raise ValueError(f"question {i}: {e}") from None
        else:
            raise TypeError(f"question {i}: expected a Question or a dict, got {type(q).__name__}")
    if not out:
        raise ValueError("no questions given")
    return out


def roles_slug(slug: str, roles: Roles) -> str:
    """The run's model slug, with `_roles-<8 hex of the roles>` when some role has its own model."""
    parsed = parse_roles(roles)
    if not parsed:
        return slug
    blob = json.dumps(sorted(parsed.items()), separators=(",", ":"))
    return f"{slug}_roles-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"


def population(
    *, synthetic: bool, model: Optional[str], base_url: Optional[str], seed: int, workers: int, roles: Roles = None
):
    """(the Population, its model slug). An endpoint's model and URL are checked as a profile's are; the response
    cache is outputs('cache')/llm.sqlite (under the caller's `out`). Every role's endpoint is checked (preflight)
    here, before any question runs; a synthetic population takes role models by name only (each named model
    gets its own synthetic traps, as notebook 04's "Different LLMs")."""
    parsed = parse_roles(roles)
    if synthetic:
        if model or base_url or any(url for _, url in parsed.values()):
            raise ValueError("synthetic=True takes no model, base_url or role URL (the synthetic population answers)")
        if "moderator" in parsed:
            raise ValueError("synthetic=True: the synthetic moderator has no model; give roles to an endpoint run")
        return SimPopulation(seed=seed), roles_slug(SYNTHETIC_SLUG, roles)
    problem = url_problem(base_url)
    if problem:
        raise ValueError(f"base_url={base_url!r}: {problem}")
    model = model or os.environ.get("MODEL") or None
    if model is not None:
        check_model(model)
    mod = parsed.get("moderator")
    pop = LLMPopulation(
        model=model, base_url=base_url or None, cache=outputs("cache") / "llm.sqlite", seed=seed,
        max_concurrency=workers, moderator_spec=_spec(NAIVE_AGENT, mod),
    )  # fmt: skip
    for _, url in parsed.values():
        pop.client(url)  # a role's endpoint: key, reachability, now (not in the middle of the first debate)
    return pop, roles_slug(model_slug(pop.client(None).model), roles)


def run(
    questions: QuestionsLike,
    methods: Union[str, Sequence[str]] = ("acemad",),
    *,
    synthetic: bool = False,
    model: Optional[str] = None,
    base_url: Optional[str] = None,
    rounds: int = 3,
    agents: int = 5,
    eta: float = 2.0,
    seed: int = 0,
    out: Union[str, os.PathLike] = DEFAULT_OUT,
    name: str = "api",
    workers: int = 8,
    progress: bool = False,
    viewer: bool = False,
    roles: Roles = None,
) -> Results:
    """Run `methods` on `questions`; transcripts under `out`/runs/<name>/<model>-<data hash>/. Returns Results
    (methods as given, then questions as given). viewer=True also writes the run's debate viewer page.
    roles: {"skeptic": "NAME" or "NAME@URL", ...} (ROLES; see the module doc)."""
    qs = as_questions(questions)
    cfgs = configs(methods, rounds=rounds, agents=agents, eta=eta, seed=seed, roles=roles)
    safe_segment(name, "run name")
    check_workers(workers)
    with outputs_root(out):
        pop, slug = population(
            synthetic=synthetic, model=model, base_url=base_url, seed=seed, workers=workers, roles=roles
        )
        experiment = f"{name}/{slug}-{data_hash(qs)[:12]}"
        meta, records = run_and_load(
            experiment, qs, cfgs, pop, workers=workers, profile="api", progress=progress,
            extra_meta={"source": "own questions", "model": slug},
        )  # fmt: skip
        run_dir = outputs("runs", experiment)
        if viewer:
            write_run_page(experiment, loaded=(meta, records))
    return Results([Result.from_record(r) for r in records], run_dir=run_dir, name=experiment, meta=meta)


def check_workers(workers: Any) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers={workers!r}: need a whole number from 1 to {MAX_WORKERS}")


def estimate(
    questions: QuestionsLike,
    methods: Union[str, Sequence[str]] = ("acemad",),
    *,
    model: Optional[str] = None,
    rounds: int = 3,
    agents: int = 5,
    eta: float = 2.0,
    seed: int = 0,
    workers: int = 8,
    roles: Roles = None,
    extra: Sequence[DebateConfig] = (),
) -> RunEstimate:
    """What `run` with these arguments will send an endpoint, before anything is sent (no network, no key): calls,
    tokens, dollars (cost.estimate.estimate_run, at prices.py's prices; None when a model is unpriced) and wall
    time; `.line()` says it in one line. An upper bound: replies already in the cache are not paid again.
    `extra`: more configs run first on the same questions (the command's --challenging selection)."""
    from acemad_utils.cost.estimate import estimate_run  # the replay machinery only when asked

    qs = as_questions(questions)
    cfgs = [*extra, *configs(methods, rounds=rounds, agents=agents, eta=eta, seed=seed, roles=roles)]
    check_workers(workers)
    mod = parse_roles(roles).get("moderator")
    main = model or os.environ.get("MODEL") or env("ACEMAD_MODEL") or DEFAULT_MODEL  # the client's default
    return estimate_run(qs, cfgs, main, moderator=_spec(NAIVE_AGENT, mod), workers=workers, seed=seed)


def viewer_page(results: Results, out: Union[str, os.PathLike] = DEFAULT_OUT) -> Path:
    """Write (or refresh) the debate viewer page of a run made by `run` with the same `out`; returns its path."""
    with outputs_root(out):
        return write_run_page(results.name, loaded=(results.meta, results.records))
