"""``manifest.json``: what an exported model directory holds and how to use its outputs."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from answerbox.core.errors import ModelError
from answerbox.models.confidence import AnswerCalibrator

__all__ = ["MANIFEST_FILE", "PACKED_FP32", "ModelManifest"]

MANIFEST_FILE = "manifest.json"
PACKED_FP32 = "model.fp32.packed.onnx"  # the fp32 graph as the repository keeps it (``packing``)


@dataclass(frozen=True, kw_only=True)
class ModelManifest:
    """Written by ``answerbox models export``; thresholds filled in by ``onnx_models/calibrate/thresholds.py``.

    ``score = tanh(score_scale * relevance_logit + score_offset)`` maps the relevance logit
    into CRAG's [-1, 1]; with Platt-scaled constants it is ``2 * P(passage answers) - 1``.
    ``rerank_fusion_weight`` (chosen by ``onnx_models/calibrate/fusion.py``, after calibration: it is
    on that score's scale) is the engine score's weight when ``retrieval_evaluator`` reranks;
    0, the default for manifests written before it, reranks by the evaluator alone.
    """

    task: str
    variants: dict[str, str]  # "int8" → "model.int8.onnx"
    input_names: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")
    output_names: tuple[str, ...] = ("start_logits", "end_logits", "relevance_logits")
    tokenizer: str = "tokenizer.json"
    max_length: int = 192
    stride: int = 48
    max_answer_tokens: int = 30
    # The reader shows the span covering every overlapping span within this many logits of its
    # best (``answerbox.models.reader.best_span``); 0, the default for manifests written before
    # it, shows the best span alone.
    span_cover_margin: float = 0.0
    theta: float = 0.0  # SearChain gate on the reader's relevance logit
    # A chain node's LLM answer passes when the reader rates it within this many logits of its
    # own span (``chain_of_query``'s ``answer_margin``); 0, the default for manifests written
    # before it, passes only the reader's own best.
    chain_answer_margin: float = 0.0
    crag_upper: float = 0.5
    crag_lower: float = -0.9  # on the best score of a retrieval: CRAG's Incorrect
    # retrieval_evaluator scores the engine's first hits, and the rest of its top_n only when none
    # of those scores this much (``first_pass``); None, the default for manifests written before
    # it: every hit in one pass. Chosen with the calibrator in the loop: a stop the calibrator was
    # not fitted with shifts what its signals mean.
    crag_first_pass_stop: float | None = None
    support_lower: float = -0.9  # on one (claim, passage) pair: the citation check's floor
    score_scale: float = 0.5
    score_offset: float = 0.0
    rerank_fusion_weight: float = 0.0  # fused = score + w · engine score / best engine score
    # answer.confidence's calibrator and thresholds (``answerbox.models.confidence``), fitted by
    # ``onnx_models/calibrate/answer_confidence.py``; empty: the evaluator's own probability.
    answer_confidence: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] = field(default_factory=dict)  # how the thresholds were chosen

    @functools.cached_property
    def answer_calibrator(self) -> AnswerCalibrator:
        return AnswerCalibrator.from_manifest(self.answer_confidence)

    def __post_init__(self) -> None:
        for name in ("rerank_fusion_weight", "span_cover_margin", "chain_answer_margin"):
            value: object = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ModelError(f"{name} must be a finite number >= 0, not {value!r}")
        stop = self.crag_first_pass_stop
        if stop is not None and (isinstance(stop, bool) or not isinstance(stop, int | float) or not -1 <= stop <= 1):
            raise ModelError(f"crag_first_pass_stop must be a number in [-1, 1] or null, not {stop!r}")
        _ = self.answer_calibrator  # a manifest whose calibrator does not parse does not load

    def model_path(self, directory: Path, variant: str) -> Path:
        if variant not in self.variants:
            raise ModelError(f"{directory}: no {variant!r} model; exported variants: {sorted(self.variants)}")
        path = directory / self.variants[variant]
        if variant == "fp32" and not path.exists() and (directory / PACKED_FP32).exists():
            raise ModelError(
                f"{path} is missing: rebuild it from {PACKED_FP32} with `answerbox models unpack {directory}`"
            )
        return path

    @classmethod
    def load(cls, directory: Path) -> ModelManifest:
        path = directory / MANIFEST_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise ModelError(f"{path} is missing: export a model with `answerbox models export`") from exc
        except json.JSONDecodeError as exc:
            raise ModelError(f"{path} is not valid JSON: {exc}") from exc
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ModelError(f"{path}: unknown fields {unknown}")
        for name in ("input_names", "output_names"):
            if name in data:
                data[name] = tuple(data[name])
        try:
            return cls(**data)
        except ModelError as exc:
            raise ModelError(f"{path}: {exc.reason}") from exc

    def save(self, directory: Path) -> Path:
        path = directory / MANIFEST_FILE
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")
        return path

    def replace(self, **changes: Any) -> ModelManifest:
        return dataclasses.replace(self, **changes)
