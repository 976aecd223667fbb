"""`_search` and `_msearch`: run the chosen pipeline, or pass the request through untouched."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from answerbox.config import Settings
from answerbox.contract import GenerativeQAParameters
from answerbox.errors import AnswerboxError, InvalidRequest, ParseError, RequestTooLarge, UnsupportedContentType
from answerbox.http.passthrough import Passthrough
from answerbox.opensearch import Caller, SearchBackend
from answerbox.pipeline.base import JSON, PipelineContext, ResponseProcessor, SearchRequest
from answerbox.pipeline.engine import Pipeline
from answerbox.pipeline.resolver import PipelineResolver
from answerbox.query_text import question_of

__all__ = ["SearchHandler", "finish", "json_or_none", "parse_json", "read_body", "require_json"]

# Parameters answerbox consumes; OpenSearch must not see them once a pipeline ran here.
_OWN_PARAMS = ("search_pipeline", "verbose_pipeline")
# ext keys answerbox owns; OpenSearch rejects ext keys no plugin registered.
_OWN_EXT = ("answerbox", "generative_qa_parameters")


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"request body of {declared} bytes is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"request body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def require_json(request: Request) -> None:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedContentType(f"Content-Type header [{media_type}] is not supported: send application/json")


# Deeper bodies are refused: copying and walking them would exhaust Python's stack, and no
# search or pipeline needs more (OpenSearch caps bool nesting far below this, too).
MAX_JSON_DEPTH = 100


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def parse_json(raw: bytes) -> Any:
    """The body as JSON; nesting too deep to handle is a parse error, as malformed JSON is."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ParseError(f"request body is not valid JSON: {reason}") from None
    if _too_deep(value):
        raise ParseError(f"request body is not valid JSON: nested too deeply (more than {MAX_JSON_DEPTH} levels)")
    return value


def json_or_none(raw: bytes) -> Any:
    try:
        return parse_json(raw) if raw.strip() else {}
    except ParseError:
        return None


def _generative_qa(body: JSON, settings: Settings) -> GenerativeQAParameters | None:
    ext = body.get("ext")
    raw = ext.get("generative_qa_parameters") if isinstance(ext, dict) else None
    if raw is None:
        return None
    try:
        qa = GenerativeQAParameters.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"[{'.'.join(str(p) for p in e['loc'])}] {e['msg']}" for e in exc.errors())
        raise InvalidRequest(f"invalid ext.generative_qa_parameters: {problems}") from exc
    limits = settings.limits
    for name in ("llm_question", "system_prompt", "user_instructions"):
        if len(getattr(qa, name) or "") > limits.max_prompt_chars:
            raise InvalidRequest(
                f"ext.generative_qa_parameters.{name} is longer than limits.max_prompt_chars ({limits.max_prompt_chars})"
            )
    if qa.context_size is not None and qa.context_size > limits.max_context_size:
        raise InvalidRequest(
            f"ext.generative_qa_parameters.context_size is above limits.max_context_size ({limits.max_context_size})"
        )
    if qa.llm_model is not None and qa.llm_model not in (settings.llm.model, *settings.llm.allowed_models):
        raise InvalidRequest(
            f"ext.generative_qa_parameters.llm_model [{qa.llm_model}] is not one callers may choose (llm.allowed_models)"
        )
    return qa


def _upstream_form(pipeline: Pipeline, request: SearchRequest) -> SearchRequest:
    """The request as OpenSearch must see it: our parameters and ext keys removed, its own processors inline."""
    upstream = request.copy()
    upstream.body.pop("search_pipeline", None)
    for name in _OWN_PARAMS:
        upstream.params.pop(name, None)
    ext = upstream.body.get("ext")
    if isinstance(ext, dict):
        for key in _OWN_EXT:
            if not (key == "generative_qa_parameters" and pipeline.native_rag):
                ext.pop(key, None)
        if not ext:
            upstream.body.pop("ext")
    # Inline even when empty: the index's default may name an answerbox pipeline OpenSearch does not know.
    upstream.body["search_pipeline"] = pipeline.inline_native
    return upstream


