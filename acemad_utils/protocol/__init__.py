"""protocol: the paper's method, readable beside it, with no I/O library (no network, disk, plotting).

schema    Question, AgentSpec, Turn, Step, Message; the Agent / Population interfaces every backend meets
config    DebateConfig: one commented dataclass for every method and ablation; personas and the naive agent
beliefs   vectorized numpy: normalize, Brier / log peer-prediction scores, multiplicative weights, aggregators
commit    the commitment's JSON schema and the tolerant parser of model replies
prompts   the paper's prompts (Appendix "Prompt") as whole templates, and our variants beside them
debate    Single Agent, Majority Voting, Decentralized / Centralized / Sparse MAD, AceMAD: run_question
vectorized  the same methods over a batch of debates as arrays, for a batched population: run_batch
records   a transcript record: stored entries, rounding, base fields, its line (to_line)
"""

from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.protocol.schema import Agent, AgentSpec, Message, Population, Question, Step, Turn

__all__ = ["Agent", "AgentSpec", "DebateConfig", "Message", "Population", "Question", "Step", "Turn", "run_question"]
