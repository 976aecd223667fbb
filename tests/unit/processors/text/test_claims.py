"""The verifier's inputs and its verdict on a passage: windows of whole sentences, the best
entailing window and the most contradicting one."""

from __future__ import annotations

from answerbox.processors.text.claims import answer_claim, entailments, evidence_windows, parse_claims

from tests.unit.fake_services import FakeVerifier

PASSAGE = "Dune was written by Frank Herbert. It was published in 1965. It is set on Arrakis."


def _texts(text: str, max_chars: int) -> list[str]:
    return [text[start:end] for start, end in evidence_windows(text, max_chars)]


def test_windows_are_whole_sentences_each_sharing_its_first_with_the_last_window() -> None:
    assert _texts(PASSAGE, 400) == [PASSAGE]
    assert _texts(PASSAGE, 60) == [
        "Dune was written by Frank Herbert. It was published in 1965.",
        "It was published in 1965. It is set on Arrakis.",
    ]
    # A sentence longer than the limit is a window alone; none is left out or repeated alone.
    assert _texts(PASSAGE, 10) == [
        "Dune was written by Frank Herbert.",
        "It was published in 1965.",
        "It is set on Arrakis.",
    ]
    assert evidence_windows("") == []


def test_the_answer_to_a_question_is_one_claim() -> None:
    assert answer_claim("Who wrote  Dune?", "Frank\nHerbert") == 'The answer to "Who wrote Dune?" is Frank Herbert.'


async def test_a_passage_entails_as_its_best_window_and_contradicts_as_its_worst() -> None:
    def judge(evidence: str, claim: str) -> tuple[float, float]:
        if "1965" in evidence and "1965" in claim:
            return 0.9, 0.05
        return (0.1, 0.8) if "Arrakis" in evidence else (0.2, 0.1)

    filler = " and more" * 30  # each sentence about 280 characters: a window of its own
    sentences = [f"Dune was written by Frank Herbert{filler}.", f"It was published in 1965{filler}."]
    text = " ".join([*sentences, f"It is set on Arrakis{filler}."])
    verifier = FakeVerifier(judge)
    (found,) = await entailments(verifier, [(text, "Dune came out in 1965.")])
    assert [len(batch) for batch in verifier.calls] == [3]  # one batch: every window
    assert (found.entailed, found.contradicted) == (0.9, 0.8)
    assert text[found.window[0] : found.window[1]] == sentences[1]
    assert text[found.contradicting[0] : found.contradicting[1]].startswith("It is set on Arrakis")
    assert await entailments(verifier, []) == []


def test_an_initial_or_an_abbreviation_ends_no_claim_unless_markers_follow_it() -> None:
    answer = "Running back C. J. Anderson ran 21 yards to St. Louis [1]. He moved to the U.S. [2] It rained."
    claims = parse_claims(answer)
    assert [(c.text, c.markers) for c in claims] == [
        ("Running back C. J. Anderson ran 21 yards to St. Louis [1].", [1]),
        ("He moved to the U.S. [2]", [2]),
        ("It rained.", []),
    ]
    assert [answer[c.start : c.end] for c in claims] == [c.text for c in claims]
    assert [answer[g.start : g.end] for c in claims for g in c.groups] == ["[1]", "[2]"]
