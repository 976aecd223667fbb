"""Two-turn questions made by a rule from SQuAD paragraphs: a second question about a paragraph,
asked with "it" for an entity that the first question about it named.

    PYTHONPATH=plugin:. python -m bench.followup_pairs --count 10

prints how many pairs SQuAD v1.1 dev yields and a seeded sample of them as JSON lines. The rule
is the definition of ``bench/followup.py``'s benchmark:

1. An *entity* of a question is a maximal run of words that each start with an upper-case
   letter or are digits ("Super Bowl 50", "Denver Broncos", "NFL"). Words are split on
   whitespace and stripped of ``?,.;:"()!`` at their ends (an abbreviation keeps its last dot:
   "U.S."); a stripped mark ends a run, so does a possessive ``'s`` (or the ``'`` of ``s'``),
   which is kept apart: "Beyonce's" is the entity "Beyonce", possessive. A run's first word
   is dropped when it is a question or function word (``FUNCTION_WORDS``: What, Which, The,
   In, Did, Along, ...: capitalised only for starting the question or a sentence). Numbers
   and month names alone are no entity ("in 2007" would become "in it").
2. A pair (first, second) of a paragraph's distinct questions qualifies when an entity E of
   ``second`` also stands in ``first`` (case-sensitive, word-bounded) and "it" can stand for
   E in ``second``; E is the longest such entity (in characters; ties: the first in
   ``second``). With no tagger, "it can stand for E" is guessed from E's neighbours. It can
   when E is possessive, ends the question or a clause (a mark follows), or is followed by a
   capitalised word or a function word (``FOLLOWERS``: to, of, and, was, ...). Followed by
   another word, E is taken for a modifier ("German students", "the Kuznets curve": "it
   curve" asks nothing) unless an auxiliary or relative stands before it (``LEADERS``: did,
   can, that, ...: "did Tesla stop") and the two words do not stand together in the
   paragraph or in ``first`` ("did the Corliss engine use" is a modifier's). It cannot
   either for a plural (the last word ends in s, not ss/is/us: "Antibodies are"), a name in
   quotes, after a possessive or demonstrative ("his ACL") or after a possessive name
   ("King's Cross"), nor for the head or tail of a longer name ("the Charter of Fundamental
   Rights", "Principles of Geology": "of" joins it to a capitalised word).
3. The follow-up is ``second`` with that occurrence of E replaced by "it", or by "its" where
   E is possessive (the ``'s`` goes too). An article just before E goes with it ("the
   Broncos", "a Time Lord": "it"); at the start of the question the pronoun is capitalised.
   The pair is kept when the follow-up has at least 4 words and E no longer stands in it.
4. At most one pair a paragraph: the first that qualifies, ``first`` over the questions in
   order and ``second`` over the later questions, then the earlier ones. The bench asks a
   seeded sample (``random.Random(seed).sample``) of them.

    first:     Which NFL team represented the AFC at Super Bowl 50?
    second:    Where did Super Bowl 50 take place?
    follow-up: Where did it take place?
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from onnx_models.data.squad import Paragraph, Question

__all__ = [
    "FOLLOWERS",
    "FUNCTION_WORDS",
    "LEADERS",
    "Entity",
    "FollowUp",
    "entities",
    "follow_ups",
    "pronoun_follow_up",
    "sample_pairs",
]

# Capitalised for starting a question or a sentence, not for naming anything.
FUNCTION_WORDS = frozenset(
    "What Which Who Whom Whose When Where Why How In On At The A An Of For To During After Before Did Does"
    " Do Is Was Were Are Along According Besides Apart Aside Other By From With As Since Until Upon Under"
    " Unlike Despite Name Give List If While Although Because Has Have Had Can Could Would Should Will Many"
    " Most Some".split()
)
# Words after which a name stands as a noun: prepositions, conjunctions, auxiliaries.
FOLLOWERS = frozenset(
    "to in of on at for from by with about after before during since until against into over under between"
    " through within without among and or but than as that which who whom whose when where while is was"
    " were are be been has have had do does did can could will would should may might must not".split()
)
# Words after which a name is a subject with a bare verb after it ("did Tesla stop"): "was" and
# "has" are not among them, a noun follows their subject as often ("was the Doctor Who series").
LEADERS = frozenset("do does did can could will would should may might must that".split())
# Words before a name that make it a modifier: "his ACL" is not "his it".
_DETERMINERS = frozenset("his her its their my our your this these those every each some".split())
_MONTHS = frozenset("January February March April May June July August September October November December".split())
_MARKS = '?,.;:"()!'
_QUOTES = "\"“'‘"
_WORD = re.compile(r"\S+")
_POSSESSIVE = re.compile(r"(?:['’]s|(?<=s)['’])$")
_PLURAL = re.compile(r"[a-z][a-rt-z]s$")  # "Jews", "Victorians"; not "Congress", "Davis", "Cyprus"
_ARTICLE = re.compile(r"(?:^|(?<=\s))(?:[Tt]he|[Aa]n?)\s+$")


@dataclass(frozen=True, slots=True)
class Entity:
    """A run of capitalised (or numeric) words of a question: its text and where it stands;
    ``end`` is past its last word, ``possessive`` past the ``'s`` after it if any."""

    text: str
    start: int
    end: int
    possessive: int | None = None


