"""Question/passage pairs → fixed-size token windows with character offsets.

Training, export checks and the runtime all tokenize through this module so that a
window seen at inference looks exactly like one seen in training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

__all__ = ["Window", "WindowTokenizer", "load_tokenizer", "pad_windows"]


def load_tokenizer(path: Path) -> Tokenizer:
    try:
        from tokenizers import Tokenizer
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the install
        raise ModuleNotFoundError("answerbox models need `tokenizers`: pip install 'tokenizers>=0.19'") from exc
    return Tokenizer.from_file(str(path))


@dataclass(frozen=True, slots=True)
class Window:
    """One `[CLS] question [SEP] passage-chunk [SEP]` sequence.

    ``context_start``..``context_end`` (inclusive) are the token positions of the passage
    chunk; ``offsets[i]`` is the character span of token ``i`` in the original passage
    (meaningful only inside the chunk).
    """

    passage_index: int
    ids: npt.NDArray[np.int64]
    type_ids: npt.NDArray[np.int64]
    offsets: tuple[tuple[int, int], ...]
    context_start: int
    context_end: int

    def __len__(self) -> int:
        return int(self.ids.shape[0])


# Characters per token that no real text reaches on average (English averages about 4).
_CHARS_PER_TOKEN = 16


class WindowTokenizer:
    """Splits long passages into overlapping windows of at most ``max_length`` tokens.

    ``stride`` is the number of passage tokens two consecutive windows share, so an
    answer cut by one window boundary is whole in the next.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        max_length: int,
        stride: int,
        max_question_tokens: int = 64,
        max_windows: int | None = None,
    ) -> None:
        if not 0 <= stride < max_length // 2:
            raise ValueError(f"stride must be in [0, max_length/2), got stride={stride} max_length={max_length}")
        self.max_length = max_length
        self.stride = stride
        # Per passage: a pathological document (60,000 dots) must not occupy the one model
        # thread for seconds; its first windows are all that is read of it.
        self.max_windows = max_windows
        # The passage part of a window must stay longer than the stride, or the tokenizer
        # panics (a BaseException no handler catches): [CLS] q [SEP] p [SEP].
        self.max_question_tokens = min(max_question_tokens, max_length - stride - 4)
        # A private copy: truncation settings are tokenizer state, and callers may share theirs.
        self._tokenizer = type(tokenizer).from_str(tokenizer.to_str())
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length, stride=stride, strategy="only_second")
        self._question_tokenizer = type(tokenizer).from_str(tokenizer.to_str())
        self._question_tokenizer.no_padding()
        self._question_tokenizer.enable_truncation(max_length=self.max_question_tokens)

    def windows(self, question: str, passages: Sequence[str]) -> list[Window]:
        """The windows of all passages (at most ``max_windows`` each), in passage order."""
        if not passages:
            return []
        # Overlong questions would leave no room for the passage; keep their start.
        question = self._clip_question(question)
        if self.max_windows is not None:
            # Only the start of a huge document is read: tokenising all of a 10 MB text to keep
            # its first windows would cost every search that hits it seconds. A token is rarely
            # over _CHARS_PER_TOKEN characters, so the cut keeps every window that is read.
            most = self.max_windows * self.max_length * _CHARS_PER_TOKEN
            passages = [passage[:most] for passage in passages]
        encodings = self._tokenizer.encode_batch([(question, passage) for passage in passages])
        out: list[Window] = []
        for index, encoding in enumerate(encodings):
            for part in [encoding, *encoding.overflowing][: self.max_windows]:
                out.append(_to_window(index, part))
        return out

    def _clip_question(self, question: str) -> str:
        encoding = self._question_tokenizer.encode(question, add_special_tokens=False)
        if not encoding.overflowing:
            return question
        return question[: encoding.offsets[-1][1]]


def _to_window(passage_index: int, encoding: Encoding) -> Window:
    sequence_ids = encoding.sequence_ids
    context = [i for i, sid in enumerate(sequence_ids) if sid == 1]
    # An empty passage still yields a window with no context tokens: it can only say "no answer".
    start, end = (context[0], context[-1]) if context else (0, -1)
    return Window(
        passage_index=passage_index,
        ids=np.asarray(encoding.ids, dtype=np.int64),
        type_ids=np.asarray(encoding.type_ids, dtype=np.int64),
        offsets=tuple(encoding.offsets),
        context_start=start,
        context_end=end,
    )


def pad_windows(
    windows: Sequence[Window], length: int | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Stack windows into ``input_ids``, ``attention_mask``, ``token_type_ids``.

    Padded to the longest window unless ``length`` is given (the fixed-length baseline).
    """
    width = length if length is not None else max(len(w) for w in windows)
    ids = np.zeros((len(windows), width), dtype=np.int64)
    mask = np.zeros((len(windows), width), dtype=np.int64)
    types = np.zeros((len(windows), width), dtype=np.int64)
    for row, window in enumerate(windows):
        n = len(window)
        ids[row, :n] = window.ids
        mask[row, :n] = 1
        types[row, :n] = window.type_ids
    return ids, mask, types
