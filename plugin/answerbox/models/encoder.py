"""Question/passage pairs → per-window model outputs, batched across callers.

The reader and the evaluator are two views of the same forward pass; a small cache keyed
by (question, passage) lets a pipeline that reads and scores the same hits pay once.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from answerbox.core.errors import ModelError
from answerbox.models.batching import MicroBatcher, QueueFull
from answerbox.models.session import OnnxSession
from answerbox.models.windows import Window, WindowTokenizer, pad_windows

__all__ = ["PassageEncoder", "WindowOutput"]

_CACHE_SIZE = 1024


@dataclass(frozen=True, slots=True)
class WindowOutput:
    window: Window
    start_logits: npt.NDArray[np.float32] | None  # None for classification-only models
    end_logits: npt.NDArray[np.float32] | None
    relevance: float


class PassageEncoder:
    def __init__(self, session: OnnxSession, windows: WindowTokenizer, *, max_batch: int, max_wait_s: float) -> None:
        self._session = session
        self._windows = windows
        self._batcher: MicroBatcher[Window, WindowOutput] = MicroBatcher(
            self._run, max_batch=max_batch, max_wait_s=max_wait_s, name="encoder"
        )
        self._cache: OrderedDict[tuple[str, str], list[WindowOutput]] = OrderedDict()

    @property
    def batcher(self) -> MicroBatcher[Window, WindowOutput]:
        return self._batcher

    async def encode(self, question: str, passages: Sequence[str]) -> list[list[WindowOutput]]:
        """The outputs of every window of every passage, grouped per passage in order."""
        found = {p: self._cache[(question, p)] for p in passages if (question, p) in self._cache}
        missing = [p for p in dict.fromkeys(passages) if p not in found]
        if missing:
            windows = await asyncio.to_thread(self._windows.windows, question, missing)
            try:
                outputs = await self._batcher.submit(windows)
            except QueueFull as exc:
                raise ModelError(f"the model is busy: {exc}") from exc
            grouped: list[list[WindowOutput]] = [[] for _ in missing]
            for output in outputs:
                grouped[output.window.passage_index].append(output)
            for passage, group in zip(missing, grouped, strict=True):
                found[passage] = group
                self._remember((question, passage), group)
        return [found[p] for p in passages]

    def close(self) -> None:
        self._batcher.close()
        self._cache.clear()

    def _remember(self, key: tuple[str, str], value: list[WindowOutput]) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    def _run(self, windows: list[Window]) -> list[WindowOutput]:
        """One padded batch through the session (runs on the batcher's worker thread)."""
        ids, mask, types = pad_windows(windows)
        outputs = self._session.run({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        relevance = _relevance(outputs, mask)
        starts, ends = outputs.get("start_logits"), outputs.get("end_logits")
        return [
            WindowOutput(
                window=w,
                start_logits=None if starts is None else starts[row, : len(w)].astype(np.float32),
                end_logits=None if ends is None else ends[row, : len(w)].astype(np.float32),
                relevance=float(relevance[row]),
            )
            for row, w in enumerate(windows)
        ]


def _relevance(outputs: dict[str, npt.NDArray[np.float32]], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """A per-window relevance logit, whatever heads the exported model has."""
    if "relevance_logits" in outputs:
        return np.asarray(outputs["relevance_logits"], dtype=np.float32).reshape(-1)
    if "logits" in outputs:  # sequence classification: last label is "relevant"
        logits = outputs["logits"]
        return logits[:, -1] - logits[:, 0] if logits.shape[-1] > 1 else logits[:, 0]
    # Plain extractive QA: how much the best span beats "no answer" at [CLS].
    padding = np.where(mask == 1, 0.0, -np.inf)
    start, end = outputs["start_logits"] + padding, outputs["end_logits"] + padding
    best: npt.NDArray[np.float32] = start[:, 1:].max(axis=1) + end[:, 1:].max(axis=1) - start[:, 0] - end[:, 0]
    return best