@dataclass(frozen=True, slots=True)
class FollowUp:
    paragraph: Paragraph
    first: Question
    follow_up: Question  # the second question with "it": id "<second's id>/followup", second's gold answers
    original_follow_up: str  # the second question as SQuAD asks it
    entity: str  # what "it" stands for


@dataclass(frozen=True, slots=True)
class _Word:
    start: int
    end: int
    possessive: int | None  # past the "'s" after the word
    opens: bool  # a mark before it: it starts a run
    closes: bool  # a mark or "'s" after it: it ends its run


def _words(text: str) -> list[_Word]:
    words = []
    for match in _WORD.finditer(text):
        token = match[0]
        core = token.strip(_MARKS)
        if not core:
            continue
        start = match.start() + token.index(core)
        end = start + len(core)
        if "." in core and text[end : end + 1] == ".":
            end += 1  # an abbreviation's last dot: "U.S."
        possessive = None
        if (mark := _POSSESSIVE.search(core)) and mark.start() > 0:
            possessive, end = end, start + mark.start()
        words.append(
            _Word(
                start, end, possessive, opens=start > match.start(), closes=possessive is not None or end < match.end()
            )
        )
    return words


def _named(word: str) -> bool:
    return word[0].isupper() or word.isdigit()


def _entity(text: str, run: Sequence[_Word]) -> Entity | None:
    """The run as an entity, less a function word first; a number or a date alone is none."""
    if text[run[0].start : run[0].end] in FUNCTION_WORDS:
        run = run[1:]
    if all(text[w.start : w.end].isdigit() or text[w.start : w.end] in _MONTHS for w in run):
        return None
    return Entity(text[run[0].start : run[-1].end], run[0].start, run[-1].end, run[-1].possessive)


def entities(text: str) -> list[Entity]:
    """The question's entities in order (step 1 of the module's docstring)."""
    found: list[Entity] = []
    run: list[_Word] = []

    def close() -> None:
        if run and (entity := _entity(text, run)):
            found.append(entity)
        run.clear()

    for word in _words(text):
        named = _named(text[word.start : word.end])
        if not named or (word.opens and run):
            close()
        if named:
            run.append(word)
        if word.closes:
            close()
    close()
    return found


def _stands_in(entity: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(entity)}(?!\w)", text) is not None


def _start(text: str, entity: Entity) -> int:
    """Where the words that "it" replaces start: an article before the entity goes with it."""
    article = _ARTICLE.search(text[: entity.start])
    return article.start() if article else entity.start


