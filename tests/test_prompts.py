"""Our prompts beside the paper's (Appendix "Prompt"): the paper's three boxes are held verbatim (read from
acemad_paper.tex beside $ACEMAD_PAPER_DIR; skipped without it), and every prompt an agent sends equals the paper's,
rendered for the same question, once the differences listed in prompts.DEVIATIONS (each with its reason) are applied,
and no other difference."""

from __future__ import annotations

import re

import pytest

from acemad_utils.data import paths as P
from acemad_utils.protocol import prompts as PR
from acemad_utils.protocol.schema import Message, Question, Turn

OPTIONS = {"A": "Venus", "B": "Mercury", "C": "Mars", "D": "Earth"}
Q = Question("q1", "demo", "Which planet is closest to the Sun? {not a placeholder}", OPTIONS, "B")
HISTORY = (Message(agent=0, round=1, text="Venus is the hottest, so A."), Message(agent=1, round=1, text="B."))
ARGUMENT = "Mercury orbits at 0.39 AU, closer than any other planet."


def _tex_boxes() -> dict[str, str]:
    tex = P.shared_paper_dir().parent / "acemad_paper.tex"
    if not tex.is_file():
        pytest.skip(f"no paper source at {tex} (set ACEMAD_PAPER_DIR to its tables/ folder to compare)")
    text = tex.read_text(encoding="utf-8")
    appendix = text[text.index("\\section{Prompt}") :]
    boxes = re.findall(r", title=([^\]]+)\]\n(.*?)\\end\{tcolorbox\}", appendix, flags=re.S)
    unescape = lambda s: s.strip().replace("\\{", "{").replace("\\}", "}").replace("\\_", "_")
    return {title: unescape(body) for title, body in boxes}


def turn(**kw) -> Turn:
    return Turn(**{"question": Q, "agent": 2, "round": 2, "history": HISTORY, **kw})


def values(t: Turn, ask: str = PR.ARGUE_ASK["fast"], argument: str = ARGUMENT, shape_argument: bool = False):
    shape = PR.json_shape(Q.labels, PR.wants_q(t), argument=shape_argument)
    return {"{question}": Q.question, "{history}": PR.history_context(t), "{argument}": argument, "{ask}": ask,
            "{json_shape}": shape}  # fmt: skip


def paper(template: str, history: str = "history_context"):
    """The paper's prompt rendered for a turn."""
    return lambda t: template.format(
        question=Q.question, options_str=Q.options_str(), **{history: PR.history_context(t)}
    )


paper_argumentation = paper(PR.PAPER_ARGUMENTATION_PROMPT)
paper_commit = paper(PR.PAPER_COMMIT_PROMPT, "history_contex")  # the paper's placeholder is spelled history_contex


def deviate(text: str, names: list[str], vals: dict) -> str:
    """Apply the named DEVIATIONS to the paper's rendered prompt; each must match exactly once."""
    for name in names:
        _, theirs, ours, _ = PR.DEVIATIONS[name]
        for k, v in vals.items():
            theirs, ours = theirs.replace(k, v), ours.replace(k, v)
        assert text.count(theirs) == 1, f"deviation {name!r}: the paper's text {theirs!r} is not there exactly once"
        text = text.replace(theirs, ours)
    return text


COMMIT = ["header", "own argument", "json shape"]
SINGLE = ["header", "json shape", "single call"]
commit = lambda t: PR.commit_prompt(t, ARGUMENT)
SOLO, P_ONLY = turn(role="solo", history=()), turn(want_peer_prediction=False)
SHAPE_ARG = {"shape_argument": True}  # the single call's shape has an argument field
# (variant, the turn, the paper's prompt it derives from, our rendering, the deviations it may have)
VARIANTS = {
    "argue, debater (the paper's)": (turn(), paper_argumentation, lambda t: PR.argue_prompt(t), [], {}),
    "argue, slow thinking": (turn(), paper_argumentation, lambda t: PR.argue_prompt(t, "slow"), ["slow thinking"], {}),
    "argue, moderator": (turn(agent=-1, role="moderator"), paper_argumentation, PR.argue_prompt, ["moderator"], {}),
    "argue, solo": (SOLO, paper_argumentation, PR.argue_prompt, ["solo"], {}),
    "commit, p and q": (turn(), paper_commit, commit, COMMIT, {}),
    "commit, p only": (P_ONLY, paper_commit, commit, [*COMMIT, "no peer prediction"], {}),
    "commit, solo": (SOLO, paper_commit, commit, [*COMMIT, "no peer prediction", "solo"], {}),
    "single call, p and q": (turn(), paper_commit, PR.single_prompt, [*SINGLE, "single call numbering"], SHAPE_ARG),
    "single call, p only": (P_ONLY, paper_commit, PR.single_prompt, [*SINGLE, "no peer prediction"], SHAPE_ARG),
}


def test_the_papers_three_prompts_are_held_verbatim():
    boxes = _tex_boxes()
    assert set(boxes) == {"Persona Prompt", "Argumentation Prompt", "Commit Prompt"}
    assert PR.PAPER_PERSONA_PROMPT == boxes["Persona Prompt"]
    assert PR.PAPER_ARGUMENTATION_PROMPT == boxes["Argumentation Prompt"]
    assert PR.PAPER_COMMIT_PROMPT == boxes["Commit Prompt"]


def test_the_personas_are_the_papers():
    for name in ("Generalist", "Skeptic"):
        assert f'"{name}": "{PR.PERSONAS[name]}"' in PR.PAPER_PERSONA_PROMPT


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_prompt_is_the_papers_but_for_its_listed_deviations(name):
    t, paper, ours, deviations, kw = VARIANTS[name]
    ask = PR.MODERATOR_ASK if t.role == "moderator" else PR.ARGUE_ASK["fast"]
    expected = deviate(paper(t), deviations, values(t, ask=ask, **kw))
    assert ours(t) == expected


def test_every_listed_deviation_is_needed_and_has_a_reason():
    used = {d for v in VARIANTS.values() for d in v[3]}
    assert used == set(PR.DEVIATIONS)
    assert all(len(reason) > 20 for *_, reason in PR.DEVIATIONS.values())


def test_an_empty_argument_drops_its_section_and_braces_in_a_question_are_kept():
    text = PR.commit_prompt(turn(), "  ")
    assert "Your argument this round" not in text and "{not a placeholder}" in text


def test_the_repair_prompt_asks_for_the_shape_only():
    text = PR.repair_prompt(Q.labels, want_q=True)
    assert text.endswith(PR.json_shape(Q.labels, True)) and "0.1" not in text
