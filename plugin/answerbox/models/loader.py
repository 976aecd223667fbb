"""``load_models(settings)``: manifest, tokenizer, one ONNX session, the reader and evaluator on top;
and the claim verifier, in a session of its own, where its folder holds one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from answerbox.core.config import ModelSettings
from answerbox.models.encoder import PassageEncoder
from answerbox.models.evaluator import Evaluator
from answerbox.models.manifest import MANIFEST_FILE, ModelManifest
from answerbox.models.reader import Reader
from answerbox.models.session import CPU, OnnxSession
from answerbox.models.verifier import ClaimVerifier, load_verifier
from answerbox.models.windows import WindowTokenizer, load_tokenizer

__all__ = ["Models", "batch_wait_s", "load_models"]

DEVICE_BATCH_WAIT_S = 0.004


@dataclass(frozen=True, slots=True)
class Models:
    reader: Reader
    evaluator: Evaluator
    manifest: ModelManifest
    provider: str  # the execution provider actually in use, e.g. "CPUExecutionProvider"
    directory: Path
    encoder: PassageEncoder
    verifier: ClaimVerifier | None = None

    def close(self) -> None:
        self.encoder.close()
        if self.verifier is not None:
            self.verifier.close()


def load_models(settings: ModelSettings) -> Models:
    """Synchronous and slow (reads the model): call it off the event loop."""
    manifest = ModelManifest.load(settings.dir)
    session = OnnxSession(
        manifest.model_path(settings.dir, settings.variant),
        providers=settings.providers,
        intra_op_threads=settings.intra_op_threads,
    )
    windows = WindowTokenizer(
        load_tokenizer(settings.dir / manifest.tokenizer),
        max_length=manifest.max_length,
        stride=manifest.stride,
        max_windows=settings.max_windows_per_passage,
    )
    wait_s = batch_wait_s(settings, session.provider)
    encoder = PassageEncoder(session, windows, max_batch=settings.max_batch, max_wait_s=wait_s)
    return Models(
        reader=Reader(encoder, max_answer_tokens=manifest.max_answer_tokens, cover_margin=manifest.span_cover_margin),
        evaluator=Evaluator(encoder, manifest),
        manifest=manifest,
        provider=session.provider,
        directory=settings.dir,
        encoder=encoder,
        verifier=_verifier(settings, wait_s),
    )


def batch_wait_s(settings: ModelSettings, provider: str) -> float:
    """``models.max_wait_ms`` where set, else the provider's default (see ``ModelSettings``)."""
    if settings.max_wait_ms is not None:
        return settings.max_wait_ms / 1000
    return 0.0 if provider == CPU else DEVICE_BATCH_WAIT_S


def _verifier(settings: ModelSettings, wait_s: float) -> ClaimVerifier | None:
    if not (settings.verifier_dir / MANIFEST_FILE).is_file():
        return None
    return load_verifier(
        settings.verifier_dir,
        providers=settings.providers,
        intra_op_threads=settings.intra_op_threads,
        max_batch=settings.max_batch,
        max_wait_s=wait_s,
    )
