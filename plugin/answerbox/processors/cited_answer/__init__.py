"""cited_answer: a concise answer from dated evidence, every citation checked (FreshPrompt)."""

from answerbox.processors.cited_answer.processor import CitedAnswer

__all__ = ["CitedAnswer"]
