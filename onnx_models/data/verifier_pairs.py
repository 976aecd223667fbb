"""(evidence, claim, label) pairs for the claim verifier: VitaminC and contrastive claims.

- **VitaminC** (bigbench ``vitaminc_fact_verification``: ``"Title: evidence\\nClaim: claim"``,
  True / False / Neither), split by page title with a fixed hash (``vitaminc_split``):
  ``REPORT_SHARE`` of the titles for reporting only (``bench/verification.py``), ``CHOOSE_SHARE``
  for choosing thresholds, the rest for training. A title's every example stays on its side.
- **Contrastive claims** from the training articles (squad_shifts ``new_wiki`` and ``nyt``; never
  SQuAD dev or the other-domain files), each read against the evidence window that holds the
  answer's sentence (``answerbox.processors.text.claims``):
  the answer's sentence (entailed); that sentence with the answer swapped for another answer of
  the same paragraph (contradicted); a sentence of another paragraph of the article (neither);
  the question and its answer as one claim (entailed), with a wrong answer (contradicted), and
  against a window without the answer (neither). The held-out articles (``in_holdout(article,
  HOLDOUT)``, as every other constant of the project is chosen on) are for choosing only.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from answerbox.processors.text.claims import answer_claim, evidence_windows
from answerbox.processors.text.normalize import normalize_answer
from answerbox.processors.text.sentences import sentence_spans

from onnx_models.data.squad import TRAIN_FILES, Paragraph, in_holdout, load_squad

__all__ = [
    "CHOOSE_SHARE",
    "HOLDOUT",
    "LABELS",
    "REPORT_SHARE",
    "Pair",
    "articles_pairs",
    "contrastive_pairs",
    "load_pairs",
    "save_pairs",
    "vitaminc_pairs",
    "vitaminc_split",
]

LABELS = ("entailment", "contradiction", "neutral")
ENTAILED, CONTRADICTED, NEUTRAL = range(3)
REPORT_SHARE = 0.2
CHOOSE_SHARE = 0.1
HOLDOUT = 0.1  # the held-out training articles, as the reader's constants use
_VITAMINC = "bigbench-1.0.0/bigbench/benchmark_tasks/vitaminc_fact_verification/task.json"
_VITAMINC_LABELS = {"True": ENTAILED, "False": CONTRADICTED, "Neither": NEUTRAL}

Split = Literal["train", "choose", "report"]


@dataclass(frozen=True, slots=True)
class Pair:
    evidence: str
    claim: str
    label: int
    kind: str  # where it comes from: "vitaminc", "sentence", "swapped", ...
    question: str = ""  # the SQuAD question a contrastive pair was made from


def vitaminc_split(title: str) -> Split:
    """A page title's side, from a stable hash: every run on every machine splits alike."""
    share = zlib.crc32(f"vitaminc:{title}".encode()) / 2**32
    return "report" if share < REPORT_SHARE else "choose" if share < REPORT_SHARE + CHOOSE_SHARE else "train"


def vitaminc_pairs(tarball: Path) -> dict[Split, list[Pair]]:
    with tarfile.open(tarball, "r:gz") as archive:
        handle = archive.extractfile(_VITAMINC)
        assert handle is not None, _VITAMINC
        examples = json.load(handle)["examples"]
    split: dict[Split, list[Pair]] = {"train": [], "choose": [], "report": []}
    for example in examples:
        text, _, claim = example["input"].rpartition("\nClaim: ")
        title, _, evidence = text.partition(": ")
        scores = example["target_scores"]
        label = _VITAMINC_LABELS[max(scores, key=scores.get)]
        split[vitaminc_split(title)].append(Pair(evidence.strip(), claim.strip(), label, "vitaminc"))
    return split


def _window_of(context: str, position: int) -> str:
    for start, end in evidence_windows(context):
        if start <= position < end:
            return context[start:end]
    return context


def _other_window(context: str, position: int) -> str | None:
    others = [(s, e) for s, e in evidence_windows(context) if not s <= position < e]
    return context[others[0][0] : others[0][1]] if others else None


