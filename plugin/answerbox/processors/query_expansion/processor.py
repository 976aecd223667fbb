"""``llm_query_expansion``: query expansion by prompting an LLM (Jagerman et al., 2023; methods.md §1).

The LLM writes a passage (q2d), keywords (q2e) or a rationale (cot) for the question,
zero-shot, from few-shot examples, or from the top hits of a first BM25 search (PRF); the
clauses that ask the question are then rewritten as ``q×weight + expansion`` (see
``expanded_query``), never matching a document they did not match before. So a search that
reads no score (a count, or one sorted by a field: ``pipeline/run/hits_asked.py``) goes on as written,
with no LLM call.
Anything that goes wrong on the way (LLM down or slow, PRF search failing) leaves the
query as the user wrote it and adds a warning: expansion may improve the hits, never lose them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from answerbox.core.contract import ExpansionMethod, ExpansionMode, QueryExpansionReport
from answerbox.core.digest import json_digest
from answerbox.core.errors import ConfigError, LLMError, OutOfScope, UpstreamError, UpstreamUnavailable
from answerbox.core.query_text import find_text_clauses, question_clauses, replace_text_clauses
from answerbox.core.ttl_cache import TTLCache
from answerbox.pipeline.base import (
    PipelineContext,
    Planning,
    ProcessorConfig,
    RequestProcessor,
    SearchRequest,
    Sourced,
    StepPlan,
    first_set,
)
from answerbox.pipeline.limits.request_limits import (
    BelowProcessorTimeout,
    ConfigContext,
    LLMModel,
    LLMTokens,
    Override,
    StoredOnly,
)
from answerbox.processors.query_expansion.expanded_query import Combine, clean_expansion, expanded_clause
from answerbox.processors.text.instructions import addresses_the_model
from answerbox.processors.text.passages import hits_of

if TYPE_CHECKING:
    from answerbox.services import Services

__all__ = ["Example", "LLMQueryExpansion", "QueryExpansionConfig"]


# Few-shot and PRF prompts end in "Query: ...\n<Label>:"; a small model tends to go on
# inventing the next example.
_STOP = ["\nQuery:"]


class Example(BaseModel):
    """One few-shot demonstration: a query and the passage (q2d) or keywords (q2e) for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1)
    output: str = Field(min_length=1)


_EXAMPLES = TypeAdapter(tuple[Example, ...])
_MAX_EXAMPLES_BYTES = 64 * 1024  # a few-shot file is a few kilobytes


def _read_examples(name: str, context: ConfigContext | None) -> tuple[Example, ...]:
    """A stored pipeline's examples file, only from inside the configured ``files_dir``.

    Errors name the file, never its content: a definition must not read the server's files
    back to whoever writes it."""
    if context is None or context.inline:
        raise ValueError("examples_file is for stored pipelines")
    if context.files_dir is None:
        raise ValueError("examples_file needs files_dir in answerbox's configuration")
    root = context.files_dir.resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise ValueError(f"examples_file [{name}] is not a file in the configured files_dir")
    with path.open("rb") as handle:
        data = handle.read(_MAX_EXAMPLES_BYTES + 1)
    if len(data) > _MAX_EXAMPLES_BYTES:
        raise ValueError(f"examples_file [{name}] is larger than {_MAX_EXAMPLES_BYTES} bytes")
    try:
        examples = _EXAMPLES.validate_json(data)
    except ValidationError as exc:
        raise ValueError(
            f"examples_file [{name}] is not a JSON list of query/output objects ({exc.error_count()} errors)"
        ) from None
    if not examples:
        raise ValueError(f"examples_file [{name}] holds no examples")
    return examples


