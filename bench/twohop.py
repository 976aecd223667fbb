"""Two-hop questions composed from SQuAD v1.1 dev: a bridge entity joins two paragraphs.

    cd /work/main && /root/.cache/answerbox/venv/bin/python -m bench.twohop --count 100

Hop 1 is a question whose gold answer is a named entity E (capitalised, 1-5 words, not a
number). Hop 2 is a question about another paragraph whose text names E. The composed
question replaces E in hop 2 by hop 1, as a quoted sub-question (both hops from one article,
where a bridge entity is named again):

    hop 1: Which NFL team won Super Bowl 50?                  → Denver Broncos
    hop 2: Who was the Denver Broncos' head coach in 2015?    → Gary Kubiak
    2-hop: Who was (the answer to "Which NFL team won Super Bowl 50?")' head coach in 2015?

so answering it needs the hop-1 paragraph to find E, then the hop-2 paragraph. The gold
answers are hop 2's; a pair is dropped when E is in hop 1's question, when hop 2's answer
is E or stands in hop 1's question, or when both questions share a paragraph.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from bench.harness import dev_paragraphs
from onnx_models.data.squad import Paragraph, Question, normalize_answer

__all__ = ["TwoHop", "compose"]


@dataclass(frozen=True, slots=True)
class TwoHop:
    id: str
    text: str
    answers: tuple[str, ...]
    bridge: str
    hops: tuple[str, str]  # the two SQuAD questions, in order
    paragraphs: tuple[str, str]  # their gold paragraph ids


def _bridge(question: Question) -> str | None:
    """The hop-1 answer if it looks like a named entity worth bridging on."""
    entity = question.answers[0].strip().rstrip(".")
    words = entity.split()
    if not 1 <= len(words) <= 5 or not entity[0].isupper() or any(ch.isdigit() for ch in entity) or len(entity) < 4:
        return None
    if entity.lower() in question.text.lower():
        return None
    return entity


def _replace(text: str, entity: str, sub_question: str) -> str | None:
    pattern = re.compile(rf"(?<!\w)(?:the\s+)?{re.escape(entity)}(?!\w)")
    if len(pattern.findall(text)) != 1:
        return None
    return pattern.sub(lambda _: f'(the answer to "{sub_question}")', text)


def compose(paragraphs: Sequence[Paragraph], count: int, seed: int) -> list[TwoHop]:
    """Up to ``count`` two-hop questions, at most one per hop-1 question, in a seeded order."""
    by_article: dict[str, list[tuple[Paragraph, Question]]] = {}
    for paragraph in paragraphs:
        by_article.setdefault(paragraph.article, []).extend((paragraph, q) for q in paragraph.questions)
    candidates: list[TwoHop] = []
    for first_paragraph, first in (pair for pairs in by_article.values() for pair in pairs):
        entity = _bridge(first)
        if entity is None:
            continue
        # Hop 2 comes from the same article: that is where a bridge entity is named again.
        for second_paragraph, second in by_article[first_paragraph.article]:
            if second_paragraph.id == first_paragraph.id or entity not in second.text:
                continue
            if any(normalize_answer(a) in {normalize_answer(entity), ""} for a in second.answers):
                continue
            if any(normalize_answer(a) in normalize_answer(first.text) for a in second.answers):
                continue
            text = _replace(second.text, entity, first.text)
            if text is None:
                continue
            candidates.append(
                TwoHop(
                    id=f"{first.id}+{second.id}",
                    text=text,
                    answers=second.answers,
                    bridge=entity,
                    hops=(first.text, second.text),
                    paragraphs=(first_paragraph.id, second_paragraph.id),
                )
            )
            break
    random.Random(seed).shuffle(candidates)
    return candidates[:count]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    for question in compose(dev_paragraphs(), args.count, args.seed):
        print(json.dumps(asdict(question)))


if __name__ == "__main__":
    main()
