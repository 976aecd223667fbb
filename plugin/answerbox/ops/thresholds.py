"""``answerbox threshold``: the ``min_confidence`` that keeps a pipeline's answers right often
enough on *your* index, chosen from questions you labelled.

The shipped ``min_confidence`` was chosen on held-out training articles; on text of another
kind the same confidence is right more or less often. Each labelled question (one JSON object a
line: ``{"question": "...", "answers": ["...", ...]}``) goes through a running answerbox as a
search client sends it, with your credentials, one at a time. The answer, or the candidate
held back below the pipeline's own ``min_confidence``, and its confidence come from
``ext.answerbox.answer``; *right* means what it means everywhere (``contains_gold``).

The threshold is the lowest at which the answered share is right ``precision`` of the time by
the one-sided Wilson lower bound: the lowest threshold that meets a target on a sample is where
chance flattered it, and the bound keeps what it promises on new questions. The fit of the
shipped calibrator (``onnx_models/calibrate/answer_confidence.py``) chooses its default the same way.

The same questions also correct the confidence's numbers for this index: Platt scaling of what
the pipeline showed to what was right (``cited_answer.calibration``), pulled toward no
correction so that a few questions move it little. It keeps the answers' order, so it changes
which answers show only through the threshold, which is given on the corrected scale.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from answerbox.core.errors import ConfigError
from answerbox.models.confidence import Recalibration, logit, platt
from answerbox.processors.text.normalize import contains_gold

__all__ = [
    "Labelled",
    "Outcome",
    "answered_at",
    "collect",
    "ece",
    "fit_recalibration",
    "lowest_threshold",
    "outcome_of",
    "read_labelled",
    "report",
    "run",
]

_SHOWN = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)


@dataclass(frozen=True, slots=True)
class Labelled:
    question: str
    answers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the pipeline said to one labelled question: its best answer's confidence (None: it
    had no answer to give) and whether that answer is right."""

    confidence: float | None
    right: bool


