"""The claim verifier: does a passage entail a claim, contradict it, or leave it open?

A small cross-encoder of its own (``onnx_models/verifier``, trained by
``onnx_models.train.verifier`` on VitaminC and contrastive claims of the training articles),
in its own ONNX session, batched like the reader. The reader and evaluator score whether a
passage is *about* a question; a claim with one fact swapped is still about it. The verifier
reads ``[CLS] evidence [SEP] claim [SEP]`` and answers the probability of each of
``entailment``, ``contradiction`` and ``neutral``.

It judges one (evidence, claim) pair at a time; reading a passage in windows of whole
sentences and keeping the best is ``processors.text.claims``'. ``verifier.json`` beside the
model holds the thresholds, chosen on held-out training data.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from answerbox.core.errors import ModelError
from answerbox.models.batching import MicroBatcher, QueueFull
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import OnnxSession
from answerbox.models.windows import load_tokenizer

__all__ = ["ClaimVerifier", "Judgement", "VerifierThresholds", "load_verifier"]

THRESHOLDS_FILE = "verifier.json"
_LABELS = ("entailment", "contradiction", "neutral")


@dataclass(frozen=True, kw_only=True)
class VerifierThresholds:
    """``verifier.json``: the label order and the probabilities a verdict needs."""

    labels: tuple[str, ...] = _LABELS
    entailed_above: float = 0.5  # a claim is supported at or above this P(entailment)
    contradicted_above: float = 0.5  # and contradicted (not just unsupported) at or above this
    calibration: dict[str, object] | None = None  # how they were chosen

    @classmethod
    def load(cls, directory: Path) -> VerifierThresholds:
        path = directory / THRESHOLDS_FILE
        if not path.is_file():
            return cls()
        raw = json.loads(path.read_text())
        return cls(
            labels=tuple(raw.get("labels", _LABELS)),
            entailed_above=float(raw["entailed_above"]),
            contradicted_above=float(raw["contradicted_above"]),
            calibration=raw.get("calibration"),
        )


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verifier's probabilities for one (evidence, claim) pair."""

    entailed: float
    contradicted: float


@dataclass(frozen=True, slots=True)
class _Input:
    ids: npt.NDArray[np.int64]
    type_ids: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.ids.shape[0])


class ClaimVerifier:
    def __init__(
        self,
        session: OnnxSession,
        tokenizer_path: Path,
        *,
        max_length: int,
        thresholds: VerifierThresholds,
        max_batch: int,
        max_wait_s: float,
    ) -> None:
        self._session = session
        self.thresholds = thresholds
        self._tokenizer = load_tokenizer(tokenizer_path)
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
        self._entail = thresholds.labels.index("entailment")
        self._contradict = thresholds.labels.index("contradiction")
        self._batcher: MicroBatcher[_Input, npt.NDArray[np.float32]] = MicroBatcher(
            self._run, max_batch=max_batch, max_wait_s=max_wait_s, name="verifier"
        )

    async def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Judgement]:
        """One judgement per ``(evidence, claim)``, in order."""
        if not pairs:
            return []
        inputs = await asyncio.to_thread(self._inputs, pairs)
        try:
            probabilities = await self._batcher.submit(inputs)
        except QueueFull as exc:
            raise ModelError(f"the verifier is busy: {exc}") from exc
        return [Judgement(float(p[self._entail]), float(p[self._contradict])) for p in probabilities]

    def close(self) -> None:
        self._batcher.close()

    def _inputs(self, pairs: Sequence[tuple[str, str]]) -> list[_Input]:
        return [
            _Input(np.asarray(e.ids, dtype=np.int64), np.asarray(e.type_ids, dtype=np.int64))
            for e in self._tokenizer.encode_batch(list(pairs))
        ]

    def _run(self, inputs: list[_Input]) -> list[npt.NDArray[np.float32]]:
        width = max(len(item) for item in inputs)
        ids = np.zeros((len(inputs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, item in enumerate(inputs):
            ids[row, : len(item)], mask[row, : len(item)], types[row, : len(item)] = item.ids, 1, item.type_ids
        logits = self._session.run({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})["logits"]
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities: npt.NDArray[np.float32] = (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
        return list(probabilities)


def load_verifier(
    directory: Path, *, providers: Sequence[str], intra_op_threads: int, max_batch: int, max_wait_s: float
) -> ClaimVerifier:
    """Synchronous and slow (reads the model): call it off the event loop. The verifier ships
    int8 only: its fp32 graph would double the repository's model weight for no use at run time."""
    manifest = ModelManifest.load(directory)
    session = OnnxSession(
        manifest.model_path(directory, "int8"), providers=providers, intra_op_threads=intra_op_threads
    )
    return ClaimVerifier(
        session,
        directory / manifest.tokenizer,
        max_length=manifest.max_length,
        thresholds=VerifierThresholds.load(directory),
        max_batch=max_batch,
        max_wait_s=max_wait_s,
    )
