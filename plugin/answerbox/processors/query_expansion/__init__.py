"""llm_query_expansion: the LLM writes a pseudo-document or keywords that join the BM25 query (Jagerman et al.)."""

from answerbox.processors.query_expansion.processor import LLMQueryExpansion

__all__ = ["LLMQueryExpansion"]
