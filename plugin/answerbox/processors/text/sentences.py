"""A rule-based sentence splitter that keeps character offsets.

It cuts after ``.``, ``!``, ``?`` or ``…`` (plus closing quotes or brackets) when
whitespace and a capital letter or digit follow, and at blank lines. A lone ``.`` does
not end a sentence after a known abbreviation ("Dr.", "e.g."), an initial ("J. R. R.
Tolkien") or a dotted acronym ("U.S."); decimals ("3.14") never match because no space
follows the dot. The rare true sentence end after an abbreviation is missed on purpose:
a strip one sentence too long costs less than one cut mid-name.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["is_abbreviation", "sentence_spans"]

_LOOKBACK = 24
_CLOSERS = "\"'”’)]"
# A run of stops is matched from its first character only, and never given back: a text of
# 60,000 dots is one attempt, not one per dot, each scanning to the end (quadratic).
_END = re.compile(r"(?<![.!?…])([.!?…]++[\"'”’)\]]*+)\s+(?=[\"'“‘(\[]?[A-Z0-9])|\n[ \t]*\n")
_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft gen col lt sgt capt cmdr adm gov sen rep rev hon pres fr
    inc ltd co corp bros dept univ assn est approx vs etc al cf fig figs eq no nos vol vols pp
    ch sec art ed eds jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)


def is_abbreviation(text: str, dot: int) -> bool:
    """Whether the word ending at ``text[dot] == "."`` is an abbreviation, an initial or an acronym."""
    # Abbreviations are short: looking a few characters back keeps long texts linear.
    before = text[max(0, dot - _LOOKBACK) : dot]
    words = before.split()
    word = words[-1].lstrip("\"'“‘([") if words and not before[-1:].isspace() else ""
    if not word:
        return False
    return word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()) or bool(_ACRONYM.fullmatch(word))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence, whitespace trimmed; ``text[start:end]`` is the sentence."""
    cuts = [0]
    for match in _END.finditer(text):
        punctuation = match.group(1)
        if punctuation is None:
            cuts.append(match.start())
        elif punctuation.rstrip(_CLOSERS) != "." or not is_abbreviation(text, match.start(1)):
            cuts.append(match.end(1))
    cuts.append(len(text))
    spans = []
    for start, end in itertools.pairwise(cuts):
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            first = start + len(piece) - len(piece.lstrip())
            spans.append((first, first + len(stripped)))
    return spans
