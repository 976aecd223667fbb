"""What is wrong with a configured or running answerbox: ``answerbox doctor`` and ``GET /_answerbox/health``.

Each check ends in one finding: ``ok``, ``warn`` (works, but less than it could) or ``fail``
(something a configured pipeline needs is missing), with one line that says how to fix it.
OpenSearch is asked with the service credentials, as answerbox itself asks for pipelines and
the shared cache; the rights are probed by requests that change nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Generic, Literal, TypeVar

from answerbox import __version__
from answerbox.core.config import Settings
from answerbox.core.contract import CONTRACT_VERSION
from answerbox.core.errors import AnswerboxError, LLMError, ModelError, UpstreamError
from answerbox.core.shipped import shipped
from answerbox.opensearch import OpenSearchClients, translate
from answerbox.pipeline.catalogue.definition import PipelineDefinition
from answerbox.pipeline.catalogue.warm_up import WarmUp
from answerbox.pipeline.run.stats import PipelineStats
from answerbox.services import Services

__all__ = ["Doctor", "Finding", "diagnose", "health_body"]

Status = Literal["ok", "warn", "fail"]
Build = Callable[[str, PipelineDefinition], Awaitable[object]]
_PROBE_ID = "_answerbox-doctor-probe"
_TIMEOUT_S = 10.0
_RECENT_S = 5.0  # how long the outbound checks' findings are shared: well under a probe's period
T = TypeVar("T")
_CLUSTER_HEALTH = "check the cluster's health"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f" (fix: {self.fix})" if self.fix and self.status != "ok" else ""
        return f"[{self.status}] {self.check}: {self.detail}{fix}"


class _Recent(Generic[T]):
    """The last result of ``produce`` for ``ttl_s`` seconds, with at most one call of it in flight:
    whoever asks meanwhile waits for that one."""

    def __init__(self, produce: Callable[[], Awaitable[T]], ttl_s: float) -> None:
        self._produce = produce
        self._ttl_s = ttl_s
        self._last: tuple[float, T] | None = None
        self._running: asyncio.Future[T] | None = None

    async def get(self) -> T:
        if self._last is not None and time.monotonic() < self._last[0]:
            return self._last[1]
        if self._running is None:
            self._running = asyncio.ensure_future(self._refresh())
        # Shielded: a caller that hangs up does not cancel the round the others wait for.
        return await asyncio.shield(self._running)

    async def _refresh(self) -> T:
        try:
            value = await self._produce()
            self._last = (time.monotonic() + self._ttl_s, value)
            return value
        finally:
            self._running = None


class Doctor:
    def __init__(
        self,
        settings: Settings,
        clients: OpenSearchClients,
        services: Services,
        build: Build,
        *,
        warm_up: WarmUp | None = None,
    ) -> None:
        """``build`` validates a stored pipeline as serving would: the app passes its resolver's
        (which keeps each definition built once, so a readiness probe rebuilds nothing), and its
        ``warm_up``: until the stored pipelines are warm, the replica is not ready."""
        self._settings = settings
        self._clients = clients
        self._services = services
        self._build = build
        self._warm_up = warm_up
        self._outbound = _Recent(self._call_out, _RECENT_S)

    async def examine(self) -> list[Finding]:
        """Every check, OpenSearch's first: the pipelines and rights are only asked of a cluster that answers.

        The checks that call out (OpenSearch, the LLM) are shared for a few seconds, one round in
        flight at a time: probes and health calls in a burst cost one round, not one each."""
        cluster, llm = await self._outbound.get()
        if self._warm_up is not None and not self._warm_up.done:
            # The models are loading: a probe does not wait for them.
            return [
                *cluster,
                Finding("warm-up", "fail", "the stored pipelines' models are still loading", "wait"),
                llm,
                self._templates(),
            ]
        return [*cluster, llm, await self._models(), self._templates()]

    async def _call_out(self) -> tuple[list[Finding], Finding]:
        return await asyncio.gather(self._cluster(), self._llm())

    async def _cluster(self) -> list[Finding]:
        cluster = await self._opensearch()
        if cluster.status != "ok":
            return [cluster]
        return [
            cluster,
            await self._rights(self._settings.opensearch.pipeline_index),
            await self._rights(self._settings.opensearch.cache_index),
            await self._pipelines(),
        ]

    async def _opensearch(self) -> Finding:
        url, found = self._settings.opensearch.url, partial(Finding, "opensearch")
        try:
            info = await asyncio.wait_for(translate(self._clients.service.info()), _TIMEOUT_S)
        except UpstreamError as exc:
            if exc.status in (401, 403):
                return found(
                    "fail",
                    f"{url} refused the service credentials ({exc.status})",
                    "set opensearch.service_username and service_password to a user OpenSearch knows",
                )
            return found(
                "fail", f"{url} answered {exc.status}", "check opensearch.url points at the cluster's REST port"
            )
        except (AnswerboxError, TimeoutError):
            return found(
                "fail",
                f"{url} cannot be reached",
                "start OpenSearch or set opensearch.url (and its TLS settings) to where it listens",
            )
        version = info.get("version", {}).get("number", "unknown") if isinstance(info, dict) else "unknown"
        return found("ok", f"{url} answers, version {version}")

    async def _rights(self, index: str) -> Finding:
        """Deleting a document no index holds: OpenSearch's security answers 403 without the
        write right, else 404; nothing changes either way."""
        found = partial(Finding, f"rights on {index}")
        try:
            await asyncio.wait_for(translate(self._clients.service.delete(index=index, id=_PROBE_ID)), _TIMEOUT_S)
        except UpstreamError as exc:
            if exc.status in (401, 403):
                return found(
                    "fail",
                    f"the service user may not write {index} ({exc.status})",
                    "grant the service role crud on the index (deploy/ADMIN.md, a secured cluster)",
                )
            if exc.status != 404:
                return found("fail", f"OpenSearch answered {exc.status}", _CLUSTER_HEALTH)
        except (AnswerboxError, TimeoutError):
            return found("fail", "OpenSearch did not answer the probe", _CLUSTER_HEALTH)
        return found("ok", "the service user may read and write it")

    async def _pipelines(self) -> Finding:
        index, found = self._settings.opensearch.pipeline_index, partial(Finding, "stored pipelines")
        try:
            result = await asyncio.wait_for(
                translate(self._clients.service.search(index=index, body={"size": 10000, "query": {"match_all": {}}})),
                _TIMEOUT_S,
            )
        except UpstreamError as exc:
            if exc.status == 404:
                return found("ok", "none stored yet")
            return found("fail", f"they cannot be read ({exc.status})", f"grant the service role read on {index}")
        except (AnswerboxError, TimeoutError):
            return found("fail", "OpenSearch did not answer", _CLUSTER_HEALTH)
        broken = []
        hits = result["hits"]["hits"]
        for hit in hits:
            try:
                definition = PipelineDefinition.parse(hit["_source"]["definition"])
                await self._build(hit["_id"], definition)
            except (AnswerboxError, KeyError, TypeError, ValueError) as exc:
                broken.append(f"{hit['_id']} ({getattr(exc, 'reason', exc)})")
        if broken:
            return found(
                "fail",
                f"{len(broken)} of {len(hits)} no longer validate: {'; '.join(broken)}",
                "PUT each again with this version's options",
            )
        return found("ok", f"{len(hits)} stored, all valid for answerbox {__version__}")

    async def _llm(self) -> Finding:
        llm, found = self._services.llm, partial(Finding, "llm")
        if not llm.configured:
            return found(
                "warn",
                "no LLM is configured: answers are the reader's, expansion and chains are off",
                "set llm.base_url to an OpenAI-compatible endpoint",
            )
        url, model = self._settings.llm.base_url, self._settings.llm.model
        try:
            listed = await asyncio.wait_for(llm.models(), _TIMEOUT_S)
        except (LLMError, TimeoutError):
            return found(
                "fail", f"{url} does not answer", "start the LLM server or set llm.base_url to where it listens"
            )
        if model not in listed:
            return found(
                "fail",
                f"{url} does not serve {model!r} (it lists {', '.join(listed) or 'none'})",
                "set llm.model to one it lists",
            )
        if not await llm.structured(timeout_s=_TIMEOUT_S):
            return found(
                "warn",
                f"{model} at {url} answers, without structured output",
                "chains and citations fall back to free text; a server with JSON-schema output (vLLM, "
                "llama.cpp) does better",
            )
        return found("ok", f"{model} at {url} answers, with structured output")

    async def _models(self) -> Finding:
        variant = self._settings.models.variant
        try:
            models = await self._services.models()
        except ModelError as exc:
            fix = f"point models.dir at an exported model (manifest.json, tokenizer, model.{variant}.onnx)"
            return Finding("models", "fail", exc.reason, fix)
        manifest = models.manifest
        fitted = (
            "a fitted answer calibrator"
            if manifest.answer_confidence
            else "no answer calibrator (confidence is the evaluator's)"
        )
        return Finding(
            "models", "ok", f"{models.directory} ({manifest.task}, {variant}) on {models.provider}, {fitted}"
        )

    def _templates(self) -> Finding:
        folder, ours = self._settings.templates_dir, shipped("templates")
        missing = sorted(
            str(name) for name in (p.relative_to(ours) for p in ours.rglob("*.j2")) if not (folder / name).is_file()
        )
        if missing:
            return Finding(
                "templates",
                "fail",
                f"{folder} lacks {', '.join(missing)}",
                "copy them from the package's templates, or unset templates_dir",
            )
        return Finding("templates", "ok", f"{folder} holds every prompt")


async def diagnose(settings: Settings) -> list[Finding]:
    """``answerbox doctor``: the checks for ``settings``, with clients of their own."""
    from answerbox.processors.registry import default_registry

    clients = OpenSearchClients(settings.opensearch)
    services = Services.create(settings, clients.service)
    registry = default_registry()

    async def build(pipeline_id: str, definition: PipelineDefinition) -> object:
        return await registry.build(pipeline_id, definition, services, PipelineStats(), inline=False)

    try:
        return await Doctor(settings, clients, services, build).examine()
    finally:
        await services.aclose()
        await clients.aclose()


# Without these no search runs through answerbox; without the others only the answers degrade
# (an LLM or model failure never fails a search), so a replica stays in rotation.
_ESSENTIAL = ("opensearch", "rights on", "templates", "warm-up")


def health_body(findings: list[Finding], *, details: bool) -> tuple[dict[str, Any], int]:
    """``GET /_answerbox/health``: red (503, not ready) when an essential check failed; yellow when
    any other failed or warned (the answers degrade, the searches run); else green. Without
    ``details`` (a caller OpenSearch has not authenticated) each check is its name and status:
    the details name OpenSearch's address, the directories and the stored pipelines."""
    essential = [f for f in findings if f.check.startswith(_ESSENTIAL)]
    statuses = {f.status for f in findings}
    status = "red" if any(f.status == "fail" for f in essential) else "yellow" if statuses != {"ok"} else "green"
    body = {
        "status": status,
        "version": __version__,
        "contract_version": CONTRACT_VERSION,
        "checks": [asdict(f) if details else {"check": f.check, "status": f.status} for f in findings],
    }
    return body, 503 if status == "red" else 200