def finish(pipeline: Pipeline, response: JSON, ctx: PipelineContext, verbose: bool) -> JSON:
    if pipeline.request_processors or pipeline.response_processors:
        ctx.report.timings_ms["total"] = round(ctx.elapsed_ms(), 2)
        ext = response.setdefault("ext", {})
        ext["answerbox"] = ctx.report.render()
        if ctx.report.answer is not None:
            ext["retrieval_augmented_generation"] = {"answer": ctx.report.answer.text}
    if verbose:
        response["processor_results"] = ctx.processor_results + response.get("processor_results", [])
    return response


class SearchHandler:
    def __init__(self, *, resolver: PipelineResolver, backend: SearchBackend, passthrough: Passthrough, settings: Settings) -> None:
        self._resolver = resolver
        self._backend = backend
        self._passthrough = passthrough
        self._settings = settings
        self._max_body = settings.limits.max_request_bytes

    def request(self, pipeline: Pipeline, index: str | None, body: JSON, params: dict[str, str], http_request: Request) -> SearchRequest:
        caller = Caller.from_headers(http_request.headers)
        return SearchRequest(index=index, body=body, params=params, caller=caller, native=pipeline.inline_native)

    def context(self, pipeline: Pipeline, request: SearchRequest) -> PipelineContext:
        qa = _generative_qa(request.body, self._settings)
        if qa is not None and (qa.memory_id or qa.message_size or qa.llm_response_field) and not pipeline.native_rag:
            # OpenSearch's own RAG processor keeps conversational memory; answerbox's do not, and
            # a parameter that is accepted and ignored would answer as if it were honoured.
            raise InvalidRequest(
                "memory_id, message_size and llm_response_field need OpenSearch's retrieval_augmented_generation "
                "processor in the pipeline: answerbox's processors keep no conversational memory"
            )
        return PipelineContext(pipeline_id=pipeline.id, question=question_of(request.body, request.params), generative_qa=qa)

    async def search(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._max_body)
        body = json_or_none(raw)
        index = http_request.path_params.get("index")
        params = dict(http_request.query_params)
        # Unparseable bodies go on as they came, so OpenSearch's own error comes back.
        pipeline = await self._resolver.resolve(index, body, params) if isinstance(body, dict) else None
        if pipeline is None:
            return await self._passthrough.forward(http_request, raw)
        request = self.request(pipeline, index, body, params, http_request)
        ctx = self.context(pipeline, request)
        response = await self.execute(pipeline, request, ctx)
        return JSONResponse(finish(pipeline, response, ctx, params.get("verbose_pipeline") == "true"))

    async def execute(self, pipeline: Pipeline, request: SearchRequest, ctx: PipelineContext) -> JSON:
        """Request processors, the search with the caller's credentials, response processors."""
        request, response = await self.search_phase(pipeline, request, ctx)
        return await self.response_phase(pipeline, request, response, ctx)

    async def search_phase(self, pipeline: Pipeline, request: SearchRequest, ctx: PipelineContext) -> tuple[SearchRequest, JSON]:
        """Request processors and the search with the caller's credentials: the request as
        searched and OpenSearch's response."""
        request = await pipeline.process_request(request, ctx)
        upstream = _upstream_form(pipeline, request)
        started = time.perf_counter()
        response = await self._backend.search(index=upstream.index, body=upstream.body, params=upstream.params, caller=request.caller)
        ctx.report.timings_ms["search"] = round((time.perf_counter() - started) * 1000, 2)
        return request, response

    @staticmethod
    async def response_phase(
        pipeline: Pipeline, request: SearchRequest, response: JSON, ctx: PipelineContext, *, skip: ResponseProcessor[Any] | None = None
    ) -> JSON:
        """The response processors, in the pipeline's order, but ``skip``."""
        if skip is not None:
            pipeline = replace(pipeline, response_processors=[p for p in pipeline.response_processors if p is not skip])
        return await pipeline.process_response(request, response, ctx)

    async def msearch(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._max_body)
        pairs = _ndjson_pairs(raw)
        most = self._settings.limits.max_msearch_searches
        if pairs is not None and len(pairs) > most:
            raise InvalidRequest(f"_msearch holds {len(pairs)} searches, above limits.max_msearch_searches ({most})")
        index = http_request.path_params.get("index")
        params = dict(http_request.query_params)
        targets = [_line_index(header, index) for header, _ in pairs or []]
        pipelines = (
            await asyncio.gather(
                *(
                    self._resolver.resolve(target, body, {**params, **_header_pipeline(header)})
                    for (header, body), target in zip(pairs, targets, strict=True)
                )
            )
            if pairs is not None
            else []
        )
        if pairs is None or not any(pipelines):
            return await self._passthrough.forward(http_request, raw)
        caller = Caller.from_headers(http_request.headers)
        verbose = params.get("verbose_pipeline") == "true"
        items = [
            _MsearchItem(header, target, body, pipeline, caller, params, self.context)
            for (header, body), target, pipeline in zip(pairs, targets, pipelines, strict=True)
        ]
        await asyncio.gather(*(item.process_request() for item in items))
        live = [item for item in items if item.result is None]
        started = time.perf_counter()
        upstream_params = {k: v for k, v in params.items() if k not in _OWN_PARAMS}
        answer = await self._backend.msearch(
            searches=[item.upstream_pair() for item in live], params=upstream_params, caller=caller, inline=False
        )
        took = round((time.perf_counter() - started) * 1000, 2)
        for item, response in zip(live, answer["responses"], strict=True):
            item.result = response
        await asyncio.gather(*(item.process_response(took, verbose) for item in live))
        return JSONResponse({"took": answer.get("took", round(took)), "responses": [item.result for item in items]})


