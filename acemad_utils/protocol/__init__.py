"""protocol: the paper's method, readable beside it, with no I/O library (no network, disk, plotting).

debate    Algorithm 1 and the baselines on one page: scores, weights, decision, the round loop (run_batch, run_question)
beliefs   normalising replies; the re-scoring rules beyond Algorithm 1 (Surprisingly Popular, BTS, shuffled scores)
schema    Question, AgentSpec, Turn, Step, Message, Commits; the Agent / Population interfaces every backend meets
config    DebateConfig: one commented dataclass for every method and ablation; personas and the naive agent
commit    the commitment's JSON schema and the tolerant parser of model replies
prompts   the paper's prompts (Appendix "Prompt") as whole templates, and our variants beside them
records   a transcript record: stored entries, rounding, base fields, its line (to_line)
"""

from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_batch, run_question
from acemad_utils.protocol.schema import Agent, AgentSpec, Message, Population, Question, Step, Turn

__all__ = ["Agent", "AgentSpec", "DebateConfig", "Message", "Population", "Question", "Step", "Turn", "run_batch",
           "run_question"]  # fmt: skip
