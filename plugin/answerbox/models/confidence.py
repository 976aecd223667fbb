"""``answer.confidence``: the probability that an answer is right.

*Right* means what the benches and the fit measure: the answer's text contains a gold answer
after SQuAD normalisation (``answerbox.processors.text.normalize``). The probability comes
from a logistic regression over signals the pipeline already has (Kamath et al. 2020 fit a
small calibrator on a QA model's own features the same way). Its coefficients live in the
model manifest (``answer_confidence``), fitted with the pipeline in the loop by
``onnx_models/calibrate/answer_confidence.py`` on held-out training articles; a manifest without them
falls back to the evaluator's own calibrated probability that the cited passage holds the
answer, ``(score + 1) / 2``. A pipeline may correct the probability for its own index with a
``Recalibration`` that ``answerbox threshold`` fits on questions labelled there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from answerbox.core.errors import ModelError

__all__ = [
    "SNIPPET_FEATURES",
    "AnswerCalibrator",
    "GenerativeSignals",
    "Recalibration",
    "SnippetSignals",
    "logit",
    "platt",
    "signals_record",
]


@dataclass(frozen=True, slots=True)
class SnippetSignals:
    """What the reader's featured snippet rests on."""

    score: float  # the evaluator's calibrated score of the snippet's passage, in [-1, 1]
    margin: float  # that score less the next passage's (the evaluator's doubt between two)
    span_probability: float  # the reader's softmax(start) × softmax(end) of its best span
    over_no_answer: float  # the best span's start+end logit less the reader's no-answer logit
    question_overlap: float  # share of the question's content words in the sentence holding the span
    rank: int  # the passage's place in the evidence, 0 first
    words: int  # the span's length
    agreement: float  # share of the other passages whose span says the same
    # The same probability summed over the spans inside the shown one: the reader's own chance
    # that the answer lies within it, which is what *right* asks (onnx_models/LOG.md).
    covered_probability: float

    def features(self) -> dict[str, float]:
        return {
            "score": self.score,
            "margin": self.margin,
            "log_span_probability": math.log(max(self.span_probability, 1e-6)),
            "log_covered_probability": math.log(max(self.covered_probability, 1e-6)),
            "over_no_answer": self.over_no_answer,
            "question_overlap": self.question_overlap,
            "log_rank": math.log1p(self.rank),
            "log_words": math.log1p(self.words),
            "agreement": self.agreement,
            # A span the reader is sure of in a passage it is sure holds an answer: either alone
            # says less (onnx_models/LOG.md, "One interaction").
            "span_probability_x_over_no_answer": self.span_probability * self.over_no_answer,
        }

    def fallback(self) -> float:
        return (self.score + 1) / 2


@dataclass(frozen=True, slots=True)
class GenerativeSignals:
    """What an LLM's checked answer rests on."""

    support: float  # the best kept citation's evaluator score, in [-1, 1]
    snippet_confidence: float  # the reader's snippet's confidence on the same evidence (0: none)
    agrees: bool  # the answer contains the snippet's text (normalised)

    def features(self) -> dict[str, float]:
        return {"support": self.support, "snippet_confidence": self.snippet_confidence, "agrees": float(self.agrees)}

    def fallback(self) -> float:
        return max((self.support + 1) / 2, self.snippet_confidence) if self.agrees else (self.support + 1) / 2


Signals = SnippetSignals | GenerativeSignals


@dataclass(frozen=True, slots=True)
class ConfidenceModel:
    """``sigmoid(intercept + Σ coef · feature)`` over named features."""

    coefficients: Mapping[str, float]
    intercept: float

    @classmethod
    def parse(cls, kind: str, data: Mapping[str, Any], expected: Sequence[str]) -> ConfidenceModel:
        coefficients = data.get("coefficients")
        intercept = data.get("intercept")
        if not isinstance(coefficients, dict) or not isinstance(intercept, int | float):
            raise ModelError(f"answer_confidence.{kind} needs 'coefficients' (an object) and 'intercept' (a number)")
        if sorted(coefficients) != sorted(expected):
            raise ModelError(
                f"answer_confidence.{kind} has coefficients for {sorted(coefficients)}, this version "
                f"computes {sorted(expected)}"
            )
        values = [float(v) for v in coefficients.values()] + [float(intercept)]
        if not all(math.isfinite(v) for v in values):
            raise ModelError(f"answer_confidence.{kind}: every coefficient must be a finite number")
        return cls({k: float(v) for k, v in coefficients.items()}, float(intercept))

    def probability(self, features: Mapping[str, float]) -> float:
        return sigmoid(self.intercept + sum(w * features[name] for name, w in self.coefficients.items()))


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def platt(
    x: Sequence[float], y: Sequence[bool | float], *, prior: tuple[float, float] = (0.0, 0.0), l2: float = 0.0
) -> tuple[float, float]:
    """``a, b`` of the logistic regression ``P(y) = σ(a · x + b)``, with ``l2 · ((a - a0)² + b²)``
    pulling it toward ``prior = (a0, 0)``, and a light ridge on ``a`` so that separable data
    stays finite. Newton's method with step halving, so the loss never gets worse: plain Newton
    diverged once the evaluator's relevance logits grew large (saturated probabilities leave
    the Hessian near singular)."""
    a0 = prior[0]

    def loss(a: float, b: float) -> float:
        total = 0.5e-3 * a * a + l2 * ((a - a0) ** 2 + b * b)
        for xi, yi in zip(x, y, strict=True):
            t = a * xi + b
            total += max(t, 0.0) + math.log1p(math.exp(-abs(t))) - yi * t  # log(1 + e^t) - y·t, no overflow
        return total

    a, b = prior
    current = loss(a, b)
    for _ in range(100):
        grad_a, grad_b = 1e-3 * a + 2 * l2 * (a - a0), 2 * l2 * b
        h_aa, h_ab, h_bb = 1e-3 + 2 * l2, 0.0, 2 * l2 + 1e-9
        for xi, yi in zip(x, y, strict=True):
            p = sigmoid(a * xi + b)
            w = p * (1 - p) + 1e-9
            grad_a, grad_b = grad_a + (p - yi) * xi, grad_b + p - yi
            h_aa, h_ab, h_bb = h_aa + w * xi * xi, h_ab + w * xi, h_bb + w
        det = h_aa * h_bb - h_ab * h_ab
        step_a, step_b = (h_bb * grad_a - h_ab * grad_b) / det, (h_aa * grad_b - h_ab * grad_a) / det
        scale = 1.0
        while loss(a - scale * step_a, b - scale * step_b) > current and scale > 1e-6:
            scale /= 2
        a, b = a - scale * step_a, b - scale * step_b
        current = loss(a, b)
        if max(abs(scale * step_a), abs(scale * step_b)) < 1e-8:
            break
    return a, b


