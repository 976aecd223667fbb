"""chain_of_query: the LLM writes a chain of queries, each node checked against the index by the reader (SearChain)."""

from answerbox.processors.chain_of_query.processor import ChainOfQuery

__all__ = ["ChainOfQuery"]
