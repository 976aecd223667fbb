"""Errors answerbox raises, each rendered in OpenSearch's error shape.

AnswerboxError (500, exception)
├── InvalidRequest (400, illegal_argument_exception)
│   ├── ParseError (400, parsing_exception)
│   └── OutOfScope: a processor's search the caller's scope cannot bound
├── ResourceNotFound (404, resource_not_found_exception)
├── RequestTimeout (408, timeout_exception): the body did not arrive in time
├── RequestTooLarge (413, content_too_long_exception)
├── RejectedExecution (429, rejected_execution_exception): too many runs in flight
├── ClientClosedRequest (499, task_cancelled_exception): the caller left; its work was stopped
├── ConfigError (400, illegal_argument_exception): a pipeline or processor config is invalid
├── ProcessorError (500, search_pipeline_exception): a processor failed without ignore_failure
├── ModelError (500, model_exception)
├── LLMError (502, llm_exception)
│   └── LLMTimeout (504, llm_timeout_exception)
├── UpstreamError (OpenSearch's status and body, kept unchanged)
└── UpstreamUnavailable (502, OpenSearch cannot be reached)
    └── UpstreamTimeout (504, timeout_exception: OpenSearch did not answer in time)
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

logger = logging.getLogger(__name__)

__all__ = [
    "AnswerboxError",
    "ClientClosedRequest",
    "ConfigError",
    "InvalidRequest",
    "LLMError",
    "LLMTimeout",
    "ModelError",
    "OutOfScope",
    "ParseError",
    "ProcessorError",
    "RejectedExecution",
    "RequestTimeout",
    "RequestTooLarge",
    "ResourceNotFound",
    "UpstreamError",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "error_body",
    "failure_reason",
    "validation_problems",
]


def validation_problems(exc: ValidationError, *, show_input: bool = False) -> str:
    """A pydantic error as one line: ``[field.path] message`` per problem."""
    return "; ".join(
        f"[{'.'.join(str(p) for p in e['loc'])}] {e['msg']}" + (f" (got {e.get('input')!r})" if show_input else "")
        for e in exc.errors()
    )


def error_body(status: int, error_type: str, reason: str, **extra: Any) -> dict[str, Any]:
    """OpenSearch's error envelope: ``{"error": {"root_cause": [...], "type", "reason"}, "status"}``."""
    cause = {"type": error_type, "reason": reason, **extra}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


# What a caller is told of a failure that is no AnswerboxError, by kind. The exception's own text
# can name files, hosts, settings or a document's words: it goes to the log, never to a caller.
_FAILURE_SENTENCES: tuple[tuple[type[BaseException], str], ...] = (
    (TimeoutError, "it did not finish in time"),
    (MemoryError, "it ran out of memory"),
    (RecursionError, "its input was nested too deeply"),
    (ConnectionError, "a connection it needed failed"),
)
_UNEXPECTED_FAILURE = "it failed unexpectedly (the server's log has the details)"


def failure_reason(error: BaseException) -> str:
    """A caller's sentence for ``error``: an answerbox error's own reason (written for callers),
    else a fixed sentence for its kind. Whoever reports it logs the exception itself."""
    if isinstance(error, AnswerboxError):
        return error.reason
    return next((sentence for kind, sentence in _FAILURE_SENTENCES if isinstance(error, kind)), _UNEXPECTED_FAILURE)


class AnswerboxError(Exception):
    """Base class: an HTTP status, an OpenSearch-style snake_case type and a reason."""

    status: int = 500
    error_type: str = "exception"

    def __init__(self, reason: str, *, status: int | None = None, error_type: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.status = status
        if error_type is not None:
            self.error_type = error_type

    def to_body(self) -> dict[str, Any]:
        return error_body(self.status, self.error_type, self.reason)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, type={self.error_type!r}, reason={self.reason!r})"


class InvalidRequest(AnswerboxError):
    """The caller's request is malformed or asks for something impossible."""

    status = 400
    error_type = "illegal_argument_exception"


class ParseError(InvalidRequest):
    """The request body is not the JSON or NDJSON it must be."""

    error_type = "parsing_exception"


