"""The paper's prompts (Appendix "Prompt", acemad_paper.tex), and nothing else: texts and the functions that fill
them in, so they can be read side by side with the appendix.

    from acemad_utils.protocol.prompts import argue_prompt, commit_prompt, single_prompt, repair_prompt, PERSONAS
    argue_prompt(turn, thinking="fast")     # the Argumentation Prompt (natural language, no JSON)
    commit_prompt(turn, argument)           # the Commitment Prompt: self_prob (and peer_prediction) as JSON
    single_prompt(turn)                     # CALLS="single": the argument and the commitment in one reply
    repair_prompt(labels, want_q)           # the one retry after an unreadable commitment

System prompts are PERSONAS[spec.persona]; the user prompt is one of the builders above. `json_shape` gives the
commitment's JSON with placeholders, never numbers: small models copy example values verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence

from acemad_utils.protocol.schema import Turn

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
MODERATOR_ASK = (
    "You are the moderator of this debate. Summarise the debaters' arguments neutrally, "
    "then state which answer the group should adopt and why."
)
ARGUMENT_PLACEHOLDER = "<your argument>"
SELF_TASK = "Self_Prob: Assign probability (0.0-1.0) to options based on your belief."
PEER_TASK = (
    "Peer_Prediction: Predict the AVERAGE probability distribution of the OTHER agents in this "
    "conversation.\n(Critically: If others are 'Generalists', they might fall for common misconceptions. "
    "Predict their likely errors.)"
)
NO_JSON = "Do NOT output JSON here. Just natural language debate."
REPAIR_ASK = "Your reply could not be read. Reply with the JSON object only, in exactly this shape:\n"


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


def _ask(turn: Turn, thinking: str) -> str:
    return MODERATOR_ASK if turn.role == "moderator" else ARGUE_ASK[thinking]


def wants_q(turn: Turn) -> bool:
    """Only a debater asked for it gives a peer prediction (never the moderator or a solo agent)."""
    return turn.want_peer_prediction and turn.role == "debater"


def argue_prompt(turn: Turn, thinking: str = "fast") -> str:
    return f"{_header(turn)}\n\n{_ask(turn, thinking)}\n{NO_JSON}"


def json_shape(labels: Sequence[str], want_q: bool, argument: bool = False) -> str:
    """The commit JSON shape with placeholders, not numbers: small models copy example values verbatim."""
    dist = "{" + ", ".join(f'"{k}": <probability>' for k in labels) + "}"
    body = f'"self_prob": {dist}' + (f', "peer_prediction": {dist}' if want_q else "")
    if argument:
        body = f'"argument": "{ARGUMENT_PLACEHOLDER}", ' + body
    return "{" + body + "}"


def _output(task: str, shape: str) -> str:
    return f"Task:\n\n{task}\n\nEach distribution must sum to 1.\nOutput JSON only, in this shape:\n{shape}"


def commit_prompt(turn: Turn, argument: str) -> str:
    want_q = wants_q(turn)
    mine = f"\n\nYour argument this round:\n{argument.strip()}" if argument.strip() else ""
    task = f"1. {SELF_TASK}" + (f"\n\n2. {PEER_TASK}" if want_q else "")
    return f"{_header(turn)}{mine}\n\n{_output(task, json_shape(turn.question.labels, want_q))}"


def single_prompt(turn: Turn, thinking: str = "fast") -> str:
    """Single-call mode: the argument and the private commitment in one structured reply."""
    want_q = wants_q(turn)
    task = f"1. Argument: {_ask(turn, thinking)}\n\n2. {SELF_TASK}" + (f"\n\n3. {PEER_TASK}" if want_q else "")
    return f"{_header(turn)}\n\n{_output(task, json_shape(turn.question.labels, want_q, argument=True))}"


def repair_prompt(labels: Sequence[str], want_q: bool, argument: bool = False) -> str:
    """The one retry after a reply whose commitment could not be read (sent after that reply)."""
    return REPAIR_ASK + json_shape(labels, want_q, argument)
