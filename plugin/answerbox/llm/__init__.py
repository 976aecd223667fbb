"""OpenAI-compatible LLM access (vLLM, Ollama, llama.cpp, OpenAI)."""

from answerbox.llm.client import Completion, LLMClient

__all__ = ["Completion", "LLMClient"]