class UnsupportedContentType(InvalidRequest):
    """A body answerbox reads itself came without a JSON content type, as OpenSearch refuses it
    (it also stops a cross-site form from posting one: forms cannot send JSON)."""

    status = 406


class ResourceNotFound(AnswerboxError):
    """A named pipeline (or other answerbox resource) does not exist."""

    status = 404
    error_type = "resource_not_found_exception"


class RequestTimeout(AnswerboxError):
    """The request body did not arrive within ``limits.body_timeout_s``."""

    status = 408
    error_type = "timeout_exception"


class RequestTooLarge(AnswerboxError):
    """The request body is larger than ``limits.max_request_bytes``."""

    status = 413
    error_type = "content_too_long_exception"


class ClientClosedRequest(AnswerboxError):
    """The caller disconnected before the answer: nobody reads this error."""

    status = 499
    error_type = "task_cancelled_exception"


class ConfigError(AnswerboxError):
    """A pipeline or processor configuration is invalid; the message names the processor and field."""

    status = 400
    error_type = "illegal_argument_exception"


class ProcessorError(AnswerboxError):
    """A processor failed and its ``ignore_failure`` is off: the whole search fails."""

    error_type = "search_pipeline_exception"

    @classmethod
    def from_exception(
        cls, processor: str, tag: str | None, error: BaseException, reason: str | None = None
    ) -> ProcessorError:
        """``reason`` says what failed where the caller knows better than ``failure_reason``."""
        name = f"{processor}:{tag}" if tag else processor
        if isinstance(error, AnswerboxError):
            # Keep the cause's status: a bad prompt override is still the caller's 400.
            return cls(f"processor [{name}] failed: {error.reason}", status=error.status)
        return cls(f"processor [{name}] failed: {reason or failure_reason(error)}")


class ModelError(AnswerboxError):
    """An ONNX model could not be loaded or run."""

    error_type = "model_exception"


class LLMError(AnswerboxError):
    """The LLM endpoint failed or answered with something unusable."""

    status = 502
    error_type = "llm_exception"


class LLMTimeout(LLMError):
    """The LLM did not answer within its timeout."""

    status = 504
    error_type = "llm_timeout_exception"


class UpstreamError(AnswerboxError):
    """OpenSearch answered with an error; its status and body are passed on unchanged."""

    error_type = "upstream_exception"

    def __init__(self, status: int, body: Any) -> None:
        reason = _reason_of(body) or f"OpenSearch answered {status}"
        super().__init__(reason, status=status)
        self.body = body

    def to_body(self) -> dict[str, Any]:
        if isinstance(self.body, dict) and "error" in self.body:
            return self.body
        return error_body(self.status, self.error_type, self.reason)


class OutOfScope(InvalidRequest):
    """A processor's own search that could read more than the caller's search: never sent."""


class RejectedExecution(AnswerboxError):
    """Too many searches are running (OpenSearch's answer when its search queue is full)."""

    status = 429
    error_type = "rejected_execution_exception"


class UpstreamUnavailable(AnswerboxError):
    """OpenSearch could not be reached or did not answer in time. The cause (hosts, ports, TLS)
    goes to the log: a caller learns only which of the two it was."""

    status = 502
    error_type = "connect_exception"

    @classmethod
    def unreachable(cls, cause: object) -> UpstreamUnavailable:
        logger.warning("OpenSearch is unreachable: %s", cause)
        return cls("OpenSearch is unreachable")


class UpstreamTimeout(UpstreamUnavailable):
    """OpenSearch did not answer in time (the cause goes to the log, as for UpstreamUnavailable)."""

    status = 504
    error_type = "timeout_exception"

    @classmethod
    def after(cls, cause: object) -> UpstreamTimeout:
        logger.warning("OpenSearch did not answer in time: %r", cause)
        return cls("OpenSearch did not answer in time")


def _reason_of(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        causes = error.get("root_cause") or [error]
        first = causes[0] if isinstance(causes, list) and causes else error
        reason = first.get("reason") if isinstance(first, dict) else None
        return str(reason) if reason is not None else None
    return str(error) if error is not None else None