def _header_pipeline(header: JSON) -> dict[str, str]:
    value = header.get("search_pipeline")
    return {"search_pipeline": value} if isinstance(value, str) else {}


def _line_index(header: JSON, path_index: str | None) -> str | None:
    """An msearch line's target: its header's ``index`` (a name, a comma list or a JSON list),
    else the path's, as OpenSearch reads it; never "all indices" by omission."""
    value = header.get("index")
    if isinstance(value, list):
        return ",".join(str(name) for name in value)
    return value if isinstance(value, str) and value else path_index


def _ndjson_pairs(raw: bytes) -> list[tuple[JSON, JSON]] | None:
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if len(lines) % 2:
        return None
    parsed = [json_or_none(line) for line in lines]
    if not all(isinstance(p, dict) for p in parsed):
        return None
    return list(zip(parsed[::2], parsed[1::2], strict=True))


class _MsearchItem:
    """One line pair of an `_msearch`: its own pipeline run, or an error in msearch's shape."""

    def __init__(
        self, header: JSON, index: str | None, body: JSON, pipeline: Pipeline | None, caller: Caller, params: dict[str, str], context: Any
    ) -> None:
        # Upstream the whole msearch goes to /_msearch: each header names its target, and a
        # line answerbox does not run keeps its own search_pipeline for OpenSearch.
        own = pipeline is not None
        self.header = {k: v for k, v in header.items() if not (own and k == "search_pipeline")} | ({"index": index} if index else {})
        self.pipeline = pipeline
        native = pipeline.inline_native if pipeline is not None else None
        self.request = SearchRequest(index=index, body=body, params=dict(params), caller=caller, native=native)
        self.ctx: PipelineContext | None = None
        self._context = context
        self.result: JSON | None = None

    async def process_request(self) -> None:
        if self.pipeline is None:
            return
        try:
            self.ctx = self._context(self.pipeline, self.request)
            self.request = await self.pipeline.process_request(self.request, self.ctx)
        except AnswerboxError as exc:
            self.result = exc.to_body()

    def upstream_pair(self) -> tuple[JSON, JSON]:
        if self.pipeline is None:
            return self.header, self.request.body
        return self.header, _upstream_form(self.pipeline, self.request).body

    async def process_response(self, took_ms: float, verbose: bool) -> None:
        if self.pipeline is None or self.ctx is None or self.result is None or "error" in self.result:
            return
        self.ctx.report.timings_ms["search"] = took_ms
        try:
            response = await self.pipeline.process_response(self.request, self.result, self.ctx)
            self.result = finish(self.pipeline, response, self.ctx, verbose)
        except AnswerboxError as exc:
            self.result = exc.to_body()
