"""CRAG's corrective search, with a second search the admin configures in place of the paper's web search.

The question is rewritten into keywords by the paper's prompt (Table 7); when the LLM
fails or answers nothing usable, :func:`fallback_keywords` stands in, so a corrective
search always runs. ``keywords: question`` takes the question's own words without asking the
LLM: with a small LLM its keywords found no more answers and doubled the corrective search's
time (onnx_models/LOG.md, *The keyword rewrite with a small LLM*). The keywords go into a
``multi_match`` (never ``query_string``: model text must not inject query syntax) against
another index or alias, broadened with ``operator: or`` and fuzziness, or both. It runs
within the caller's scope (filters, ``post_filter``, ``_source``): it may look elsewhere, but
not past what the caller may see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from answerbox.core.errors import LLMError
from answerbox.llm import LLMClient
from answerbox.pipeline.limits.request_limits import LLMTokens, Override
from answerbox.processors.retrieval_evaluator.keywords import KEYWORDS_SCHEMA, fallback_keywords, read_keywords
from answerbox.prompts.library import Prompt

__all__ = ["KEYWORD_REWRITE_TEMPLATE", "CorrectiveSearchConfig", "Rewrite", "corrective_query", "rewrite_question"]

KEYWORD_REWRITE_TEMPLATE = "retrieval_evaluator/keyword_rewrite.j2"
_FUZZINESS = re.compile(r"AUTO(?::\d+,\d+)?|[012]")


class CorrectiveSearchConfig(BaseModel):
    """``corrective`` in the ``retrieval_evaluator`` config; ``null`` there turns corrective search off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: str | None = Field(default=None, min_length=1)  # another index or alias; None: the request's target
    fields: list[str] | None = Field(default=None, min_length=1)  # None: the processor's text_fields, else all fields
    operator: Literal["or", "and"] = "or"
    fuzziness: str | None = "AUTO"
    # Leading characters a fuzzy term keeps exact: otherwise every term of the index is a candidate
    # (osmem-server, SQuAD dev: 102 ms a search, 3 with 2). With 2, held-out training articles had 2
    # right answers fewer in 600 (onnx_models/LOG.md, *The corrective search's fuzzy terms*).
    prefix_length: int = Field(default=2, ge=0)
    size: int = Field(default=10, ge=1, le=100)
    keywords: Literal["llm", "question"] = "llm"  # the paper's LLM rewrite, or the question's own words
    prompt: Override[str | None] = None  # replaces the Table 7 template text
    max_tokens: LLMTokens = Field(default=32, ge=1, le=256)
    llm_timeout_s: float | None = Field(default=None, gt=0)  # None: the LLM's; capped at half the processor's time left

    @field_validator("fuzziness")
    @classmethod
    def _fuzziness(cls, value: str | None) -> str | None:
        if value is not None and not _FUZZINESS.fullmatch(value):
            raise ValueError(f"fuzziness must be AUTO, AUTO:low,high, 0, 1 or 2, got {value!r}")
        return value


@dataclass(frozen=True, slots=True)
class Rewrite:
    keywords: tuple[str, ...]
    source: Literal["llm", "fallback", "question"]
    failure: str | None = None  # why the LLM's keywords were not used

    @property
    def query(self) -> str:
        return " ".join(self.keywords)


async def rewrite_question(
    llm: LLMClient, prompt: Prompt, question: str, config: CorrectiveSearchConfig, timeout_s: float
) -> Rewrite:
    if config.keywords == "question":
        return Rewrite(tuple(fallback_keywords(question)), "question")
    structured = await llm.structured(timeout_s=timeout_s)
    # One line keeps a question's own line breaks from posing as extra prompt examples.
    rendered = await prompt.arender(question=" ".join(question.split()), json=structured)
    try:
        completion = await llm.complete(
            [{"role": "user", "content": rendered}],
            max_tokens=config.max_tokens,
            stop=None if structured else ["\nquestion:"],  # a JSON reply ends with its schema
            timeout_s=timeout_s,
            schema=KEYWORDS_SCHEMA if structured else None,
        )
    except LLMError as exc:
        return Rewrite(tuple(fallback_keywords(question)), "fallback", exc.reason)
    keywords = read_keywords(completion.text, question, structured)
    if not keywords:
        return Rewrite(
            tuple(fallback_keywords(question)),
            "fallback",
            f"the LLM gave no keywords from the question: {completion.text!r}",
        )
    return Rewrite(tuple(keywords), "llm")


def corrective_query(config: CorrectiveSearchConfig, query: str, fields: Sequence[str] | None) -> dict[str, Any]:
    """The keyword query; the caller's scope (filters and all) is added by ``ScopedSearch``."""
    match: dict[str, Any] = {"query": query, "operator": config.operator}
    if fields:
        match["fields"] = list(fields)
    if config.fuzziness is not None:
        match |= {"fuzziness": config.fuzziness, "prefix_length": config.prefix_length}
    return {"multi_match": match}
