"""A claim that restates (part of) a sentence of its block with a quantity changed: contradicted.

"The game was played on February 9, 2016" against "The game was played on February 7, 2016, at
Levi's Stadium ...": the claim restates only part of the sentence, so it is no misquote of the
whole (``misquotes`` asks for half the sentence's words), yet the one fact it gives is wrong.
This finds that case by alignment, with no model:

- a *quantity* is a number (digits or words, an ordinal, a year or a day), a month beside a
  number, a unit or scale after a number (km, percent, million), or a comparative word with a
  direction (more/less, before/after, rose/fell, won/lost, first/last);
- the claim *restates* a sentence when the sentence holds at least 60% (and two, or all if
  fewer) of the claim's other content words;
- the claim misstates it when, aligned word by word, a short stretch of the claim made only of
  quantities stands where the sentence says a quantity of the same kind with another value (or
  the opposite direction), next to words both share, and no sentence it restates holds every
  quantity of the claim.

A claim that says its quantity in other words, or joins facts of two sentences, is left to the
claim verifier: only a quantity swapped inside an aligned restatement is certain.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from answerbox.processors.text.bounded import claim_text, sentences
from answerbox.processors.text.words import FUNCTION_WORDS, tokens

__all__ = ["misstated_quantity"]

Feature = tuple[str, str]  # (kind, value): ("number", "7"), ("unit:length", "km"), ("polar:change", "+")

_CARDINALS = {
    w: str(n)
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_ORDINALS = {
    w: f"{n}th"
    for n, w in enumerate(
        "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split(), start=1
    )
}
_MONTHS = {
    w: str(n)
    for names in (
        "january february march april may june july august september october november december",
        "jan feb mar apr may jun jul aug sep oct nov dec",
    )
    for n, w in enumerate(names.split(), start=1)
}
_MONTHS["sept"] = "9"
# A unit after a number, by what it measures: "5 km" and "5 miles" differ, "5 km" and "5 kg" are
# not the same fact at all (left to the verifier).
_UNITS = {
    word: (dimension, canonical)
    for dimension, groups in {
        "length": "km kilometre kilometres kilometer kilometers|mile miles mi|m metre metres meter meters|"
        "cm centimetre centimetres centimeter centimeters|mm|ft foot feet|yard yards|inch inches",
        "mass": "kg kilogram kilograms kilo kilos|g gram grams|tonne tonnes ton tons|lb lbs",
        "time": "second seconds|minute minutes|hour hours|day days|week weeks|month months|year years|"
        "decade decades|century centuries",
        "scale": "hundred hundreds|thousand thousands|million millions|billion billions|trillion trillions",
        "share": "percent|percentage",
        "money": "dollar dollars usd|euro euros eur",
    }.items()
    for group in groups.split("|")
    for canonical in [group.split()[0]]
    for word in group.split()
}
# Words that say a direction on an axis: the opposite word on the same axis says the opposite.
_POLAR = {
    word: (axis, sign)
    for axis, sides in {
        "amount": (
            "more greater larger bigger higher most largest biggest highest greatest",
            "less fewer smaller lower least smallest lowest fewest",
        ),
        "time": ("before earlier prior", "after later"),
        "change": (
            "rose risen rise rises rising increased increase increases increasing grew grow grows growing "
            "gained climbed",
            "fell fallen fall falls falling decreased decrease decreases decreasing declined decline declines "
            "declining dropped drop drops dropping shrank shrunk",
        ),
        "outcome": ("won win wins winning defeated beat", "lost lose loses losing"),
        "order": ("first earliest", "last latest final"),
        "position": ("above", "below"),
        "extreme": ("maximum", "minimum"),
    }.items()
    for sign, words in zip("+-", sides, strict=True)
    for word in words.split()
}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_PERCENT = re.compile(r"%|\bper\s+cent\b", re.IGNORECASE)
_DIGIT_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")
_MAX_STRETCH = 3  # words on each side of a swap: a longer stretch says something else, not a quantity
_MIN_RESTATED = 0.6
_MIN_EQUAL_WORDS = 2  # content words and quantities both say, the swap aside


@dataclass(frozen=True, slots=True)
class _Read:
    words: list[str]
    features: list[frozenset[Feature]]
    plain: set[str]  # content words that are no quantity

    @property
    def values(self) -> frozenset[Feature]:
        return frozenset().union(*self.features)


def _number(word: str) -> str | None:
    if word in _CARDINALS:
        return _CARDINALS[word]
    if word in _TENS:
        return str(_TENS[word])
    tens, _, unit = word.partition("-")
    if tens in _TENS and unit in _CARDINALS and 0 < int(_CARDINALS[unit]) < 10:
        return str(_TENS[tens] + int(_CARDINALS[unit]))
    if word.isdigit():
        return word.lstrip("0") or "0"  # "07" is 7
    return word if any(c.isdigit() for c in word) else None


def _scaled(words: list[str]) -> list[str]:
    """A number and its scale as one number: "three hundred" and "300" say the same."""
    out: list[str] = []
    for word in words:
        scale = _SCALES.get(word)
        before = _number(out[-1]) if out else None
        if scale is not None and before is not None and _DECIMAL.fullmatch(before):
            value = float(before) * scale
            out[-1] = str(int(value)) if value.is_integer() else str(value)
        else:
            out.append(word)
    return out


def _read(text: str) -> _Read:
    """``text``'s content words and quantities, in order: function words would align by chance
    ("in" with a later "in") and pull the alignment off the fact."""
    text = _PERCENT.sub(" percent", _THOUSANDS.sub("", text))
    every = _scaled([w.lower() for w in tokens(text)])
    numbers = [_number(w) for w in every]
    words: list[str] = []
    features: list[frozenset[Feature]] = []
    for i, word in enumerate(every):
        found: set[Feature] = set()
        near_number = any(0 <= j < len(every) and numbers[j] is not None for j in (i - 1, i + 1))
        after_number = i > 0 and numbers[i - 1] is not None
        if (ordinal := _DIGIT_ORDINAL.fullmatch(word)) is not None:
            found.add(("ordinal", f"{ordinal[1]}th"))
        elif word in _ORDINALS:
            found.add(("ordinal", _ORDINALS[word]))
        elif (number := numbers[i]) is not None:
            found.add(("number", number))
        if word in _MONTHS and near_number:  # "may" is a month only beside a day or a year
            found.add(("month", _MONTHS[word]))
        if word in _UNITS and after_number:
            dimension, unit = _UNITS[word]
            found.add((f"unit:{dimension}", unit))
        if word in _POLAR:
            axis, sign = _POLAR[word]
            found.add((f"polar:{axis}", sign))
        if found or word not in FUNCTION_WORDS:
            words.append(word)
            features.append(frozenset(found))
    plain = {w for w, f in zip(words, features, strict=True) if not f}
    return _Read(words, features, plain)


def _restates(claim: _Read, sentence: _Read) -> bool:
    shared = len(claim.plain & sentence.plain)
    return bool(claim.plain) and shared >= min(2, len(claim.plain)) and shared >= _MIN_RESTATED * len(claim.plain)


def _run(read: _Read, start: int, end: int, *, from_end: bool) -> frozenset[Feature] | None:
    """The quantities of ``read.words[start:end]`` that stand next to its ``start`` (or its
    ``end``), up to the first word that is something else; None when there are none. A claim
    that stops mid-sentence ("... 31-10.") leaves its quantity beside the rest of the sentence
    ("... 24-10 to earn their third title."): the words next to the words both share align."""
    features = read.features[start:end]
    if from_end:
        features = features[::-1]
    run = list(itertools.takewhile(bool, features))[:_MAX_STRETCH]
    return frozenset().union(*run) if run else None


def _differ(said: frozenset[Feature], says: frozenset[Feature], claim: _Read, sentence: _Read) -> bool:
    for kind, value in said:
        others = {v for k, v in says if k == kind}
        # The sentence's value must be missing from the claim and the claim's from the
        # sentence: "from 5 to 7" restated "from 7 to 9" is a change, "5 and 7" as "7" is not.
        if (
            others
            and value not in {v for k, v in sentence.values if k == kind}
            and not others & {v for k, v in claim.values if k == kind}
        ):
            return True
    return False


def _swapped(claim: _Read, sentence: _Read) -> bool:
    """Whether, aligned, a stretch of quantities of the claim stands for other ones of the sentence."""
    opcodes = SequenceMatcher(None, claim.words, sentence.words, autojunk=False).get_opcodes()
    if sum(c_end - c_start for op, c_start, c_end, _, _ in opcodes if op == "equal") < _MIN_EQUAL_WORDS:
        return False
    for at, (op, c_start, c_end, s_start, s_end) in enumerate(opcodes):
        after_equal = at > 0 and opcodes[at - 1][0] == "equal"
        before_equal = at + 1 < len(opcodes) and opcodes[at + 1][0] == "equal"
        if op != "replace" or not (after_equal or before_equal):
            continue
        for from_end, beside_equal in ((False, after_equal), (True, before_equal)):
            said = _run(claim, c_start, c_end, from_end=from_end)
            says = _run(sentence, s_start, s_end, from_end=from_end)
            if beside_equal and said is not None and says is not None and _differ(said, says, claim, sentence):
                return True
    return False


def misstated_quantity(claim: str, block: str) -> tuple[int, int] | None:
    """Where in ``block`` the sentence is whose quantity ``claim`` misstates, or None."""
    said = _read(claim_text(claim))
    if not said.values:
        return None
    restated = [(s.span, read) for s in sentences(block) if _restates(said, read := _read(s.text))]
    if any(said.values <= read.values for _, read in restated):
        return None  # a sentence the claim restates holds every quantity it gives
    restated.sort(key=lambda r: -len(said.plain & r[1].plain))
    return next((span for span, read in restated if _swapped(said, read)), None)