def _said_as_it(text: str, entity: Entity, context: str) -> bool:
    """Whether "it" can stand for ``entity`` in ``text`` (step 2 of the module's docstring);
    ``context`` (the paragraph and the first question) tells a modifier ("Corliss engine")."""
    before = text[: _start(text, entity)].split()
    previous = before[-1] if before else ""
    if _PLURAL.search(entity.text) or (entity.start > 0 and text[entity.start - 1] in _QUOTES):
        return False
    if previous.lower() in _DETERMINERS or (previous[:1].isupper() and _POSSESSIVE.search(previous)):
        return False
    if previous == "of" and len(before) > 1 and before[-2][:1].isupper():
        return False  # the tail of a longer name
    after = text[entity.possessive or entity.end :]
    if entity.possessive is not None or not after.strip() or after[0] in _MARKS:
        return True
    following, *rest = after.split()[:2]
    following = following.strip(_MARKS)
    if following == "of" and rest and rest[0][:1].isupper():
        return False  # the head of a longer name
    if not following or following[0].isupper() or following in FOLLOWERS:
        return True
    return previous.lower() in LEADERS and not _stands_in(f"{entity.text} {following}", context)


def pronoun_follow_up(text: str, entity: Entity) -> str | None:
    """``text`` with "it" (or "its") for ``entity``, or None when what is left is too short to be
    a question or still names the entity (step 3 of the module's docstring)."""
    start = _start(text, entity)
    pronoun = "it" if entity.possessive is None else "its"
    if start == 0:
        pronoun = pronoun.capitalize()
    asked = text[:start] + pronoun + text[entity.possessive or entity.end :]
    if len(asked.split()) < 4 or _stands_in(entity.text, asked):
        return None
    return asked


def _pair(paragraph: Paragraph, first: Question, second: Question) -> FollowUp | None:
    context = f"{paragraph.context}\n{first.text}"
    shared = [
        e for e in entities(second.text) if _stands_in(e.text, first.text) and _said_as_it(second.text, e, context)
    ]
    if not shared:
        return None
    entity = max(shared, key=lambda e: len(e.text))  # max keeps the first of equals
    if (asked := pronoun_follow_up(second.text, entity)) is None:
        return None
    follow_up = replace(second, id=f"{second.id}/followup", text=asked)
    return FollowUp(paragraph, first, follow_up, second.text, entity.text)


def _first_pair(paragraph: Paragraph) -> FollowUp | None:
    questions = paragraph.questions
    for i, first in enumerate(questions):
        for second in (*questions[i + 1 :], *questions[:i]):
            if second.text != first.text and (pair := _pair(paragraph, first, second)):
                return pair
    return None


def follow_ups(paragraphs: Sequence[Paragraph]) -> list[FollowUp]:
    """Each paragraph's first qualifying pair, in paragraph order."""
    return [pair for p in paragraphs if (pair := _first_pair(p))]


def sample_pairs(paragraphs: Sequence[Paragraph], n: int, seed: int) -> list[FollowUp]:
    """A seeded sample of ``n`` pairs (all of them, in paragraph order, when there are no more)."""
    pairs = follow_ups(paragraphs)
    return pairs if n >= len(pairs) else random.Random(seed).sample(pairs, n)


def main(argv: Sequence[str] | None = None) -> None:
    from bench.harness import dev_paragraphs  # here: importing the rule (its unit test) loads no model code

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--seed", type=int, default=2023)
    args = parser.parse_args(argv)
    paragraphs = dev_paragraphs()
    print(f"{len(follow_ups(paragraphs))} pairs over {len(paragraphs)} paragraphs")
    for pair in sample_pairs(paragraphs, args.count, args.seed):
        print(
            json.dumps(
                {
                    "first": pair.first.text,
                    "second": pair.original_follow_up,
                    "follow_up": pair.follow_up.text,
                    "entity": pair.entity,
                }
            )
        )


if __name__ == "__main__":
    main()
