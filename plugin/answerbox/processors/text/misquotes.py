"""A claim that copies a sentence of its block with a name, a number or the answer changed: a misquote.

A small LLM often writes its answer by copying the sentence that holds it; when it copies one
fact wrong (another name or date of the same passage in the answer's place), every word of the
claim is still in the block, so the citation check's shared words pass it, and a relevance score
rates it as high as the true sentence. This finds that case by alignment, with no model:

- the claim's *sentence* is the block's sentence sharing the most content words with it; the
  claim restates it when they share at least half of the claim's and half of the sentence's;
- a *fact* is a number (in digits or in words), or a name (a word with a capital inside a
  sentence, or one the block writes so there);
- the claim misquotes that sentence when, aligned word by word, a stretch of the claim whose
  content words are all facts the sentence does not hold stands where the sentence holds a fact
  the claim does not, and no sentence of the block holds every fact of the claim;
- or when it copies a sentence word for word but for one number, whatever else the sentence
  says ("106 receptions ... another 106 yards" for "105 receptions ... another 106 yards");
- or when such a stretch, made of facts the sentence does not hold or of words the block says
  elsewhere (the passage's other answers: "hands on" for "gold medal"), stands where the
  sentence holds words of ``answer`` (the reader's answer to the question in this block) that
  the claim lacks, and no sentence of the block holds every content word of the claim. That
  case needs no capital: what the question asks is a fact whatever its case.

Words of the question never count as changed: a claim may restate what was asked. A claim that
says a fact in its own words, without restating a sentence, is left to the claim verifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

from answerbox.processors.text.bounded import claim_text, sentences
from answerbox.processors.text.copies import said_words
from answerbox.processors.text.words import FUNCTION_WORDS, terms, tokens

__all__ = ["facts_of", "misquoted", "names_in", "split_sentences"]


@dataclass(frozen=True, slots=True)
class _Sentence:
    span: tuple[int, int]
    words: list[str]  # lowercased, in order
    content: set[str]
    facts: set[str]


# Numbers in words: "won seven" for "won 31-24" is a number changed.
_NUMBER_WORDS = frozenset(
    """
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million billion trillion first second third fourth fifth sixth seventh eighth ninth tenth
    half dozen
    """.split()
)


def split_sentences(text: str) -> list[tuple[tuple[int, int], list[str]]]:
    """Each sentence of ``text``: where it is, and its words as written (bounded: ``bounded``)."""
    return [(sentence.span, tokens(sentence.text)) for sentence in sentences(text)]


def names_in(sentences: list[tuple[tuple[int, int], list[str]]]) -> set[str]:
    """The words written with a capital inside their sentence (``Paris``, ``iPhone``,
    ``post-World``); a sentence's first word tells nothing."""
    found = {w.lower() for _, words in sentences for w in words[1:] if not w.islower()}
    return {w for w in found if not w.isdigit()} - FUNCTION_WORDS


def facts_of(words: list[str], names: set[str]) -> set[str]:
    return {w for w in words if any(c.isdigit() for c in w) or w in names or w in _NUMBER_WORDS}


def _sentence(span: tuple[int, int], written: list[str], names: set[str]) -> _Sentence:
    words = [w.lower() for w in written]
    return _Sentence(span, words, set(words) - FUNCTION_WORDS, facts_of(words, names))


def _number(word: str) -> bool:
    return any(c.isdigit() for c in word) or word in _NUMBER_WORDS


def _one_number_changed(claim: str, block: str) -> tuple[int, int] | None:
    """A copy of a sentence (as ``copies`` reads one) but for one number: changed, though the
    sentence may say the claim's number elsewhere ("106 receptions ... another 106 yards")."""
    said = said_words(claim)
    for sentence in sentences(block):
        own = said_words(sentence.text)
        if len(own) != len(said):
            continue
        changed = [(a, b) for a, b in zip(said, own, strict=True) if a != b]
        if len(changed) == 1 and all(map(_number, changed[0])):
            return sentence.span
    return None


def misquoted(claim: str, block: str, question: str = "", answer: str = "") -> tuple[int, int] | None:
    """Where in ``block`` the sentence is that ``claim`` misquotes, or None when it does not."""
    claim = claim_text(claim)
    if (copied_but_one := _one_number_changed(claim, block)) is not None:
        return copied_but_one
    split = split_sentences(block)
    names = names_in(split) | names_in(split_sentences(claim))
    asked = terms(question)
    words = [w.lower() for w in tokens(claim)]
    content = set(words) - FUNCTION_WORDS
    sentences = [_sentence(span, written, names) for span, written in split]
    if not content or not sentences:
        return None
    said = max(sentences, key=lambda s: len(content & s.content))
    shared = 2 * len(content & said.content)
    if shared < len(content) or shared < len(said.content):
        return None  # the claim does not restate one sentence
    claim_facts = facts_of(words, names) - asked
    # Where the block says every fact of the claim together, no changed name or number is a
    # misquote; where it says every content word, nothing is.
    by_facts = not any(claim_facts <= set(s.words) for s in sentences)
    by_answer = not any(content - asked <= s.content for s in sentences)
    new_facts = claim_facts - set(said.words)
    lost_facts = said.facts - set(words) - asked
    lost_answer = terms(answer) - set(words) - asked
    elsewhere = {w for s in sentences if s is not said for w in s.content} - set(said.words)
    opcodes = SequenceMatcher(None, words, said.words, autojunk=False).get_opcodes()
    for op, c_start, c_end, s_start, s_end in opcodes:
        changed = set(words[c_start:c_end]) - FUNCTION_WORDS - asked
        if op != "replace" or not changed:
            continue
        lost = set(said.words[s_start:s_end])
        if by_facts and changed <= new_facts and lost_facts & lost:
            return said.span
        if by_answer and changed <= new_facts | elsewhere and lost_answer & lost:
            return said.span
    return None
