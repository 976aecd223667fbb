"""The processor types answerbox ships, registered: the one module that imports them all."""

from __future__ import annotations

from answerbox.pipeline.catalogue.registry import ProcessorRegistry
from answerbox.processors.chain_of_query import ChainOfQuery
from answerbox.processors.cited_answer import CitedAnswer
from answerbox.processors.conversation import Conversation
from answerbox.processors.query_expansion import LLMQueryExpansion
from answerbox.processors.retrieval_evaluator import RetrievalEvaluator

__all__ = ["default_registry"]


def default_registry() -> ProcessorRegistry:
    return ProcessorRegistry([Conversation, LLMQueryExpansion, RetrievalEvaluator, CitedAnswer, ChainOfQuery])
