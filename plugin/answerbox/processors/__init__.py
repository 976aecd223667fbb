"""answerbox's processor types, one module each."""

from __future__ import annotations

from answerbox.pipeline.registry import ProcessorRegistry

__all__ = ["default_registry"]


def default_registry() -> ProcessorRegistry:
    return ProcessorRegistry([])
