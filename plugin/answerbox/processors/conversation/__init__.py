"""conversation: a follow-up (a search with ``memory_id``) rewritten into a standalone question."""

from answerbox.processors.conversation.processor import Conversation

__all__ = ["Conversation"]
