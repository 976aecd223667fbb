"""Claims that share their words with a block yet may say something else: unverified.

Without the claim verifier, the citation check reads a relevance score and the words a claim
shares with its block: what the claim is *about*, not what it *says*. Four kinds of claim
pass that and still misstate the block; the rules make them ``unverified`` (not contradicted:
no rule can tell what the block says instead), and a verifier, where one is loaded, decides them:

- *roles exchanged*: every content word of the claim is in one sentence of the block, but two
  of its names or numbers stand on the other sides of a word between them ("The Panthers
  defeated the Broncos" against "The Broncos defeated the Panthers"; a word repeated in either
  places nothing);
- *a clause appended*: the claim copies a sentence of the block word for word and adds words
  the block holds nowhere (", and ..." of another passage);
- *one stretch replaced*: the claim copies a sentence word for word but for one stretch of it,
  and the words alike are two thirds of each ("... won by the Panthers" for "... won by the
  Broncos"): a near-copy that says one thing otherwise, unless a rule found it contradicted.
  The question's words may stand in it only for words that say nothing ("he" for "Tesla");
- *another answer*: the claim restates the question (two thirds of its content words) and
  answers it with words that share none with the reader's answer in this block ("The answer
  to 'who won' is Carolina Panthers" where the reader reads "Denver Broncos").

Words of the question are never counted as reordered: a claim may restate what was asked.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from answerbox.processors.text.bounded import MAX_BLOCK_CHARS, claim_text, sentences
from answerbox.processors.text.copies import MIN_WORDS, said_words
from answerbox.processors.text.misquotes import facts_of, names_in, split_sentences
from answerbox.processors.text.words import CLAIM_STOPWORDS, FUNCTION_WORDS, QUESTION_WORDS, terms, tokens

__all__ = ["doubted"]


def _once(words: list[str]) -> dict[str, int]:
    """Each word that occurs once in ``words``, by its position: a repeated one places nothing."""
    seen: dict[str, int] = {}
    for at, word in enumerate(words):
        seen[word] = -1 if word in seen else at
    return {word: at for word, at in seen.items() if at >= 0}


def _exchanged(words: list[str], said: list[str], facts: set[str]) -> bool:
    """Whether two facts stand on the other sides of a word between them in ``words`` than in
    ``said`` ("A defeated B" for "B defeated A"); a phrase moved past no word that stays between
    ("on May 1 at X" for "at X on May 1") exchanges nothing."""
    claim, sentence = _once(words), _once(said)
    both = [(claim[w], sentence[w]) for w in claim.keys() & sentence.keys()]
    placed = [(c, s) for c, s in both if words[c] in facts]
    # A word between two exchanged facts has one of them before it in the claim and after it in
    # the sentence, and the other after it in the claim and before it in the sentence.
    return any(
        any(c < c_w and s > s_w for c, s in placed) and any(c > c_w and s < s_w for c, s in placed) for c_w, s_w in both
    )


def _reordered(claim: str, block: str, question: str) -> tuple[int, int] | None:
    written = tokens(claim)
    words = [w.lower() for w in written]
    content = set(words) - FUNCTION_WORDS
    split = split_sentences(block)
    facts = facts_of(words, names_in(split) | names_in(split_sentences(claim))) - terms(question)
    if len(facts) < 2:
        return None
    for span, sentence in split:
        said = [w.lower() for w in sentence]
        if content <= set(said) and _exchanged(words, said, facts):
            return span
    return None


def _within(part: list[str], whole: list[str]) -> int | None:
    """Where ``part`` stands in ``whole`` word for word, or None."""
    return next((i for i in range(len(whole) - len(part) + 1) if whole[i : i + len(part)] == part), None)


def _appended(claim: str, block: str, question: str) -> tuple[int, int] | None:
    said = said_words(claim)
    asked, held = terms(question), terms(block[:MAX_BLOCK_CHARS])
    for sentence in sentences(block):
        own = said_words(sentence.text)
        at = _within(own, said) if len(own) >= MIN_WORDS and not sentence.clipped else None
        if at is not None and set(said[:at] + said[at + len(own) :]) - FUNCTION_WORDS - asked - held:
            return sentence.span
    return None


def _replaced(claim: str, block: str, question: str) -> tuple[int, int] | None:
    said, asked = said_words(claim), terms(question)
    for sentence in sentences(block):
        own = said_words(sentence.text)
        if 2 * max(len(said), len(own)) > 3 * min(len(said), len(own)):
            continue  # the words alike cannot be two thirds of each: no alignment needed
        changed = [op for op in SequenceMatcher(None, said, own, autojunk=False).get_opcodes() if op[0] != "equal"]
        if len(changed) != 1 or changed[0][0] != "replace":
            continue
        _, c_start, c_end, s_start, s_end = changed[0]
        kept = len(said) - (c_end - c_start)  # the words both say alike: two thirds of each
        # New words other than the question's, or words of the sentence the claim lost: "by
        # Super Bowl XLVIII" for "by John Fox" is no restatement of "Who coached ... XLVIII?".
        new = set(said[c_start:c_end]) - FUNCTION_WORDS - asked
        lost = set(own[s_start:s_end]) - FUNCTION_WORDS - set(said)
        if kept >= MIN_WORDS and 3 * kept >= 2 * max(len(said), len(own)) and (new or lost):
            return sentence.span
    return None


def _other_answer(claim: str, block: str, question: str, answer: str) -> tuple[int, int] | None:
    asked, answered = terms(question, QUESTION_WORDS), terms(answer)
    said = terms(claim, CLAIM_STOPWORDS)
    if len(asked) < 2 or not answered or 3 * len(asked & said) < 2 * len(asked):
        return None
    stated = said - terms(question, CLAIM_STOPWORDS)
    if not stated or stated & answered:
        return None
    found = sentences(block)  # quoted where the reader found its answer
    return next((s.span for s in found if answered <= terms(s.text)), found[0].span if found else (0, 0))


def doubted(claim: str, block: str, question: str = "", answer: str = "") -> tuple[int, int] | None:
    """The sentence of ``block`` that ``claim`` may misstate though it shares its words, or None;
    ``answer``: the reader's answer to ``question`` in the block."""
    claim = claim_text(claim)
    return (
        _reordered(claim, block, question)
        or _appended(claim, block, question)
        or _replaced(claim, block, question)
        or _other_answer(claim, block, question, answer)
    )
