"""Conversational memory in ml-commons' shapes: the cluster's own (``ClusterMemory``) where it has
the plugin, else answerbox's (``IndexMemory``, in ``.answerbox-memory``); ``Memory`` chooses."""

from __future__ import annotations

from answerbox.memory.choice import Memory
from answerbox.memory.records import Interaction, NewMessage

__all__ = ["Interaction", "Memory", "NewMessage"]
