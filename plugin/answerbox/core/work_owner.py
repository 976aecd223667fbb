"""Whose work the running task does: the caller's key, set when a search is admitted.

The shared queues below the pipeline (the model's micro-batcher, the LLM's call slots) read
it to bound each caller's share, so one caller's flood cannot take what every caller needs.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["work_owner"]

# None: nobody's in particular (startup, benches), bounded by the shared limits alone.
work_owner: ContextVar[str | None] = ContextVar("work_owner", default=None)
