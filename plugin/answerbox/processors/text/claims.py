"""Claims: an answer's sentences, each with the ``[1,2]`` / ``[1][3]`` markers that follow it
(``parse_claims``); what the claim verifier reads of a passage, and its verdict on the whole one.

A passage is read in windows of whole sentences (``evidence_windows``); a (passage, claim)
pair's ``entailed`` is its best window's, its ``contradicted`` the most contradicting window's,
each with where that window is, so a citation can quote the sentence that says (or denies) it.
Training (``onnx_models/data/verifier_pairs.py``) builds its pairs here too, so a window seen at run
time looks like one seen in training.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from answerbox.models.verifier import ClaimVerifier
from answerbox.processors.text.sentences import is_abbreviation, sentence_spans

__all__ = ["EVIDENCE_CHARS", "Claim", "Entailment", "answer_claim", "entailments", "evidence_windows", "parse_claims"]

# A window of whole sentences up to this long (a longer sentence is a window alone, cut by the
# tokenizer): with a claim it fits the verifier's 128 tokens, what keeps a claim near 5 ms.
EVIDENCE_CHARS = 400

# A bracket of citation markers: [1], [1, 2], [1; 3].
_GROUP = r"\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\]"
_MARKERS = re.compile(_GROUP)
_NUMBER = re.compile(r"\d+")
_SPACE_BEFORE_STOP = re.compile(r" ([.!?,;:])")  # left where a marker stood before the stop
# A sentence ends at . ! ? (plus any markers placed after the stop) before whitespace or the end.
# The stop run starts where a run starts and is never given back, so a long run of dots
# costs one scan, not one per dot (which was quadratic).
_CLAIM = re.compile(rf"\S.*?(?:(?<![.!?])[.!?]++(?:\s*{_GROUP})*(?=\s|$)|$)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Group:
    """One bracket in the answer, ``answer[start:end]``, and the numbers inside it."""

    start: int
    end: int
    markers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Claim:
    start: int
    end: int
    text: str
    groups: tuple[Group, ...]

    @property
    def markers(self) -> list[int]:
        return list(dict.fromkeys(m for g in self.groups for m in g.markers))

    @property
    def plain(self) -> str:
        """The sentence without its markers: what the cited text must support."""
        return _SPACE_BEFORE_STOP.sub(r"\1", " ".join(_MARKERS.sub(" ", self.text).split()))


def parse_claims(answer: str) -> list[Claim]:
    claims = []
    start: int | None = None
    for match in _CLAIM.finditer(answer):
        end = match.end()
        # "C. J. Anderson ran [1].": an initial's or an abbreviation's dot ends no claim, as it
        # ends no sentence (``sentence_spans``), unless markers follow it.
        if end < len(answer) and answer[end - 1] == "." and is_abbreviation(answer, end - 1):
            start = match.start() if start is None else start
            continue
        start, begin = None, match.start() if start is None else start
        text = answer[begin:end]
        groups = tuple(
            Group(begin + g.start(), begin + g.end(), tuple(int(n) for n in _NUMBER.findall(g.group())))
            for g in _MARKERS.finditer(text)
        )
        claims.append(Claim(begin, end, text, groups))
    return claims


def evidence_windows(text: str, max_chars: int = EVIDENCE_CHARS) -> list[tuple[int, int]]:
    """``(start, end)`` of overlapping windows of whole sentences covering ``text``: each window
    after the first starts at its predecessor's last sentence, so a fact told across two
    sentences is whole in one window."""
    spans = sentence_spans(text)
    windows: list[tuple[int, int]] = []
    first = 0
    while first < len(spans):
        last = first
        while last + 1 < len(spans) and spans[last + 1][1] - spans[first][0] <= max_chars:
            last += 1
        windows.append((spans[first][0], spans[last][1]))
        if last + 1 == len(spans):
            break
        # The next window starts at this one's last sentence where it can still take a new one.
        overlap = last > first and spans[last + 1][1] - spans[last][0] <= max_chars
        first = last if overlap else last + 1
    return windows


def answer_claim(question: str, answer: str) -> str:
    """The claim that ``answer`` answers ``question``: what the snippet's evidence must entail."""
    return f'The answer to "{" ".join(question.split())}" is {" ".join(answer.split())}.'


@dataclass(frozen=True, slots=True)
class Entailment:
    """The verifier's view of one (passage, claim) pair."""

    entailed: float  # P(entailment) of the best window
    contradicted: float  # the highest P(contradiction) of any window
    window: tuple[int, int]  # the best window's characters in the passage
    contradicting: tuple[int, int]  # the most contradicting window's


async def entailments(verifier: ClaimVerifier, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
    """One verdict per ``(passage, claim)``, in order, from one batch of all their windows."""
    windows = [(i, w) for i, (passage, _) in enumerate(pairs) for w in evidence_windows(passage) or [(0, 0)]]
    judged = await verifier.judge([(pairs[i][0][start:end], pairs[i][1]) for i, (start, end) in windows])
    found: list[Entailment | None] = [None] * len(pairs)
    for (i, window), judgement in zip(windows, judged, strict=True):
        old = found[i]
        if old is None:
            found[i] = Entailment(judgement.entailed, judgement.contradicted, window, window)
            continue
        entailing = (judgement.entailed, window) if judgement.entailed > old.entailed else (old.entailed, old.window)
        denying = (
            (judgement.contradicted, window)
            if judgement.contradicted > old.contradicted
            else (old.contradicted, old.contradicting)
        )
        found[i] = Entailment(entailing[0], denying[0], entailing[1], denying[1])
    return [f for f in found if f is not None]