class QueryExpansionConfig(ProcessorConfig):
    # q2d zero-shot: of the eight prompts, with SmolLM2-135M on 300 SQuAD questions
    # (bench/retrieval_eval.py), the only one that beats BM25 significantly (R@10 .937 vs
    # .910, sign test p = 0.008); few-shot and PRF did not help that model.
    method: ExpansionMethod = "q2d"
    mode: ExpansionMode = "zs"
    # Jinja2 text replacing templates/query_expansion/<method>_<mode>.j2 for this pipeline.
    prompt: Override[str | None] = None
    examples: Override[tuple[Example, ...]] = ()
    # A JSON list of {"query", "output"} objects, instead of inline examples.
    examples_file: str | None = None
    prf_docs: int = Field(default=3, ge=1, le=10)
    # Source fields shown to the LLM from PRF hits; empty: the fields the user's query searches.
    prf_fields: tuple[str, ...] = ()
    prf_max_chars: int = Field(default=1000, ge=50, le=20_000)
    # How many times the user's query counts against the expansion's once (the paper: 5).
    query_weight: int = Field(default=5, ge=1, le=50)
    # "bool" and "repeat" rank SQuAD identically on osmem-server; "bool" keeps the user's
    # operator and minimum_should_match meaning what they meant.
    combine: Combine = "bool"
    max_expansion_terms: int = Field(default=128, ge=1, le=1000)
    model: LLMModel = None
    max_tokens: LLMTokens = Field(default=128, ge=1, le=4096)
    timeout_s: BelowProcessorTimeout = Field(default=10.0, gt=0, le=300, validate_default=True)
    cache_entries: int = Field(default=4096, ge=0, le=100_000)
    cache_ttl_s: float = Field(default=3600.0, gt=0, le=86_400)
    # Also keep expansions in OpenSearch (``opensearch.cache_index``), shared by every replica.
    # It is written with the service account, so only a stored pipeline may ask for it.
    shared_cache: StoredOnly[bool] = False

    _file_examples: tuple[Example, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> QueryExpansionConfig:
        if self.method == "cot" and self.mode == "fs" and self.prompt is None:
            raise ValueError(
                "method 'cot' has no few-shot prompt (the paper has cot and cot/prf); use mode 'zs' or "
                "'prf', or give a prompt"
            )
        given = bool(self.examples) + (self.examples_file is not None)
        if self.mode == "fs" and given != 1:
            raise ValueError("mode 'fs' needs exactly one of examples and examples_file")
        if self.mode != "fs" and given:
            raise ValueError(f"examples are used only by mode 'fs', not {self.mode!r}")
        if self.examples_file is not None:
            # Read once, when the pipeline is defined, so a bad file fails the definition
            # rather than every search.
            self._file_examples = _read_examples(self.examples_file, info.context)
        return self

    @property
    def few_shot(self) -> tuple[Example, ...]:
        return self.examples or self._file_examples


def _strings(value: Any) -> list[str]:
    """Every string inside a ``_source`` value, in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpansionPlan(StepPlan):
    model: Sourced[str]
    timeout_s: Sourced[float]


class LLMQueryExpansion(RequestProcessor[QueryExpansionConfig]):
    type_name = "llm_query_expansion"
    config_model = QueryExpansionConfig

    def __init__(self, config: QueryExpansionConfig, services: Services) -> None:
        super().__init__(config, services)
        # Loaded now, and test-rendered by ``check``, so a missing template or an override using
        # an unknown variable is rejected when the pipeline is defined.
        try:
            self._prompt = services.prompts.get(f"query_expansion/{config.method}_{config.mode}.j2", config.prompt)
        except ConfigError as exc:
            raise ConfigError(f"processor [{self.name}]: {exc.reason}") from exc
        self._cache: TTLCache[str] = TTLCache(config.cache_entries, config.cache_ttl_s)
        self._in_flight: dict[str, asyncio.Future[str]] = {}
        self._config_digest = json_digest(config.model_dump(mode="json"))

    async def plan(self, planning: Planning) -> ExpansionPlan:
        # An expansion changes scores only, never which documents match: no LLM call for nothing.
        reads = planning.asked.scores
        return ExpansionPlan(
            skipped=None
            if reads
            else "the search reads no score (a count, or a sort of its own): its query was not expanded",
            model=first_set((self.config.model, "pipeline"), (self.services.settings.llm.model, "settings")),
            timeout_s=self.config.sourced("timeout_s", self.config.timeout_s),
        )

    async def check(self) -> None:
        await self._prompt.arender(query="q", examples=self.config.few_shot, prf=["d"])

    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        question = (ctx.question or "").strip()
        # Only the question's own clauses are expanded: other text (an org, a tenant) restricts.
        if not question or not question_clauses(request.body, question):
            return request
        expansion = await self._expansion(question, request, ctx)
        if not expansion:
            return request
        expanded = request.copy()
        replace_text_clauses(
            expanded.body,
            question,
            lambda clause: expanded_clause(
                clause, expansion, weight=self.config.query_weight, combine=self.config.combine
            ),
        )
        return expanded

    async def _expansion(self, question: str, request: SearchRequest, ctx: PipelineContext) -> str:
        """The cleaned expansion, or "" when the original query must be used alone."""
        report = ctx.report.query_expansion = QueryExpansionReport(
            method=self.config.method, mode=self.config.mode, prompt=self._prompt.name
        )
        key = self._cache_key(question, request, ctx)
        tier: Literal["memory", "index", "in_flight"] = "memory"
        cached = self._cache.get(key)
        if cached is None and self.config.shared_cache:
            cached, tier = await self.services.shared_cache.get(key), "index"
            if cached is not None:
                self._cache.put(key, cached)
        pending = self._in_flight.get(key)
        if cached is None and pending is not None:
            # An identical search is asking the LLM right now: one call serves both.
            cached, tier = await asyncio.shield(pending), "in_flight"
            if not cached:
                return self._fall_back(report, ctx, "the identical search it waited for got no expansion")
        if cached is not None:
            report.expansion, report.cached, report.cache = cached, True, tier
            return cached
        pending = self._in_flight[key] = asyncio.get_running_loop().create_future()
        text = ""
        try:
            text = await self._ask(question, request, report, ctx)
        finally:
            del self._in_flight[key]
            pending.set_result(text)
        if text:
            self._cache.put(key, text)
            if self.config.shared_cache:
                await self.services.shared_cache.put(key, text, self.config.cache_ttl_s)
        return text

    async def _ask(
        self, question: str, request: SearchRequest, report: QueryExpansionReport, ctx: PipelineContext
    ) -> str:
        """One LLM call (after the PRF search); the cleaned expansion, or "" after a fallback."""
        # timeout_s bounds the PRF search and the LLM call together, within the processor's share
        # of the pipeline's time (with a margin: a fallback, never a processor timeout).
        plan = ctx.plan(self, ExpansionPlan)
        timeout = min(plan.timeout_s.value, ctx.deadline.for_work())
        try:
            async with asyncio.timeout(timeout):
                # The PRF search, or a search of no documents, checks the caller's credentials
                # before any LLM time is spent on the request.
                passages = (
                    await self._prf_passages(request, ctx) if self.config.mode == "prf" else await _access_checked(ctx)
                )
                prompt = await self._prompt.arender(query=question, examples=self.config.few_shot, prf=passages)
                completion = await self.services.llm.complete(
                    [{"role": "user", "content": prompt}],
                    max_tokens=self.config.max_tokens,
                    stop=_STOP,
                    model=plan.model.value,
                    timeout_s=timeout,
                )
        except (LLMError, UpstreamError, UpstreamUnavailable, OutOfScope) as exc:
            return self._fall_back(report, ctx, exc.reason)
        except TimeoutError:
            return self._fall_back(report, ctx, f"expansion took longer than {timeout:.3g}s")
        text = clean_expansion(completion.text, self.config.max_expansion_terms)
        report.expansion, report.llm_ms = text, round(completion.millis, 1)
        if not text:
            return self._fall_back(report, ctx, "the LLM gave no usable expansion")
        return text

    def _fall_back(self, report: QueryExpansionReport, ctx: PipelineContext, reason: str) -> str:
        report.fallback = True
        self.warn(ctx, f"searched with the original query: {reason}")
        return ""

    def _cache_key(self, question: str, request: SearchRequest, ctx: PipelineContext) -> str:
        """(caller, model, template hash, query), plus all else that shapes the prompt.

        Always keyed by the caller's credentials: a cache shared across callers would tell one
        caller (by ``cached: true``, or by speed) what another asked. A PRF prompt also holds
        documents this caller was allowed to read, so its expansion is keyed by everything
        that chose those documents; a hit then also skips the PRF search.
        """
        scope = [ctx.search.scope.key(), request.body.get("query")] if self.config.mode == "prf" else []
        model = ctx.plan(self, ExpansionPlan).model.value
        return json_digest(
            [request.caller.credentials, model, self._prompt.sha256, self._config_digest, question, scope]
        )

    def _prf_fields(self, request: SearchRequest) -> list[str]:
        if self.config.prf_fields:
            return list(self.config.prf_fields)
        fields: list[str] = []
        for clause in find_text_clauses(request.body):
            named = [clause.field] if clause.field else clause.holder.get("fields", [])
            fields += [str(f).split("^")[0] for f in named if isinstance(f, str)]
        return list(dict.fromkeys(fields))

    async def _prf_passages(self, request: SearchRequest, ctx: PipelineContext) -> list[str]:
        """The top hits of the user's own query, within the caller's scope, as one line of text
        each; a hit that addresses the model is left out (it would write the expansion)."""
        response = await ctx.search.search(
            request.body["query"], size=self.config.prf_docs, fields=self._prf_fields(request) or None
        )
        texts = [
            " ".join(" ".join(_strings(hit.get("_source"))).split())[: self.config.prf_max_chars]
            for hit in hits_of(response)
        ]
        kept = [t for t in texts if not addresses_the_model(t)]
        if len(kept) < len(texts):
            self.warn(
                ctx, f"{len(texts) - len(kept)} feedback hit(s) give the model instructions; left out of the prompt"
            )
        return kept


async def _access_checked(ctx: PipelineContext) -> list[str]:
    """No passages; raises the caller's 401/403 if OpenSearch refuses the caller."""
    await ctx.search.search({"match_none": {}}, size=0, fields=[])
    return []
