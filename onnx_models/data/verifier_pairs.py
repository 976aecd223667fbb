"""(evidence, claim, label) pairs for the claim verifier: VitaminC and contrastive claims.

- **VitaminC** (bigbench ``vitaminc_fact_verification``: ``"Title: evidence\\nClaim: claim"``,
  True / False / Neither), split by page title with a fixed hash (``vitaminc_split``):
  ``REPORT_SHARE`` of the titles for reporting only (``bench/verification.py``), ``CHOOSE_SHARE``
  for choosing thresholds, the rest for training. A title's every example stays on its side.
- **Contrastive claims** from the training articles (squad_shifts ``new_wiki`` and ``nyt``; never
  SQuAD dev or the other-domain files), each read against the evidence window that holds the
  answer's sentence (``answerbox.processors.text.claims``):
  the answer's sentence (entailed); that sentence with the answer swapped for another answer of
  the same paragraph, its first number one more, its first month the next, its first direction
  word the opposite ("won" for "lost"), or two of its names exchanged (contradicted); it with a
  sentence of another paragraph of the article appended, and that sentence alone (neither);
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
from answerbox.processors.text.words import FUNCTION_WORDS

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


_MONTH_NAMES = "January February March April May June July August September October November December".split()
_MONTH = re.compile(rf"\b(?:{'|'.join(_MONTH_NAMES)})\b")
_MAY_DATE = re.compile(r"\d\s+May\b|\bMay\s+\d")


def _date_changed(sentence: str) -> str | None:
    """``sentence`` with its first month the next one ("February 7" as "March 7"): its date
    misstated. "May" counts only beside a number: it is a verb and a name too."""
    for found in _MONTH.finditer(sentence):
        month = found.group()
        if month == "May" and not any(
            m.start() <= found.start() < m.end() for m in _MAY_DATE.finditer(sentence, max(0, found.start() - 16))
        ):
            continue
        following = _MONTH_NAMES[(_MONTH_NAMES.index(month) + 1) % len(_MONTH_NAMES)]
        return f"{sentence[: found.start()]}{following}{sentence[found.end() :]}"
    return None


# Direction words and their opposites, each on one axis of the quantity rule's
# (``answerbox.processors.text.quantities``; a test holds the two together). Pairs read both
# ways; "fall" (the season), "most of" and a capitalised word inside a name ("First Avenue")
# are left alone.
_FLIPS = {
    word: opposite
    for one, other in (
        ("more", "less"),
        ("most", "least"),
        ("higher", "lower"),
        ("highest", "lowest"),
        ("larger", "smaller"),
        ("largest", "smallest"),
        ("before", "after"),
        ("earlier", "later"),
        ("earliest", "latest"),
        ("first", "last"),
        ("rose", "fell"),
        ("risen", "fallen"),
        ("rising", "falling"),
        ("increased", "decreased"),
        ("increase", "decrease"),
        ("increases", "decreases"),
        ("increasing", "decreasing"),
        ("won", "lost"),
        ("win", "lose"),
        ("wins", "loses"),
        ("winning", "losing"),
        ("above", "below"),
        ("maximum", "minimum"),
    )
    for word, opposite in ((one, other), (other, one))
} | {"fewer": "more", "bigger": "smaller", "biggest": "smallest", "greater": "smaller", "grew": "shrank"}
_FLIP_WORD = re.compile(rf"(?<![\w'’-])(?:{'|'.join(sorted(_FLIPS, key=len, reverse=True))})(?![\w'’-])", re.IGNORECASE)


def _comparative_flipped(sentence: str) -> str | None:
    """``sentence`` with its first direction word the opposite ("defeated ... to win" as "... to
    lose"): the same words saying the other way."""
    for found in _FLIP_WORD.finditer(sentence):
        word = found.group()
        rest = sentence[found.end() :]
        if (word[0].isupper() and (found.start() > 0 or rest[1:2].isupper())) or (
            word.lower() == "most" and rest.startswith(" of ")
        ):
            continue  # a name's word ("First Avenue", "the Last Supper"), or "most of"
        opposite = _FLIPS[word.lower()]
        if word[0].isupper():
            opposite = opposite[0].upper() + opposite[1:]
        return f"{sentence[: found.start()]}{opposite}{sentence[found.end() :]}"
    return None


_WORD = re.compile(r"\w+(?:['’.-]\w+)*")
_NAME_JOINS = frozenset("of the de du da del la le von van".split())


def _names(sentence: str) -> list[tuple[int, int]]:
    """Where the names of ``sentence`` are: runs of capitalised words ("Denver Broncos",
    "University of Notre Dame", "Super Bowl 50") with no month, less a leading function word
    ("The"); a lone capitalised first word ("However") is no name."""
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(sentence)]
    capital = [w[0].isupper() and not any(c.isdigit() for c in w) and w not in _MONTH_NAMES for _, _, w in words]
    found: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        if not capital[i]:
            i += 1
            continue
        j = i + 1  # past the run's last word
        while True:
            k = j
            while k < len(words) and words[k][2] in _NAME_JOINS:
                k += 1
            joined = all(sentence[words[n - 1][1] : words[n][0]] == " " for n in range(j, k + 1) if n < len(words))
            if k < len(words) and capital[k] and joined:
                j = k + 1
            else:
                break
        if j < len(words) and words[j][2].isdigit() and sentence[words[j - 1][1] : words[j][0]] == " ":
            j += 1  # "Super Bowl 50"
        first = i
        while first < j and words[first][2].lower() in FUNCTION_WORDS:
            first += 1
        if first < j and not (first == 0 and j == 1):
            found.append((words[first][0], words[j - 1][1]))
        i = j
    return found


