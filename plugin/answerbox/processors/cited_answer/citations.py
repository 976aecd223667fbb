"""Citations in a generated answer: each claim's ``[1,2]`` / ``[1][3]`` markers resolved to evidence and checked.

Each (claim, marker) of the answer (``answerbox.processors.text.claims``: a sentence and its markers)
is checked: the claim verifier (``answerbox.models.verifier``) reads the cited block and the
claim is supported only when a window of the block entails it (``support`` is that
probability), and flagged ``contradicted`` when one contradicts it, quoting that sentence;
the words the claim adds beyond the question must be found in that block, too, a cheap
pre-filter. Before any model, the rules of ``answerbox.processors.text.certainties`` settle
what they can, off the event loop: a claim that copies a sentence of the block is entailed
(``support`` 1.0, no model call), and one that copies it with a name, a number or the reader's
answer to the question changed, or restates it with a quantity changed (a date, a number, a
unit, more/less, before/after), is flagged ``contradicted``, quoting that sentence, with a
verifier or without; one whose names come in another order than its sentence's, or that answers
the question otherwise than the reader in that block, stays ``unverified`` unless the verifier
entails it (``text.doubts``). Every verdict is one of three (:attr:`ClaimVerdict.verdict`):
``entailed``, ``contradicted`` or ``unverified``. Without a verifier,
the evaluator's score of the claim against the block stands in for the entailment, as before
it: that tells whether the block is *about* the claim, not whether it says it. A block that
addresses the model (a prompt injection) supports nothing. Unsupported or out-of-range markers
are removed from the text; the claim is reported as flagged. A claim the LLM left uncited may
be attributed: the best block that passes the same check gets cited (small models often answer
right and cite nothing).

Where the LLM endpoint takes a schema, the answer is asked for as :data:`ANSWER_SCHEMA`'s JSON
(sentences, each with the blocks it comes from); :func:`read_answer` writes it back as the
text the check reads, each sentence's markers before its stop ("... in 1889 [2].").
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from answerbox.core.contract import Citation, Verdict
from answerbox.llm.structured import STRING, Schema, array, from_json, object_schema
from answerbox.models.loader import Models
from answerbox.processors.answering.evidence import Evidence
from answerbox.processors.text.certainties import Certainty, certainty
from answerbox.processors.text.claims import Claim, Entailment, entailments
from answerbox.processors.text.spans import Span
from answerbox.processors.text.words import CLAIM_STOPWORDS, terms

__all__ = [
    "ANSWER_SCHEMA",
    "Check",
    "ClaimVerdict",
    "Scorer",
    "StreamedAnswer",
    "Support",
    "Verdict",
    "citation_of",
    "read_answer",
    "rewrite",
    "scorer_of",
    "without_echoed_fields",
    "words",
]

# The field labels of an evidence block (templates/cited_answer/freshprompt.j2) at a line's start.
_ECHOED_FIELD = re.compile(
    r"^[ \t]*(?:(?:source|date|title|highlight)[ \t]*:[^\n]*(?:\n|$)|snippet[ \t]*:[ \t]*)", re.MULTILINE
)


# Function words carry no claim: a sentence is not "unsupported" for saying "the" or "is".
@dataclass(frozen=True, slots=True)
class Support:
    """A block's support of a claim: P(entailment), or the evaluator's score without a verifier."""

    score: float
    contradicted: bool = False  # a window of the block contradicts the claim
    window: tuple[int, int] | None = None  # the block's characters the verdict rests on
    about: bool = False  # the evaluator's: what the block is about, not what it says


# Scores a claim against each block's text.
Scorer = Callable[[str, Sequence[str]], Awaitable[list[Support]]]


def scorer_of(models: Models) -> Scorer:
    """The verifier's entailment where the models include one, else the evaluator's score."""
    verifier, evaluator = models.verifier, models.evaluator
    if verifier is None:

        async def about(claim: str, texts: Sequence[str]) -> list[Support]:
            return [Support(score, about=True) for score in await evaluator.score(claim, texts)]

        return about
    contradicted_above = verifier.thresholds.contradicted_above

    async def entailed(claim: str, texts: Sequence[str]) -> list[Support]:
        return [_entailment(e, contradicted_above) for e in await entailments(verifier, [(t, claim) for t in texts])]

    return entailed


def _entailment(found: Entailment, contradicted_above: float) -> Support:
    contradicted = found.contradicted >= contradicted_above
    # A block that denies the claim more than it says it is quoted where it denies it.
    window = found.contradicting if contradicted and found.contradicted > found.entailed else found.window
    return Support(found.entailed, contradicted, window)


# FreshPrompt asks for concise answers: the caps only stop a small model that repeats itself.
ANSWER_SCHEMA = Schema(
    "cited_answer", object_schema(sentences=array(object_schema(text=STRING, blocks=array({"type": "integer"}, 3)), 8))
)


# A sentence object of ANSWER_SCHEMA whose text string closed, and its blocks if their list did.
_WHOLE_SENTENCE = re.compile(
    r'"text"\s*:\s*"(?P<text>(?:[^"\\]|\\.)*)"'  # a JSON string, escapes included
    r'(?:\s*,\s*"blocks"\s*:\s*\[(?P<blocks>[\d\s,]*)\])?'
)


class _JSONSentence(BaseModel):
    text: str = ""
    blocks: list[int] = []


class _JSONAnswer(BaseModel):
    sentences: list[_JSONSentence] = []


def _sentence(sentence: _JSONSentence) -> str | None:
    text = " ".join(sentence.text.split())
    body = text.rstrip(".!?").rstrip()
    if not body:
        return None
    stop = text[-1] if text[-1] in ".!?" else "."  # the check splits claims at stops
    markers = "".join(f"[{b}]" for b in dict.fromkeys(sentence.blocks))
    return f"{body} {markers}{stop}" if markers else f"{body}{stop}"


def read_answer(text: str, structured: bool) -> str:
    """The answer as ``parse_claims`` reads it: from JSON when ``structured`` was asked for and
    came back, else the reply itself. JSON cut off (at ``max_tokens``) keeps its whole sentences:
    shown raw, the braces and keys would be the answer."""
    answer = from_json(_JSONAnswer, text) if structured else None
    if answer is None and structured and text.lstrip().startswith("{"):
        answer = _JSONAnswer(sentences=[_salvaged(m) for m in _WHOLE_SENTENCE.finditer(text)])
    if answer is None:
        return text
    return " ".join(s for s in map(_sentence, answer.sentences) if s)


# A sentence object whose text, and blocks if any, closed: a streamed reply reads up to its brace.
_CLOSED_SENTENCE = re.compile(_WHOLE_SENTENCE.pattern + r"\s*\}")


class StreamedAnswer:
    """A reply read as it streams, as :func:`read_answer` reads it whole: a JSON reply gives each
    sentence once its object has closed; any other reply passes through as it comes."""

    def __init__(self) -> None:
        self._raw = ""
        self._read = 0  # where the next sentence object may start
        self._json: bool | None = None  # decided by the reply's first character

    def feed(self, delta: str) -> str:
        self._raw += delta
        if self._json is None:
            if not self._raw.strip():
                return ""
            self._json = self._raw.lstrip().startswith("{")
            if not self._json:
                return self._raw
        elif not self._json:
            return delta
        return self._sentences(_CLOSED_SENTENCE)

    def flush(self) -> str:
        """At the reply's end: a sentence whose text closed but whose object did not (cut off at
        ``max_tokens``), as ``read_answer`` keeps it."""
        return self._sentences(_WHOLE_SENTENCE) if self._json else ""

    def _sentences(self, pattern: re.Pattern[str]) -> str:
        sentences = []
        for match in pattern.finditer(self._raw, self._read):
            sentences.append(_sentence(_salvaged(match)))
            self._read = match.end()
        return "".join(f"{s} " for s in sentences if s)


def _salvaged(match: re.Match[str]) -> _JSONSentence:
    blocks = [int(n) for n in (match["blocks"] or "").replace(",", " ").split()]
    return _JSONSentence(text=json.loads(f'"{match["text"]}"'), blocks=blocks)


def without_echoed_fields(answer: str) -> str:
    """The answer without the evidence blocks' layout a small model copies into it: the
    ``source:``/``date:``/``title:``/``highlight:`` lines go, a ``snippet:`` label leaves its text."""
    return _ECHOED_FIELD.sub("", answer).strip()


def words(text: str) -> set[str]:
    return terms(text, CLAIM_STOPWORDS)


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    """One (claim, marker) pair after the check; ``evidence`` is None for an out-of-range marker."""

    claim: Claim
    marker: int
    evidence: Evidence | None
    quote: Span | None
    support: float | None  # None: no model was available to check it
    supported: bool
    attributed: bool = False  # the LLM left the claim uncited; the check found its block
    contradicted: bool = False  # the block says otherwise (``quote`` is where)
    certain: Certainty | None = None  # what the rules settled, before or without a model

    @property
    def verdict(self) -> Verdict:
        return "entailed" if self.supported else "contradicted" if self.contradicted else "unverified"


def _best_sentence(claim: str, evidence: Evidence, window: tuple[int, int] | None = None) -> Span:
    """The sentence of the block (of its ``window``, where the verdict rests) sharing the most
    words with the claim: the quote."""
    wanted = words(claim)
    sentences = evidence.sentences()
    if window is not None:
        inside = evidence.snippet[window[0] : window[1]]
        sentences = [s for s in sentences if s.text in inside] or sentences
    return max(sentences, key=lambda s: len(wanted & words(s.text))) if sentences else evidence.locate(0)


def _coverage(claim: str, question: str, evidence: Evidence) -> float:
    """Share of the claim's new words (not in the question) that the cited block contains."""
    new = words(claim) - words(question)
    return len(new & words(evidence.snippet)) / len(new) if new else 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """How a claim is checked against a block: what the rules settle (``certainties``: a copy,
    a misquote, a quantity changed), else the verifier's entailment (or the evaluator's score)
    and the words it shares."""

    question: str
    scorer: Scorer | None  # None: no model to score with
    min_support: float
    min_coverage: float
    # Whether a citation needs the model's support: then one no model could score fails (the
    # check fails closed); without it (check_citations off) an in-range marker is kept.
    required: bool = True
    # The reader's span per block marker: its answer to the question in that block.
    answers: Mapping[int, str] = field(default_factory=dict)

    def verdict(
        self,
        claim: Claim,
        marker: int,
        block: Evidence,
        support: Support | None,
        attributed: bool = False,
        certain: Certainty | None = None,
    ) -> ClaimVerdict:
        contradicted = False
        # A doubt stands unless the verifier reads the claim: a relevance score cannot lift it.
        if certain is not None and certain.verdict == "unverified" and support is not None and not support.about:
            certain = None
        if block.instructs:
            supported = False  # an obeyed instruction looks supported by the block that gives it
        elif certain is not None:
            supported, contradicted = certain.entailed, certain.verdict == "contradicted"
        elif support is None:
            supported = not self.required
        else:
            supported = (
                support.score >= self.min_support and _coverage(claim.plain, self.question, block) >= self.min_coverage
            )
            contradicted = support.contradicted and not supported
        window = certain.sentence if certain is not None else support.window if support is not None else None
        quote = _best_sentence(claim.plain, block, window)
        score = support.score if support is not None else None
        return ClaimVerdict(claim, marker, block, quote, score, supported, attributed, contradicted, certain)

    async def settled(self, claim: Claim, blocks: Sequence[Evidence]) -> list[Certainty | None]:
        """What the rules settle of ``claim`` against each block; in a worker thread, as the
        alignment reads whole sentences. Nothing, where the pipeline checks no citation."""
        if not self.required or not blocks:
            return [None] * len(blocks)
        read = [(b.snippet, self.answers.get(b.marker, "")) for b in blocks]
        return await asyncio.to_thread(_settled, claim.plain, read, self.question)

    async def supports(self, claim: Claim, blocks: Sequence[Evidence]) -> list[tuple[Support | None, Certainty | None]]:
        """Each block's support of ``claim`` and what the rules settled: a copy of a block's
        sentence is entailed with no model call."""
        settled = await self.settled(claim, blocks)
        asked = [i for i, c in enumerate(settled) if c is None or not c.entailed]
        scored = dict(zip(asked, await self.scores(claim, [blocks[i] for i in asked]), strict=True))
        found: list[tuple[Support | None, Certainty | None]] = []
        for i, certain in enumerate(settled):
            support = scored.get(i)
            # A settled verdict stands in for a missing score; a doubt gets none (only a score it
            # was given can lift it, and a made-up one would).
            if certain is not None and certain.verdict != "unverified" and (certain.entailed or support is None):
                support = Support(float(certain.entailed), certain.verdict == "contradicted", certain.sentence)
            found.append((support, certain))
        return found

    async def scores(self, claim: Claim, blocks: Sequence[Evidence]) -> list[Support | None]:
        if self.scorer is None or not blocks:
            return [None] * len(blocks)
        return list(await self.scorer(claim.plain, [b.snippet for b in blocks]))

    async def cited(self, claims: Sequence[Claim], evidence: Mapping[int, Evidence]) -> list[ClaimVerdict]:
        """Every (claim, marker) pair the LLM wrote; an out-of-range marker is never supported."""
        verdicts = []
        for claim in claims:
            blocks = [evidence[m] for m in claim.markers if m in evidence]
            found = dict(zip((b.marker for b in blocks), await self.supports(claim, blocks), strict=True))
            for marker in claim.markers:
                block = evidence.get(marker)
                if block is None:
                    verdicts.append(ClaimVerdict(claim, marker, None, None, None, False))
                    continue
                support, certain = found[marker]
                verdicts.append(self.verdict(claim, marker, block, support, certain=certain))
        return verdicts

    async def attributed(self, claims: Sequence[Claim], evidence: Sequence[Evidence]) -> list[ClaimVerdict]:
        """For claims the LLM left uncited: the best-scoring block that passes the check and
        whose own answer to the question (``answers``, the reader's span per block) the claim
        states. That last condition keeps a sentence that merely echoes a document (an
        injected "say X") from being attributed to it."""
        if self.scorer is None:
            return []
        verdicts = []
        for claim in claims:
            said = words(claim.plain)
            eligible = [b for b in evidence if (a := words(self.answers.get(b.marker, ""))) and a <= said]
            scored = sorted(
                zip(await self.supports(claim, eligible), eligible, strict=True),
                key=lambda p: -(p[0][0].score if p[0][0] is not None else 0.0),
            )
            passing = [v for v in (self.verdict(claim, b.marker, b, s, True, c) for (s, c), b in scored) if v.supported]
            verdicts += passing[:1]
        return verdicts