def _sentence_at(context: str, position: int) -> tuple[int, int] | None:
    return next(((s, e) for s, e in sentence_spans(context) if s <= position < e), None)


_NUMBER = re.compile(r"(?<![\w.,])\d{1,4}(?!\w)(?![.,]\d)")


def _number_changed(sentence: str) -> str | None:
    """``sentence`` with its first number (a year, a day, a count) one more: what it says, misstated."""
    found = _NUMBER.search(sentence)
    if found is None:
        return None
    return f"{sentence[: found.start()]}{int(found.group()) + 1}{sentence[found.end() :]}"


def _paragraph_pairs(paragraph: Paragraph, neighbours: Sequence[Paragraph], rng: random.Random) -> Iterator[Pair]:
    context = paragraph.context
    answers = {normalize_answer(q.answers[0]): q.answers[0] for q in paragraph.questions if q.answers}
    for question in paragraph.questions:
        if not question.answers:
            continue
        answer, start = question.answers[0], question.answer_starts[0]
        sentence = _sentence_at(context, start)
        if sentence is None or context[start : start + len(answer)] != answer:
            continue
        evidence = _window_of(context, start)
        text = context[sentence[0] : sentence[1]]
        yield Pair(evidence, text, ENTAILED, "sentence", question.text)
        yield Pair(evidence, answer_claim(question.text, answer), ENTAILED, "question", question.text)
        wrong = [a for key, a in answers.items() if key != normalize_answer(answer) and a not in text]
        if wrong:
            other = rng.choice(wrong)
            at = start - sentence[0]
            swapped = text[:at] + other + text[at + len(answer) :]
            yield Pair(evidence, swapped, CONTRADICTED, "swapped", question.text)
            yield Pair(evidence, answer_claim(question.text, other), CONTRADICTED, "question_wrong", question.text)
        changed = _number_changed(text)
        if changed is not None:  # no draw from ``rng``: the other kinds' pairs stay as they were
            yield Pair(evidence, changed, CONTRADICTED, "number_changed", question.text)
        elsewhere = _other_window(context, start)
        if elsewhere is not None and answer not in elsewhere:
            yield Pair(elsewhere, answer_claim(question.text, answer), NEUTRAL, "question_elsewhere", question.text)
        if neighbours:
            neighbour = rng.choice(neighbours).context
            spans = sentence_spans(neighbour)
            s, e = rng.choice(spans)
            yield Pair(evidence, neighbour[s:e], NEUTRAL, "other_paragraph", question.text)


def articles_pairs(paragraphs: Sequence[Paragraph], rng: random.Random) -> Iterator[tuple[str, Pair]]:
    """Each article's contrastive pairs, with its title, in the order of ``paragraphs``: a
    paragraph's neighbours are the other paragraphs of its article."""
    by_article: dict[str, list[Paragraph]] = {}
    for paragraph in paragraphs:
        by_article.setdefault(paragraph.article, []).append(paragraph)
    for article, members in by_article.items():
        for paragraph in members:
            neighbours = [p for p in members if p is not paragraph]
            yield from ((article, pair) for pair in _paragraph_pairs(paragraph, neighbours, rng))


def contrastive_pairs(tarball: Path, *, seed: int = 13) -> dict[Split, list[Pair]]:
    """The contrastive pairs of the training articles ("train") and the held-out ones ("choose")."""
    split: dict[Split, list[Pair]] = {"train": [], "choose": [], "report": []}
    for article, pair in articles_pairs(load_squad(TRAIN_FILES, tarball), random.Random(seed)):
        split["choose" if in_holdout(article, HOLDOUT) else "train"].append(pair)
    return split


def save_pairs(pairs: Sequence[Pair], path: Path) -> Path:
    """``pairs`` as gzipped JSON lines: what a lent GPU reads instead of the 358 MB tarball."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(asdict(pair), ensure_ascii=False) + "\n" for pair in pairs)
    path.write_bytes(gzip.compress(lines.encode(), mtime=0))
    return path


def load_pairs(path: Path) -> list[Pair]:
    return [Pair(**json.loads(line)) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]
