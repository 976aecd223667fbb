"""``chain_of_query``'s configuration, read by the processor and by each run of the chain."""

from __future__ import annotations

from pydantic import Field

from answerbox.pipeline.limits.request_limits import LLMTokens
from answerbox.processors.answering.policy import AnswerRules

__all__ = ["ChainOfQueryConfig"]


class ChainOfQueryConfig(AnswerRules):
    index: str | None = Field(default=None, min_length=1)  # where nodes are checked; default: the searched index
    text_field: str = Field(default="text", min_length=1)  # the passage field the reader reads
    r_max: int = Field(default=5, ge=1, le=20)  # the paper's maximum number of rounds
    budget_s: float = Field(default=20.0, gt=0)  # wall clock for all rounds; the engine's share may cut it shorter
    theta: float | None = None  # the reader-confidence gate; default: the model manifest's calibrated θ
    # A node's LLM answer the reader rates within this many logits of its own span passes
    # (``verify.judge_node``); default: the manifest's ``chain_answer_margin``.
    answer_margin: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_tokens: LLMTokens = Field(default=256, ge=16, le=4096)
    # Two queries are the same when their normalised word sets overlap this much (Jaccard).
    duplicate_overlap: float = Field(default=0.8, gt=0, le=1)
    max_reference_chars: int = Field(default=800, ge=100)
    abstain_text: str = Field(default="No answer could be verified against the searched documents.", min_length=1)
