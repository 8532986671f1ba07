"""protocol: the paper's method, readable beside it, with no I/O library: debate.py is Algorithm 1 and the baselines
on one page; config, schema, prompts, commit (the reply parser), beliefs (re-scoring rules), records (a record)."""

from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_batch, run_question
from acemad_utils.protocol.schema import Agent, AgentSpec, Message, Population, Question, Step, Turn

__all__ = ["Agent", "AgentSpec", "DebateConfig", "Message", "Population", "Question", "Step", "Turn", "run_batch",
           "run_question"]  # fmt: skip