_LISTED = frozenset({"and", "or"})


def _roles_exchanged(sentence: str, answer: str, at: int) -> str | None:
    """``sentence`` with two of its names exchanged ("The Broncos defeated the Panthers" as "The
    Panthers defeated the Broncos"): the same words saying the opposite relation. The answer at
    ``at`` is one of the two when it is a name, the first name of the sentence otherwise; the
    other is the next name that is no part of it, and not listed beside it ("A and B", "A, B")."""
    names = _names(sentence)
    start, end = at, at + len(answer)
    words = list(_WORD.finditer(answer))
    leading = next((w for w in words if w.group().lower() not in FUNCTION_WORDS), None)
    if leading is not None and leading.group()[0].isupper() and leading.group() not in _MONTH_NAMES:
        first = (start + leading.start(), end)
        others = [n for n in names if n[1] <= first[0] or n[0] >= first[1]]
    elif len(names) >= 2:
        first, others = names[0], names[1:]
    else:
        return None
    said = normalize_answer(sentence[first[0] : first[1]])
    for other in others:
        (a, b), (c, d) = sorted((first, other))
        text = normalize_answer(sentence[other[0] : other[1]])
        between = [w.group() for w in _WORD.finditer(sentence[b:c])]
        if not text or text in said or said in text or all(w in _LISTED or w[0].isupper() for w in between):
            continue
        return f"{sentence[:a]}{sentence[c:d]}{sentence[b:c]}{sentence[a:b]}{sentence[d:]}"
    return None


_CONNECTIVES = frozenset(
    "however meanwhile therefore thus also additionally furthermore moreover instead nevertheless consequently "
    "later then finally still hence yet indeed".split()
)


def _clause_appended(sentence: str, neighbours: Sequence[Paragraph], key: str) -> str | None:
    """``sentence`` and a sentence of a neighbour paragraph (chosen by a hash of ``key``, so the
    shared random draws stay as they were) joined by ", and": half the claim is not the passage's."""
    if not neighbours or not sentence.endswith("."):
        return None
    chosen = zlib.crc32(f"clause:{key}".encode())
    neighbour = neighbours[chosen % len(neighbours)].context
    spans = sentence_spans(neighbour)
    if not spans:
        return None
    s, e = spans[chosen // len(neighbours) % len(spans)]
    clause = neighbour[s:e]
    first = _WORD.match(clause)
    if first is not None and first.group().lower() in _CONNECTIVES and clause[first.end() :].startswith(", "):
        clause = clause[first.end() + 2 :]  # "However, on May 3 ..." joins as "and on May 3 ..."
        first = _WORD.match(clause)
    if first is not None:
        word = first.group()
        lower = word[0].lower() + word[1:]
        if (lower in FUNCTION_WORDS and lower != "i") or (
            word[1:].islower() and re.search(rf"(?<!\w){re.escape(lower)}(?!\w)", neighbour)
        ):
            clause = lower + clause[first.end() :]
    return f"{sentence[:-1]}, and {clause}"


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
        # Nor do these: a month, a direction or two names changed, a neighbour's sentence appended.
        made = (
            ("date_changed", CONTRADICTED, _date_changed(text)),
            ("comparative_flipped", CONTRADICTED, _comparative_flipped(text)),
            ("roles_exchanged", CONTRADICTED, _roles_exchanged(text, answer, start - sentence[0])),
            ("clause_appended", NEUTRAL, _clause_appended(text, neighbours, question.text)),
        )
        for kind, label, claim in made:
            if claim is not None and claim != text:
                yield Pair(evidence, claim, label, kind, question.text)
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