def _settled(claim: str, blocks: Sequence[tuple[str, str]], question: str) -> list[Certainty | None]:
    return [certainty(claim, block, question, answer) for block, answer in blocks]


def rewrite(answer: str, verdicts: Sequence[ClaimVerdict]) -> str:
    """The answer with unsupported markers taken out and attributed ones put in; brackets left
    whole keep their form."""
    dropped = {(v.claim.start, v.marker) for v in verdicts if not v.supported}
    edits: list[tuple[int, int, str]] = []
    for claim in dict.fromkeys(v.claim for v in verdicts):
        for group in claim.groups:
            kept = [m for m in group.markers if (claim.start, m) not in dropped]
            if len(kept) < len(group.markers):
                start = group.start if kept else len(answer[: group.start].rstrip())
                edits.append((start, group.end, f"[{', '.join(map(str, kept))}]" if kept else ""))
    for verdict in verdicts:
        if verdict.attributed:
            # Before the sentence's final stop: "... in 1965 [2]."
            body = verdict.claim.text.rstrip()
            at = verdict.claim.start + len(body.rstrip(".!?"))
            edits.append((at, at, f" [{verdict.marker}]"))
    pieces, cursor = [], 0
    for start, end, text in sorted(edits):
        pieces += [answer[cursor:start], text]
        cursor = end
    pieces.append(answer[cursor:])
    return "".join(pieces).strip()


def citation_of(verdict: ClaimVerdict) -> Citation:
    assert verdict.evidence is not None, "only resolved verdicts become citations"
    assert verdict.quote is not None, "only resolved verdicts become citations"
    return verdict.evidence.cite(verdict.quote, verdict.support)
