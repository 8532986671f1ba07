"""What the notebooks' "What we see" cells share (each sentence is an f-string in its notebook): `caveat` says what
kind of evidence the numbers are and which assumption of a synthetic population (docs/population.md) they rest on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from acemad_utils.report.readable import holm_pvalue, pvalue
from acemad_utils.report.stats import interval
from acemad_utils.report.tables import AVERAGE

#: What a run without peer prediction rests on: the naive agent alone (notebook 01), the homogeneous baselines (02)
SUBSET_USES = ("trap_mean", "trap_concentration", "explore_base", "explore_per_temp")
BASELINE_USES = tuple(
    "trap_mean trap_concentration crowd_insight crowd_copy crowd_susceptibility confidence_per_temp".split()
)
#: ... and what an AceMAD result rests on beside the link (the ledger's grid varies them: registry.LEDGER_GRID)
WEIGHTED_USES = tuple(
    "insight crowd_insight crowd_copy insight_susceptibility crowd_susceptibility crowd_calibration trap_mean "
    "trap_concentration".split()
)

#: Each parameter a caveat names, in a reader's words (SimParams' comments say how the population uses it)
MEANING = {
    "trap_mean": "how strongly an item's shared trap pulls an agent that does not see through it",
    "trap_concentration": "how alike the trap's pull is from item to item; smaller: more correlated errors",
    "explore_base": "P of a random guess at temperature 0",
    "explore_per_temp": "how much that P grows per unit of temperature",
    "insight": "P that the Skeptic sees through the trap",
    "crowd_insight": "P that a Generalist or the naive agent sees through the trap",
    "crowd_copy": "P that a Generalist copies its roster twin's state, times 1 - temperature",
    "insight_susceptibility": "how far an agent that sees through the trap moves toward the beliefs it reads",
    "crowd_susceptibility": "how far an agent that does not see through the trap moves toward the beliefs it reads",
    "crowd_calibration": "how well an agent without insight predicts its peers; 0: it assumes they think as it does",
    "confidence_per_temp": "belief an agent loses on its own answer per unit of temperature",
}


def md(text: str):
    from IPython.display import Markdown

    return Markdown(text)


def listed(items: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B and C': a list as a sentence says it."""
    items = list(items)
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def gain(r) -> str:
    """A paired gain (a tables.versus_best row) in words: '+3.1 points [+0.4, +5.9], p = 0.02, Holm p = 0.06'."""
    holm = getattr(r, "p_holm", float("nan"))
    adjusted = f", Holm {holm_pvalue(holm, r.p_value)}" if holm == holm and pvalue(holm) != pvalue(r.p_value) else ""
    return f"{r.gain:+.1f} points {interval(r.gain_lo, r.gain_hi, '+.1f')}, {pvalue(r.p_value)}{adjusted}"


def significant(r) -> bool:
    """Whether a versus_best row's test is significant as its table judges it: Holm's p (the family of the table's
    tests) where the row has one, else its own p, below 0.05."""
    holm = getattr(r, "p_holm", float("nan"))
    return bool((holm if holm == holm else r.p_value) < 0.05)


def assumption(population: Optional[Mapping], *, short: bool = False, uses: Sequence[str] = ()) -> str:
    """The assumption a synthetic result rests on ("" for a real model); `short`: a bracketed SUMMARY clause;
    `uses`: the parameters a run without peer prediction rests on."""
    if population is None:
        return (
            "[rests on the population's assumptions; see its description]"
            if short
            else "This synthetic result rests on the population's assumption about which agents predict the crowd's "
            "beliefs well (the run's population description names it)."
        )
    pop = dict(population)
    if not pop.get("synthetic", False):
        return ""
    params = pop.get("params") or {}
    if uses:
        pairs = [(k, params[k]) for k in uses if isinstance(params.get(k), (int, float))]
        if short:
            return f"[rests on {', '.join(f'{k}={v:g}' for k, v in pairs)}]"
        named = [f"{k} = {v:g}" + (f" ({MEANING[k]})" if k in MEANING else "") for k, v in pairs]
        return (
            f"This synthetic result rests on the population's {'; '.join(named)}. No agent here predicts its peers, "
            "so knowledge_link plays no part."
        )
    link, by = params.get("knowledge_link"), params.get("calibration_by")
    if short:
        if link is None and by is None:
            return "[rests on the population's assumed peer-prediction skill; its description names no link]"
        rest = [f"{k}={params[k]:g}" for k in WEIGHTED_USES if isinstance(params.get(k), (int, float))]
        copies = [] if "crowd_copy" in params else ["independent Generalists"]  # before near-copies existed
        return f"[rests on knowledge_link={link}, calibration_by={by}, {', '.join([*rest, *copies])}]"
    if by == "persona":
        return (
            'This synthetic result rests on persona-assigned skill (calibration_by = "persona"): every Skeptic '
            "predicts the crowd well whatever it believes on the item, so the weights reward a label, not knowledge."
        )
    if link is None:
        return (
            "This synthetic result rests on the population's assumption about who predicts the crowd's beliefs "
            "well; its description names no knowledge_link, so which agents hold that skill is not recorded here."
        )
    if float(link) == 0:
        return (
            "This synthetic result rests on knowledge_link = 0: peer-prediction skill is unrelated to knowing the "
            "truth, so nothing here comes from the paper's Asymmetric Cognitive Potential." + _others(params)
        )
    who = "only agents" if float(link) == 1 else f"with strength {float(link):g}, agents"
    return (
        f"This synthetic result rests on the paper's assumption, built into the population (knowledge_link = "
        f"{float(link):g}): {who} that see through an item's trap predict the crowd's beliefs well, while the "
        "rest assume everyone thinks as they do; a real model has to show that link before the result says anything "
        "about it." + _others(params)
    )


def _others(params: Mapping) -> str:
    """The other unpinned choices an AceMAD result rests on as much as on the link: not one assumption decides it."""
    rest = [f"{k} = {params[k]:g}" for k in WEIGHTED_USES if isinstance(params.get(k), (int, float))]
    return (
        f" It rests as much on the population's other choices ({', '.join(rest)}); notebook 08's 'decided by' column "
        "names which of them flip each claim, and notebook 09 varies them."
        if rest
        else ""
    )


def caveat(source: str, population: Optional[Mapping] = None, uses: Sequence[str] = ()) -> str:
    """What kind of evidence the numbers are; for a synthetic population, what they rest on (`uses`: a run without
    peer prediction, resting on these parameters, each named with its meaning)."""
    if "SYNTHETIC" in source.upper():
        what = "its agents do" if uses else "the mechanism does"  # `uses`: a run without AceMAD's weights
        return (
            f"These are numbers of the synthetic population: they show what {what} when the population's "
            "assumptions hold, not what any LLM does. " + assumption(population, uses=uses)
        )
    return f"These numbers come from {source}; with intervals this wide, read them as evidence about this model only."


def gains(tests, claim: str) -> str:
    """Each target's paired gain on the Average (versus_best rows), how many are significant, the paper's `claim`."""
    av = tests[tests["benchmark"] == AVERAGE] if len(tests) else tests
    if av.empty:
        return "No paired comparison was possible here."
    better, worse = (sum(s * r.gain > 0 and significant(r) for r in av.itertuples()) for s in (1, -1))
    parts = "; ".join(f"{r.method} over {r.best_baseline} {gain(r)}" for r in av.itertuples())
    verb = "is" if better == 1 or len(av) == 1 else "are"
    return (
        f"Paired gains on the average: {parts}. {better} of {len(av)} {verb} significantly better (Holm p < 0.05) and "
        f"{worse} significantly worse; {claim}."
    )