def read_labelled(path: Path) -> list[Labelled]:
    """The questions of a JSON-lines file; a line that is not a question with answers is refused by number."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        question, answers = (item.get("question"), item.get("answers")) if isinstance(item, dict) else (None, None)
        if not isinstance(question, str) or not question.strip():
            raise ConfigError(f"{path}:{number}: needs a non-empty string 'question'")
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
            raise ConfigError(f"{path}:{number}: needs 'answers', a list of non-empty strings")
        found.append(Labelled(question, tuple(answers)))
    if not found:
        raise ConfigError(f"{path}: holds no question")
    return found


async def collect(
    client: httpx.AsyncClient, index: str, pipeline: str, field: str, labelled: Sequence[Labelled]
) -> list[Outcome]:
    """Ask each question through ``pipeline`` (a ``match`` on ``field``); a failed search stops
    the run, so that a threshold is never chosen from part of the questions."""
    outcomes = []
    for item in labelled:
        response = await client.post(
            f"/{index}/_search", params={"search_pipeline": pipeline}, json={"query": {"match": {field: item.question}}}
        )
        if response.status_code != 200:
            raise ConfigError(f"the search for {item.question!r} failed ({response.status_code}): {response.text}")
        outcomes.append(outcome_of(response.json(), item))
    return outcomes


async def current_calibration(client: httpx.AsyncClient, pipeline: str) -> Recalibration | None:
    """The stored pipeline's own correction (``cited_answer.calibration``): the confidences it shows
    are already corrected, and a new correction goes on top of it."""
    response = await client.get(f"/_search/pipeline/{pipeline}")
    if response.status_code != 200:
        raise ConfigError(f"cannot read the pipeline {pipeline!r} ({response.status_code}): {response.text}")
    definition = response.json().get(pipeline) or {}
    for processor in definition.get("response_processors") or []:
        found = (processor.get("cited_answer") or {}).get("calibration")
        if found:
            return Recalibration.model_validate(found)
    return None


def outcome_of(body: dict[str, Any], item: Labelled) -> Outcome:
    """What a search response said to ``item``: the answer, or the candidate held back."""
    answer = ((body.get("ext") or {}).get("answerbox") or {}).get("answer") or {}
    best = answer.get("candidate") if answer.get("abstained") else answer
    if not best or not isinstance(best.get("confidence"), int | float):
        return Outcome(None, False)  # no evidence, CRAG's "incorrect", no span: nothing to show
    return Outcome(float(best["confidence"]), contains_gold(str(best.get("text", "")), item.answers))


def lowest_threshold(
    confidence: Sequence[float], right: Sequence[bool], precision: float, z: float, min_answered: int = 20
) -> float:
    """The lowest threshold whose answered share (confidence ≥ it) is right ``precision`` of the
    time by the one-sided Wilson lower bound at ``z`` (0: the point estimate), over at least
    ``min_answered`` answers; 1.0 when none is."""
    pairs = sorted(zip(confidence, right, strict=True), key=lambda pair: -pair[0])
    best = 1.0
    hits = 0
    for n, (c, ok) in enumerate(pairs, 1):
        hits += ok
        # A threshold answers every answer as confident as c: judge it once all of them are in.
        if n < len(pairs) and pairs[n][0] == c:
            continue
        if n >= min_answered and _wilson_lower(hits, n, z) >= precision:
            best = c
    return round(float(best), 4)


def _wilson_lower(hits: int, n: int, z: float) -> float:
    p = hits / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def answered_at(confidence: Sequence[float], right: Sequence[bool], threshold: float) -> dict[str, float]:
    """The share answered at ``threshold`` and its precision."""
    answered = [ok for c, ok in zip(confidence, right, strict=True) if c >= threshold]
    return {
        "coverage": round(len(answered) / len(right), 4),
        "precision": round(sum(answered) / len(answered), 4) if answered else 0.0,
    }


def ece(probabilities: Sequence[float], right: Sequence[bool], bins: int = 10) -> float:
    """Expected calibration error over ``bins`` equal-width bins."""
    binned: dict[int, list[tuple[float, bool]]] = {}
    for p, ok in zip(probabilities, right, strict=True):
        binned.setdefault(min(int(p * bins), bins - 1), []).append((p, ok))
    gaps = (abs(sum(p for p, _ in pairs) - sum(ok for _, ok in pairs)) for pairs in binned.values())
    return sum(gaps) / len(probabilities)


def fit_recalibration(confidence: Sequence[float], right: Sequence[bool], l2: float = 1.0) -> Recalibration:
    """The Platt map ``σ(a · logit(c) + b)`` of ``confidence`` that best predicts ``right``, with
    ``l2 · ((a - 1)² + b²)`` pulling it toward no correction."""
    a, b = platt([logit(c) for c in confidence], right, prior=(1.0, 0.0), l2=l2)
    # A scale at or below 0 would turn the order around: the confidence says nothing here.
    return Recalibration(scale=round(min(max(a, 0.01), 100.0), 4), offset=round(min(max(b, -100.0), 100.0), 4))


def report(
    outcomes: Sequence[Outcome], precision: float, z: float, min_answered: int, current: Recalibration | None = None
) -> tuple[float | None, str]:
    """The chosen threshold (None: no threshold meets the target) and what to show an admin.
    ``current`` is the pipeline's own correction, under the confidences it showed."""
    confidence = [o.confidence if o.confidence is not None else -1.0 for o in outcomes]
    right = [o.right for o in outcomes]
    shown = sum(o.confidence is not None for o in outcomes)
    lines = [
        f"{len(outcomes)} questions: {shown} with an answer or a candidate, {sum(right)} of them right",
        "threshold  answered  right when answering  their mean confidence",
    ]
    for threshold in _SHOWN:
        at = answered_at(confidence, right, threshold)
        said = [c for c in confidence if c >= threshold]
        # Beside the share right, the mean confidence shows how far the shipped calibration,
        # fitted on other text, is off on this index where it matters.
        mean = f"{100 * sum(said) / len(said):6.1f}%" if said else "     –"
        lines.append(f"  {threshold:.2f}    {100 * at['coverage']:6.1f}%    {100 * at['precision']:6.1f}%    {mean}")
    chosen = lowest_threshold(confidence, right, precision, z, min_answered)
    target = f"{100 * precision:g}% precision (Wilson bound at z {z:g}, at least {min_answered} answers)"
    if chosen >= 1.0:
        lines.append(f"no threshold reaches {target}: label more questions, or aim lower")
        return None, "\n".join(lines)
    at = answered_at(confidence, right, chosen)
    lines.append(
        f"min_confidence for {target}: {chosen} (answers {100 * at['coverage']:.1f}%, "
        f"{100 * at['precision']:.1f}% of them right, on these questions)"
    )
    setting: dict[str, object] = {"min_confidence": chosen}
    scored = [o.confidence for o in outcomes if o.confidence is not None]
    scored_right = [o.right for o in outcomes if o.confidence is not None]
    if len(scored) >= min_answered and 0 < sum(scored_right) < len(scored):
        correction = fit_recalibration(scored, scored_right)
        # Floored, so that the answer at the threshold still shows after rounding.
        setting["min_confidence"] = math.floor(correction(chosen) * 10_000) / 10_000
        setting["calibration"] = (current.then(correction) if current else correction).model_dump()
        lines.append(
            f"this index's correction of the confidence: scale {correction.scale:g}, offset {correction.offset:g} "
            f"(ECE on these questions {ece(scored, scored_right):.3f} → "
            f"{ece([correction(c) for c in scored], scored_right):.3f}); the threshold on its scale: "
            f"{setting['min_confidence']}"
        )
    lines.append("set it in the pipeline: " + json.dumps({"cited_answer": setting}))
    return chosen, "\n".join(lines)


def run(
    url: str,
    index: str,
    pipeline: str,
    questions: Path,
    *,
    field: str = "text",
    auth: tuple[str, str] | None = None,
    precision: float = 0.85,
    z: float = 1.645,
    min_answered: int = 20,
) -> tuple[float | None, str]:
    labelled = read_labelled(questions)

    async def ask() -> tuple[list[Outcome], Recalibration | None]:
        async with httpx.AsyncClient(base_url=url, auth=auth, timeout=300) as client:
            try:
                return await collect(client, index, pipeline, field, labelled), await current_calibration(
                    client, pipeline
                )
            except httpx.TransportError as exc:
                raise ConfigError(f"cannot reach answerbox at {url}: {exc!r}") from exc

    outcomes, current = asyncio.run(ask())
    return report(outcomes, precision, z, min_answered, current)
