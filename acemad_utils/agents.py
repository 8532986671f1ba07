"""LLM agents: the paper's prompts (Appendix "Prompt"), commit parsing, and the LLM population.

    from acemad_utils.agents import LLMPopulation, parse_commit
    pop = LLMPopulation(cache="outputs/cache/llm.sqlite")                  # default endpoint from the environment
    pop = LLMPopulation(base_url="http://127.0.0.1:8080/v1", model="smollm2")  # a local llama.cpp server
    agents = pop.agents(cfg.specs(), question, repeat=0)                   # one LLMAgent per AgentSpec
    step = agents[0].act(turn)                                            # argue, then commit p (and q)
    pop.usage(), pop.describe()

    p, q, report = parse_commit('```json\n{"self_prob": {"A": "60%", "B": 40}}\n```', ("A", "B"), want_q=False)

Heterogeneity (Section 4.2) is configuration only: persona, temperature, thinking ("fast" | "slow"),
model and base_url come from each agent's AgentSpec; one client is kept per endpoint. This module builds
prompts and parses replies; all LLM I/O goes through llm.LLMClient.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import threading
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .beliefs import from_mapping
from .cache import ResponseCache
from .llm import GenerateConfig, LLMClient
from .schema import Agent, AgentSpec, Population, Question, Step, Turn

PERSONAS = {
    "Assistant": "You are a helpful assistant.",  # the naive agent of every baseline (no persona; config.NAIVE_AGENT)
    "Generalist": "You are a helpful assistant. You trust common knowledge and consensus.",
    "Skeptic": "You are a strict skeptic. You actively look for common misconceptions and logical traps. "
               "You suspect the majority might be wrong.",
}
ARGUE_ASK = {  # the paper's Argumentation Prompt is the "fast" one
    "fast": "Please provide a concise argument for what you believe is the correct answer.",
    "slow": "Please reason step by step before giving your argument for what you believe is the correct answer.",
}
MODERATOR_ASK = ("You are the moderator of this debate. Summarise the debaters' arguments neutrally, "
                 "then state which answer the group should adopt and why.")
CALL_MODES = ("two", "single")
ARGUMENT_PLACEHOLDER = "<your argument>"
PEER_TASK = ("2. Peer_Prediction: Predict the AVERAGE probability distribution of the OTHER agents in this "
             "conversation.\n(Critically: If others are 'Generalists', they might fall for common misconceptions. "
             "Predict their likely errors.)")


# ----------------------------------------------------------------------------- prompts
def history_context(turn: Turn) -> str:
    """Visible messages, oldest first. Agents are numbered from 1 for the model (Message.agent + 1)."""
    lines = []
    for m in turn.history:
        who = "Moderator" if m.agent == -1 else f"Agent {m.agent + 1}"
        you = ", you" if m.agent == turn.agent else ""
        lines.append(f"{who} (round {m.round}{you}): {m.text.strip()}")
    return "\n\n".join(lines) if lines else "(none yet)"


def _header(turn: Turn) -> str:
    q = turn.question
    head = f"Question: {q.question}\n\nOptions:\n{q.options_str()}"
    if turn.role != "solo":
        head += f"\n\nConversation History:\n{history_context(turn)}"
    return head


def argue_prompt(turn: Turn, thinking: str = "fast") -> str:
    ask = MODERATOR_ASK if turn.role == "moderator" else ARGUE_ASK[thinking]
    return f"{_header(turn)}\n\n{ask}\nDo NOT output JSON here. Just natural language debate."


def json_shape(labels: Sequence[str], want_q: bool) -> str:
    """The commit JSON shape with placeholders, not numbers: small models copy example values verbatim."""
    dist = "{" + ", ".join(f'"{k}": <probability>' for k in labels) + "}"
    body = f'"self_prob": {dist}' + (f', "peer_prediction": {dist}' if want_q else "")
    return "{" + body + "}"


def commit_prompt(turn: Turn, argument: str) -> str:
    want_q = turn.want_peer_prediction and turn.role == "debater"
    mine = f"\n\nYour argument this round:\n{argument.strip()}" if argument.strip() else ""
    task = "1. Self_Prob: Assign probability (0.0-1.0) to options based on your belief."
    if want_q:
        task += "\n\n" + PEER_TASK
    return (f"{_header(turn)}{mine}\n\nTask:\n\n{task}\n\nEach distribution must sum to 1.\n"
            f"Output JSON only, in this shape:\n{json_shape(turn.question.labels, want_q)}")


def single_prompt(turn: Turn, thinking: str = "fast") -> str:
    """Single-call mode: the argument and the private commitment in one structured reply."""
    want_q = turn.want_peer_prediction and turn.role == "debater"
    ask = MODERATOR_ASK if turn.role == "moderator" else ARGUE_ASK[thinking]
    task = f"1. Argument: {ask}\n\n2. Self_Prob: Assign probability (0.0-1.0) to options based on your belief."
    if want_q:
        task += "\n\n" + PEER_TASK.replace("2. Peer_Prediction", "3. Peer_Prediction")
    shape = json_shape(turn.question.labels, want_q).replace("{", f'{{"argument": "{ARGUMENT_PLACEHOLDER}", ', 1)
    return (f"{_header(turn)}\n\nTask:\n\n{task}\n\nEach distribution must sum to 1.\n"
            f"Output JSON only, in this shape:\n{shape}")


def commit_schema(labels: Sequence[str], want_q: bool, argument: bool = False) -> dict:
    dist = {"type": "object", "properties": {k: {"type": "number"} for k in labels},
            "required": list(labels), "additionalProperties": False}
    props = {**({"argument": {"type": "string"}} if argument else {}), "self_prob": dist,
             **({"peer_prediction": dist} if want_q else {})}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


# ----------------------------------------------------------------------------- parsing
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_LABEL = re.compile(r"^\(?\s*(?:option|answer|choice)?\s*\(?([A-Za-z0-9]{1,2})\s*[).:]?\s*$", re.I)
_P_KEYS = ("selfprob", "selfprobability", "selfprobabilities", "selfbelief", "self", "probabilities", "probs",
           "belief", "beliefs", "p")
_Q_KEYS = ("peerprediction", "peerpredictions", "peerprob", "peerprobs", "peer", "peers", "peerbelief",
           "othersprediction", "q")


def _objects(text: str) -> list[str]:
    """Balanced {...} substrings (outermost first), found after stripping code fences."""
    fenced = _FENCE.findall(text)
    sources = fenced + [text] if fenced else [text]
    out = []
    for src in sources:
        depth, start = 0, None
        for i, ch in enumerate(src):
            if ch == "{":
                if depth == 0:
                    start = i
                depth += 1
            elif ch == "}" and depth:
                depth -= 1
                if depth == 0:
                    out.append(src[start:i + 1])
        if depth and start is not None:  # cut off by max_tokens: close the braces and read what is there
            out.append(src[start:].rstrip().rstrip(",:") + "}" * depth)
    return out


def _loads(s: str) -> tuple[Any, list[str]]:
    """json.loads, then cheap repairs: trailing commas, percentages, single quotes / Python literals.
    Never raises: deep nesting (RecursionError), huge literals and other garbage give (None, [])."""
    try:
        return json.loads(s), []
    except (ValueError, RecursionError):
        pass
    fixed = re.sub(r",\s*([}\]])", r"\1", s)
    fixed = re.sub(r"(-?\d+(?:\.\d+)?)\s*%", r"\1", fixed)
    fixed = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z_0-9]*)\s*:", r'\1"\2":', fixed)  # bare keys
    try:
        return json.loads(fixed), ["json_repair"]
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(fixed.replace("true", "True").replace("false", "False").replace("null", "None")), \
            ["python_literal"]
    except Exception:  # literal_eval raises many types on garbage (TypeError, SyntaxError, ...)
        return None, []


def _norm_key(k: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(k).lower())


def _num(v: Any) -> float:
    """A number from a JSON value; NaN when there is none. Never raises: an integer too large for a float
    is +-inf (non-finite values count as zero mass), nested {"probability": {...}} is followed 8 levels."""
    for _ in range(8):
        if isinstance(v, Mapping) and v:  # {"probability": 0.6}
            v = next(iter(v.values()))
        else:
            break
    if isinstance(v, bool):
        return float("nan")
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:  # json gives Python ints of any size
            return float("inf") if v > 0 else float("-inf")
    if isinstance(v, str):
        m = re.search(r"-?\d+(?:\.\d+)?", v[:200])  # "60%" -> 60: renormalizing puts percentages on scale
        if m:
            return float(m.group())  # a long digit string is inf, never an error
    return float("nan")


def _label_of(k: Any, labels: Sequence[str], options: Optional[Mapping[str, str]]) -> Optional[str]:
    s = str(k).strip()
    if s in labels:
        return s
    m = _LABEL.match(s) if len(s) <= 40 else None  # a label is short; long keys only match option texts
    if m:
        cand = m.group(1)
        for lab in labels:
            if lab.lower() == cand.lower():
                return lab
    if options:  # the option text instead of its label
        low = s.lower().rstrip(".")
        for lab, txt in options.items():
            t = str(txt).strip().lower().rstrip(".")
            if low and (low == t or (len(low) > 3 and t.startswith(low))):
                return lab
    return None


def _dist(obj: Any, labels: Sequence[str], options) -> tuple[Optional[np.ndarray], dict]:
    if isinstance(obj, (list, tuple)) and len(obj) == len(labels):  # positional list of numbers
        obj = dict(zip(labels, obj))
    if not isinstance(obj, Mapping) or not obj:
        return None, {}
    mapped: dict[str, float] = {}
    unknown = []
    for k, v in obj.items():
        lab = _label_of(k, labels, options)
        if lab is None:
            unknown.append(str(k))
        else:
            x = _num(v)
            if np.isfinite(x):
                mapped[lab] = mapped.get(lab, 0.0) + max(x, 0.0)
    if not mapped:
        return None, {"unknown": unknown}
    p, rep = from_mapping(mapped, labels)
    rep["unknown"] = unknown
    if rep["degenerate"]:
        return None, rep
    if rep["raw_sum"] > 1.5:
        rep["percent"] = True  # values like 60/40: renormalizing already reads them as percentages
    return p, rep


def _find(d: Mapping, keys: Sequence[str]) -> Any:
    by_norm = {_norm_key(k): v for k, v in d.items()}
    for k in keys:
        if k in by_norm:
            return by_norm[k]
    return None


def parse_commit(text: str, labels: Sequence[str], want_q: bool, options: Optional[Mapping[str, str]] = None
                 ) -> tuple[Optional[np.ndarray], Optional[np.ndarray], dict]:
    """Read {"self_prob": {...}, "peer_prediction": {...}} from a model reply.

    Returns (p, q, report). p is None when no usable self belief was found (the caller repairs or falls
    back to uniform + parse_failure). q is None when not wanted or not found (report["q_ok"] tells which).
    Tolerated: code fences, prose around the JSON, single quotes, trailing commas, percentages, missing or
    extra labels, lower-case labels, "Option A", the option text instead of its label, a bare {"A": ..} map.
    """
    labels = tuple(labels)
    try:
        with np.errstate(all="ignore"):  # 1e308 + 1e308 is inf (zero mass), not a warning per reply
            return _parse_commit(text, labels, want_q, options)
    except Exception as e:  # a parser bug must cost one commitment (flagged), never the run
        return None, None, {"ok": False, "fixes": [], "error": f"parser error {type(e).__name__}: {e}"[:200]}


def _parse_commit(text: str, labels: tuple, want_q: bool, options) -> tuple:
    report: dict = {"ok": False, "fixes": []}
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    objs = [o for o in (_loads(s) for s in _objects(text)) if isinstance(o[0], Mapping)]
    for obj, fixes in objs:
        praw = _find(obj, _P_KEYS)
        if praw is None and any(_label_of(k, labels, options) for k in obj):
            praw = obj  # the model answered with the bare distribution
        p, prep = _dist(praw, labels, options)
        if p is None:
            continue
        q, qrep = None, {}
        for other, _ in ([(obj, 0)] + objs) if want_q else ():  # p and q may come as two separate objects
            q, qrep = _dist(_find(other, _Q_KEYS), labels, options)
            if q is not None:
                break
        report.update(ok=True, fixes=fixes, q_ok=q is not None or not want_q,
                      missing=prep.get("missing", []), unknown=prep.get("unknown", []))
        if prep.get("percent") or qrep.get("percent"):
            report["fixes"] = fixes + ["percent"]
        return p, q, report
    report["error"] = "no JSON object with a usable self_prob"
    return None, None, report


# ----------------------------------------------------------------------------- agents
def _add_usage(total: dict, u: dict) -> dict:
    for k, v in u.items():
        total[k] = total.get(k, 0) + v
    return total


class LLMAgent(Agent):
    """One debater (or the moderator / a solo agent) backed by an LLM endpoint."""

    concurrent = True

    def __init__(self, spec: AgentSpec, client: LLMClient, *, seed: Optional[int] = 0,
                 max_tokens: tuple[Optional[int], Optional[int]] = (400, 200), calls: str = "two"):
        if calls not in CALL_MODES:
            raise ValueError(f"calls={calls!r} is not allowed; choose one of {CALL_MODES}")
        self.calls = calls  # "two": argue then commit (the paper); "single": both in one structured reply
        self.spec = spec
        self.client = client
        self.seed = seed
        self.max_tokens = max_tokens  # (argue, commit)

    def _system(self) -> dict:
        return {"role": "system", "content": PERSONAS[self.spec.persona]}

    def _config(self, scope: str, max_tokens: Optional[int]) -> GenerateConfig:
        # A per-call seed derived from the run seed and the scope: reproducible, yet agents with identical
        # prompts still draw different samples.
        seed = None
        if self.seed is not None:
            seed = int.from_bytes(hashlib.sha256(f"{self.seed}|{scope}".encode()).digest()[:4], "little") >> 1
        return GenerateConfig(temperature=self.spec.temperature, seed=seed, max_tokens=max_tokens)

    def _gen(self, messages, kind: str, turn: Turn, max_tokens, schema=None):
        scope = f"{turn.scope}|{kind}"
        return self.client.generate(messages, self._config(scope, max_tokens), schema=schema, scope=scope,
                                    model=self.spec.model)

    def argue(self, turn: Turn) -> tuple[str, dict]:
        messages = [self._system(), {"role": "user", "content": argue_prompt(turn, self.spec.thinking)}]
        r = self._gen(messages, "argue", turn, self.max_tokens[0])
        return r.text.strip(), r.usage()

    def commit(self, turn: Turn, argument: str) -> Step:
        messages = [self._system(), {"role": "user", "content": commit_prompt(turn, argument)}]
        return self._committed(turn, messages, "commit", argument=False, message=argument)

    def act(self, turn: Turn) -> Step:
        if self.calls == "two":
            return super().act(turn)  # the paper: argue, then commit
        messages = [self._system(), {"role": "user", "content": single_prompt(turn, self.spec.thinking)}]
        max_tokens = None if None in self.max_tokens else sum(self.max_tokens)
        return self._committed(turn, messages, "act", argument=True, max_tokens=max_tokens)

    def _committed(self, turn: Turn, messages: list, kind: str, argument: bool, message: str = "",
                   max_tokens: Optional[int] = None) -> Step:
        """Generate a commitment, parse it, repair once, else uniform + parse_failure (never an answer)."""
        q_ = turn.question
        labels = q_.labels
        want_q = turn.want_peer_prediction and turn.role == "debater"
        schema = commit_schema(labels, want_q, argument)
        max_tokens = max_tokens or self.max_tokens[1]
        r = self._gen(messages, kind, turn, max_tokens, schema)
        usage = r.usage()
        p, q, rep = parse_commit(r.text, labels, want_q, q_.options)
        text = r.text
        info: dict = {}
        if p is None or (want_q and q is None):
            # One repair: show the model its reply and ask for the JSON only.
            info["commit_raw"] = r.text[:200]
            shape = json_shape(labels, want_q)
            if argument:
                shape = shape.replace("{", f'{{"argument": "{ARGUMENT_PLACEHOLDER}", ', 1)
            ask = f"Your reply could not be read. Reply with the JSON object only, in exactly this shape:\n{shape}"
            fix = messages + [{"role": "assistant", "content": r.text}, {"role": "user", "content": ask}]
            r2 = self._gen(fix, "repair" if kind == "commit" else f"{kind}-repair", turn, max_tokens, schema)
            _add_usage(usage, r2.usage())
            p2, q2, rep2 = parse_commit(r2.text, labels, want_q, q_.options)
            info["repaired"] = p2 is not None and (q2 is not None or not want_q)
            if p2 is not None:
                p, rep, text = p2, rep2, r2.text
                q = q2 if q2 is not None else q
            elif p is None:
                info["repair_raw"] = r2.text[:200]
        if argument:
            message = argument_of(text) or argument_of(r.text)
            if not message:
                info["argument_missing"] = True
        k = len(labels)
        failure = p is None
        if failure:
            p = np.full(k, 1.0 / k)
        if want_q and q is None:
            q = np.full(k, 1.0 / k)  # the self belief stands; an unread forecast is "no information"
            info["q_parse_failure"] = True
            usage["q_parse_failures"] = 1
        # Counted in the usage so they reach the transcript (per agent entry and per record) and the run summary.
        if "repaired" in info:
            usage["repairs"] = 1
        if failure:
            usage["parse_failures"] = 1
        if rep.get("fixes"):
            info["parse_fixes"] = rep["fixes"]
        return Step(message=message, p=p, q=q if want_q else None, parse_failure=failure, usage=usage, info=info)


def argument_of(text: str) -> str:
    """The "argument" string of a single-call reply ('' when there is none)."""
    for s in _objects(text):
        obj, _ = _loads(s)
        if isinstance(obj, dict):
            for k, v in obj.items():
                if _norm_key(k) in ("argument", "arguments", "reasoning") and isinstance(v, str):
                    # Small models copy the shape's placeholder: that is no argument at all.
                    return "" if v.strip().strip("<>").lower() == ARGUMENT_PLACEHOLDER.strip("<>") else v.strip()
    return ""


class LLMPopulation(Population):
    """Builds LLMAgents from AgentSpecs; one LLMClient per endpoint (base URL), shared by its agents.

    model/base_url/api_key   the run's default endpoint (environment variables when None)
    cache                    ResponseCache or path shared by every endpoint
    seed                     run seed for per-call seeds (None: let the endpoint choose)
    max_tokens               (argue, commit) completion budgets
    calls                    "two": argue then commit (the paper, 2 calls per agent-round);
                             "single": argument and commitment in one structured reply (half the calls)
    preflight                check every endpoint with one free GET /models (short timeout) when its client is
                             created: an unreachable base URL or a rejected key stops here, before any paid call
    calls_via                "sync" (default; ACEMAD_CALLS_VIA overrides None) or "batch": cache misses are queued
                             and sent through the Batch API by runner.run_experiment (batch.py); the transcripts
                             are the same, the run identity too. "files": the queue is written to
                             outputs/batch/ as a Batch-API request JSONL and the run stops (batch.py)
    batch_options            passed to batch.Batcher (max_attempts, poll, poll_max, completion_window)
    client_kwargs            passed to every LLMClient (max_concurrency, timeout, max_attempts, structured, ...)
    """

    synthetic = False
    name = "llm"

    def __init__(self, model: Optional[str] = None, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 *, cache=None, seed: Optional[int] = 0, max_tokens: tuple[Optional[int], Optional[int]] = (400, 200),
                 calls: str = "two",
                 moderator_spec: AgentSpec = AgentSpec(persona="Generalist", temperature=0.1), preflight: bool = True,
                 calls_via: Optional[str] = None, batch_options: Optional[dict] = None, **client_kwargs):
        self.model, self.base_url, self._api_key = model, base_url, api_key
        self.cache = ResponseCache(cache) if isinstance(cache, (str, os.PathLike)) else cache
        self.seed = seed
        self.max_tokens = tuple(max_tokens)
        if calls not in CALL_MODES:
            raise ValueError(f"calls={calls!r} is not allowed; choose one of {CALL_MODES}")
        self.calls = calls
        self.moderator_spec = moderator_spec
        self.client_kwargs = client_kwargs
        self.preflight = preflight
        self._clients: dict[Optional[str], LLMClient] = {}
        self._lock = threading.Lock()
        self.calls_via = calls_via or os.environ.get("ACEMAD_CALLS_VIA") or "sync"
        if self.calls_via not in ("sync", "batch", "files"):
            raise ValueError(f"calls_via={self.calls_via!r} is not allowed; choose 'sync', 'batch' or 'files'")
        self.batcher = None  # runner.run_experiment flushes it between passes
        self._queue = None
        if self.calls_via in ("batch", "files"):
            from .batch import Batcher, BatchQueue

            if self.cache is None:
                raise ValueError(f"calls_via={self.calls_via!r} needs a response cache: batch replies are read back from it")
            self._queue = BatchQueue()
            opts = dict(batch_options or {})
            if self.calls_via == "files":  # write the queue for another Batch-API runner (vLLM run-batch) and stop
                from .paths import outputs

                opts.setdefault("export_dir", str(outputs("batch")))
            self.batcher = Batcher(self._queue, self.cache, **opts)
        self.client(None)  # fail early (a missing API key, an unreachable endpoint) before any question runs

    def client(self, base_url: Optional[str]) -> LLMClient:
        key = base_url or self.base_url
        with self._lock:
            if key not in self._clients:
                client = LLMClient(self.model, key, self._api_key if key == self.base_url else None,
                                   cache=self.cache, **self.client_kwargs)
                if self.preflight:
                    client.preflight()
                if self._queue is not None and client.kind != "local-llama.cpp":  # a local server answers at once
                    client.batch_queue = self._queue
                self._clients[key] = client
            return self._clients[key]

    def _agent(self, spec: AgentSpec) -> LLMAgent:
        return LLMAgent(spec, self.client(spec.base_url), seed=self.seed, max_tokens=self.max_tokens, calls=self.calls)

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list[Agent]:
        return [self._agent(s) for s in specs]

    def moderator(self, question: Question, repeat: int = 0) -> Agent:
        return self._agent(self.moderator_spec)

    def usage(self) -> dict:
        """Counters summed over every endpoint (cost None if any endpoint's cost is unknown)."""
        total: dict = {}
        cost: Optional[float] = 0.0
        for c in list(self._clients.values()):
            s = c.stats()
            for k, v in s.items():
                if isinstance(v, int):
                    total[k] = total.get(k, 0) + v
            cost = None if cost is None or s["cost_usd"] is None else cost + s["cost_usd"]
        total["cost_usd"] = cost
        return total

    def describe(self) -> dict:
        # Only what the population was built with: a per-agent model (AgentSpec.model) belongs to the method's
        # config, which meta.json records per method; adding the models agents have used so far would change
        # this description, and with it the run identity, as soon as one run used a second model.
        clients = list(self._clients.values())
        return {"name": self.name, "synthetic": False, "models": sorted({c.model for c in clients}),
                "endpoints": [c.describe() for c in clients], "seed": self.seed,
                "max_tokens": {"argue": self.max_tokens[0], "commit": self.max_tokens[1]}, "calls": self.calls,
                "moderator": self.moderator_spec.to_dict()}
