"""The paper's prompts (Appendix "Prompt", l.1145-1191) verbatim, and ours built from its sentences; DEVIATIONS lists
every difference with its reason (tests/test_prompts.py checks exactly these)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from acemad_utils.protocol.schema import Turn

# ----------------------------------------------------------------------------- the paper, verbatim
# The appendix's three boxes with LaTeX escapes removed (\{ -> {, \_ -> _); the placeholder typo
# "history_contex" of the Commit Prompt is the paper's.
PAPER_PERSONA_PROMPT = """\
"Generalist": "You are a helpful assistant. You trust common knowledge and consensus."

"Skeptic": "You are a strict skeptic. You actively look for common misconceptions and logical traps. \
You suspect the majority might be wrong.\""""

PAPER_ARGUMENTATION_PROMPT = """\
Question: {question}

Options:
{options_str}

Conversation History:
{history_context}

Please provide a concise argument for what you believe is the correct answer.
Do NOT output JSON here. Just natural language debate."""

PAPER_COMMIT_PROMPT = """\
Question: {question}
Options:
{options_str}

Conversation History:
{history_contex}

Task:

1. Self_Prob: Assign probability (0.0-1.0) to options based on your belief.

2. Peer_Prediction: Predict the AVERAGE probability distribution of the OTHER agents in this conversation.
(Critically: If others are 'Generalists', they might fall for common misconceptions. Predict their likely errors.)

Output JSON:
{{
    "self_prob": {{"A": 0.1, ...}},
    "peer_prediction": {{"A": 0.3, ...}}
}}"""

# ----------------------------------------------------------------------------- ours
PERSONAS = {  # the system prompt of each persona: the naive agent's (no persona; config.NAIVE_AGENT) and the paper's
    "Assistant": "You are a helpful assistant.",
    **json.loads("{" + PAPER_PERSONA_PROMPT.replace("\n\n", ", ") + "}"),
}
ARGUE_ASK = {  # the {ask} of ARGUMENTATION_PROMPT; "fast" is the paper's sentence
    "fast": "Please provide a concise argument for what you believe is the correct answer.",
    "slow": "Please reason step by step before giving your argument for what you believe is the correct answer.",
}
MODERATOR_ASK = (  # Centralized MAD's moderator (Appendix "Baselines", l.643: "a unified updated answer")
    "You are the moderator of this debate. Summarise the debaters' arguments neutrally, "
    "then state which answer the group should adopt and why."
)
ARGUMENT_PLACEHOLDER = "<your argument>"  # the single-call shape's argument field (commit.py reads it back)

# Ours, from the paper's sentences: one header for both calls; sections dropped where they do not apply, never
# reworded: HISTORY_SECTION for a solo agent, ARGUMENT_SECTION without an argument, PEER_TASK for an agent not
# asked for q (every baseline, the moderator, AceMAD's no-q control).
HISTORY_SECTION = "\n\nConversation History:\n{history_context}"
ARGUMENT_SECTION = "\n\nYour argument this round:\n{argument}"
PEER_TASK = """

{n}. Peer_Prediction: Predict the AVERAGE probability distribution of the OTHER agents in this conversation.
(Critically: If others are 'Generalists', they might fall for common misconceptions. Predict their likely errors.)"""
HEADER = "Question: {question}\n\nOptions:\n{options_str}" + HISTORY_SECTION
SELF_TASK = "Self_Prob: Assign probability (0.0-1.0) to options based on your belief."
SHAPE = "\n\nEach distribution must sum to 1.\nOutput JSON only, in this shape:\n{json_shape}"
ARGUMENTATION_PROMPT = HEADER + "\n\n{ask}\nDo NOT output JSON here. Just natural language debate."
COMMIT_PROMPT = HEADER + ARGUMENT_SECTION + "\n\nTask:\n\n1. " + SELF_TASK + PEER_TASK.format(n=2) + SHAPE
SINGLE_PROMPT = HEADER + "\n\nTask:\n\n1. Argument: {ask}\n\n2. " + SELF_TASK + PEER_TASK.format(n=3) + SHAPE
REPAIR_PROMPT = "Your reply could not be read. Reply with the JSON object only, in exactly this shape:\n{json_shape}"