class Recalibration(BaseModel):
    """An index's own correction of the shipped probability ``p``: ``σ(scale · logit(p) +
    offset)`` (Platt scaling). On text of another kind the shipped calibrator is right more or
    less often than it says; this keeps its order and fixes its numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scale: float = Field(default=1.0, gt=0, le=100)  # > 0: a more confident answer stays more confident
    offset: float = Field(default=0.0, ge=-100, le=100)

    def __call__(self, p: float) -> float:
        # 0 and 1 keep their meaning as thresholds: "always" and "never".
        return p if p <= 0 or p >= 1 else sigmoid(self.scale * logit(p) + self.offset)

    def undo(self, p: float) -> float:
        return p if p <= 0 or p >= 1 else sigmoid((logit(p) - self.offset) / self.scale)

    def then(self, other: Recalibration) -> Recalibration:
        """This correction followed by ``other``: one Platt map."""
        return Recalibration(
            scale=round(other.scale * self.scale, 6), offset=round(other.scale * self.offset + other.offset, 6)
        )


SNIPPET_FEATURES = tuple(SnippetSignals(0, 0, 1, 0, 0, 0, 0, 0, 1).features())
GENERATIVE_FEATURES = tuple(GenerativeSignals(0, 0, False).features())


@dataclass(frozen=True, slots=True)
class AnswerCalibrator:
    """The manifest's ``answer_confidence``: a model per kind of answer and the thresholds chosen with them."""

    extractive: ConfidenceModel | None = None
    generative: ConfidenceModel | None = None
    min_confidence: float = 0.5  # below it, an answer is a candidate, not the answer
    skip_llm_above: float = 1.0  # a snippet this confident is the answer without the LLM
    recalibration: Recalibration = field(default_factory=Recalibration)  # none: the shipped numbers

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any]) -> AnswerCalibrator:
        if not data:
            return cls()
        thresholds = {name: data.get(name, getattr(cls(), name)) for name in ("min_confidence", "skip_llm_above")}
        for name, value in thresholds.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ModelError(f"answer_confidence.{name} must be a number in [0, 1], not {value!r}")
        return cls(
            extractive=ConfidenceModel.parse("extractive", data["extractive"], SNIPPET_FEATURES)
            if "extractive" in data
            else None,
            generative=ConfidenceModel.parse("generative", data["generative"], GENERATIVE_FEATURES)
            if "generative" in data
            else None,
            **thresholds,
        )

    def for_index(self, recalibration: Recalibration | None) -> AnswerCalibrator:
        """This calibrator with a pipeline's correction for its index. The fitted thresholds move
        with it, so that a correction alone changes the numbers shown, never which answers show."""
        if recalibration is None:
            return self
        return replace(
            self,
            recalibration=self.recalibration.then(recalibration),
            min_confidence=round(recalibration(self.min_confidence), 4),
            skip_llm_above=round(recalibration(self.skip_llm_above), 4),
        )

    def probability(self, signals: Signals) -> float:
        """The shipped calibrator's probability, before any correction for an index: what the
        generative calibrator was fitted to read as the snippet's confidence."""
        model = self.extractive if isinstance(signals, SnippetSignals) else self.generative
        return model.probability(signals.features()) if model is not None else signals.fallback()

    def confidence(self, signals: Signals) -> float:
        return round(self.recalibration(self.probability(signals)), 4)


def signals_record(signals: Signals) -> dict[str, float]:
    """The raw signals as the response shows them (``answer.signals``) and the fit reads them back."""
    return {k: round(float(v), 6) for k, v in asdict(signals).items()}