# {name: (the paper's prompt, what the paper has, what we send, why)}; {question}, {history}, {argument}, {ask} and
# {json_shape} stand for the rendered values.
DEVIATIONS = {
    "header": (
        "Commit",
        "Question: {question}\nOptions:",
        "Question: {question}\n\nOptions:",
        "one header for both calls: the paper's Argumentation Prompt has this blank line, its Commit Prompt not",
    ),
    "own argument": (
        "Commit",
        "Conversation History:\n{history}\n\nTask:",
        "Conversation History:\n{history}\n\nYour argument this round:\n{argument}\n\nTask:",
        "the commitment follows the agent's own argument of this round (Algorithm 1), which is not yet in the "
        "visible history; the paper does not say how the model sees it, so we show it (dropped when empty)",
    ),
    "json shape": (
        "Commit",
        'Output JSON:\n{\n    "self_prob": {"A": 0.1, ...},\n    "peer_prediction": {"A": 0.3, ...}\n}',
        "Each distribution must sum to 1.\nOutput JSON only, in this shape:\n{json_shape}",
        "placeholders instead of example numbers (small models copy 0.1 / 0.3 verbatim), every option label "
        "listed, the sum stated; json_shape() writes the shape",
    ),
    "no peer prediction": (
        "Commit",
        PEER_TASK.format(n=2),
        "",
        "PEER_TASK dropped: agents not asked for q (every baseline, the moderator, AceMAD's no-q control) are "
        "not shown the Peer_Prediction task",
    ),
    "single call": (
        "Commit",
        "1. Self_Prob:",
        "1. Argument: {ask}\n\n2. Self_Prob:",
        "SINGLE_PROMPT (CALLS='single', not the paper's protocol): the argument and the commitment in one reply, "
        "half the calls; the shape gains an argument field",
    ),
    "single call numbering": (
        "Commit",
        "\n\n2. Peer_Prediction:",
        "\n\n3. Peer_Prediction:",
        "SINGLE_PROMPT: the Peer_Prediction item comes third, after the argument",
    ),
    "slow thinking": (
        "Argumentation",
        ARGUE_ASK["fast"],
        ARGUE_ASK["slow"],
        "thinking='slow': Table 3's 'Different Thinking System' truth-holder; the paper does not print its prompt",
    ),
    "moderator": (
        "Argumentation",
        ARGUE_ASK["fast"],
        MODERATOR_ASK,
        "Centralized MAD's moderator: the paper gives no moderator prompt (l.643)",
    ),
    "solo": (
        "Argumentation",
        "\n\nConversation History:\n{history}",
        "",
        "role 'solo' (the Single Agent, subset construction): there is no conversation (both prompts)",
    ),
}


def history_context(turn: Turn) -> str:
    """Visible messages, oldest first; agents are numbered from 1 for the model."""
    who = lambda m: "Moderator" if m.agent == -1 else f"Agent {m.agent + 1}"
    you = lambda m: ", you" if m.agent == turn.agent else ""
    return "\n\n".join(f"{who(m)} (round {m.round}{you(m)}): {m.text.strip()}" for m in turn.history) or "(none yet)"


def wants_q(turn: Turn) -> bool:
    """Only a debater asked for it gives a peer prediction (never the moderator or a solo agent)."""
    return turn.want_peer_prediction and turn.role == "debater"


def _render(template: str, turn: Turn, argument: str = "", thinking: str = "fast", argue: bool = False) -> str:
    """Fill a template; sections are dropped before formatting, so a question's text is never parsed."""
    want_q, solo = wants_q(turn), turn.role == "solo"
    drop = ([HISTORY_SECTION] if solo else []) + ([] if argument else [ARGUMENT_SECTION])
    for section in drop + ([] if want_q else [PEER_TASK.format(n=n) for n in (2, 3)]):
        template = template.replace(section, "")
    q, ask = turn.question, MODERATOR_ASK if turn.role == "moderator" else ARGUE_ASK[thinking]
    return template.format(question=q.question, options_str=q.options_str(), argument=argument, ask=ask,
                           history_context="" if solo else history_context(turn),
                           json_shape=json_shape(q.labels, want_q, argue))  # fmt: skip


def json_shape(labels: Sequence[str], want_q: bool, argument: bool = False) -> str:
    """The commit JSON shape with placeholders, not numbers: small models copy example values verbatim."""
    dist = "{" + ", ".join(f'"{k}": <probability>' for k in labels) + "}"
    body = f'"self_prob": {dist}' + (f', "peer_prediction": {dist}' if want_q else "")
    return "{" + (f'"argument": "{ARGUMENT_PLACEHOLDER}", ' if argument else "") + body + "}"


def argue_prompt(turn: Turn, thinking: str = "fast") -> str:
    return _render(ARGUMENTATION_PROMPT, turn, thinking=thinking)


def commit_prompt(turn: Turn, argument: str) -> str:
    return _render(COMMIT_PROMPT, turn, argument.strip())


def single_prompt(turn: Turn, thinking: str = "fast") -> str:
    return _render(SINGLE_PROMPT, turn, thinking=thinking, argue=True)


def repair_prompt(labels: Sequence[str], want_q: bool, argument: bool = False) -> str:
    return REPAIR_PROMPT.format(json_shape=json_shape(labels, want_q, argument))
