"""Check: what the rules settle comes before the model. A copy is entailed with no model call; a
quantity changed is contradicted whatever the model scores; a doubt (names exchanged) stays
unverified whatever the evaluator scores, and only a verifier can entail it; what they leave
open is the model's. Every verdict is entailed, contradicted or unverified."""

from __future__ import annotations

from collections.abc import Sequence

from answerbox.processors.answering.evidence import Evidence
from answerbox.processors.cited_answer.citations import Check, Support
from answerbox.processors.text.claims import parse_claims
from answerbox.processors.text.spans import Span

from tests.support.super_bowl import BLOCK as SB
from tests.support.super_bowl import TITLE

GAME = (
    "Super Bowl 50 was an American football game. The game was played on February 7, 2016, at Levi's "
    "Stadium in the San Francisco Bay Area at Santa Clara, California."
)
PLAYED = GAME[GAME.index("The game") :]
BLOCK = Evidence(
    index="i", id="sb50", field="text", excerpts=(Span("i", "sb50", "text", 0, len(GAME), GAME),), rank=0, marker=1
)


class Scorer:
    """Scores every claim 0.9 against every block, and remembers what it was asked; ``about``:
    as the evaluator does (relevance), else as the verifier (entailment)."""

    def __init__(self, *, about: bool = False) -> None:
        self.asked: list[str] = []
        self._about = about

    async def __call__(self, claim: str, texts: Sequence[str]) -> list[Support]:
        self.asked.append(claim)
        return [Support(0.9, about=self._about) for _ in texts]


def _check(scorer: Scorer | None) -> Check:
    return Check(question="When was Super Bowl 50 played?", scorer=scorer, min_support=0.5, min_coverage=0.5)


async def test_a_copy_is_entailed_without_asking_the_model() -> None:
    scorer = Scorer()
    (verdict,) = await _check(scorer).cited(parse_claims(f"{PLAYED.rstrip('.')} [1]."), {1: BLOCK})
    assert (verdict.verdict, verdict.support, scorer.asked) == ("entailed", 1.0, [])
    assert verdict.quote is not None
    assert verdict.quote.text == PLAYED


async def test_a_changed_date_is_contradicted_though_the_model_scores_it_high() -> None:
    scorer = Scorer()
    claim = "The game was played on February 9, 2016 [1]."
    (verdict,) = await _check(scorer).cited(parse_claims(claim), {1: BLOCK})
    assert (verdict.verdict, verdict.support) == ("contradicted", 0.9)
    assert verdict.quote is not None
    assert verdict.quote.text == PLAYED


async def test_what_the_rules_leave_open_is_the_models_and_without_one_unverified() -> None:
    claim = parse_claims("The final drew a record crowd at Levi's Stadium [1].")
    (held,) = await _check(Scorer()).cited(claim, {1: BLOCK})
    assert held.verdict == "unverified"  # its words are not in the block (coverage)
    (copy, open_) = await _check(None).cited(parse_claims(f"{PLAYED} [1] {claim[0].text}"), {1: BLOCK})
    assert (copy.verdict, copy.support) == ("entailed", 1.0)  # no model needed
    assert (open_.verdict, open_.support) == ("unverified", None)


async def test_names_exchanged_stay_unverified_under_a_relevance_score_but_a_verifier_may_entail() -> None:
    won = Evidence(
        index="i", id="sb50", field="text", excerpts=(Span("i", "sb50", "text", 0, len(SB), SB),), rank=0, marker=1
    )
    claim = parse_claims("The Carolina Panthers defeated the Denver Broncos [1].")
    (about,) = await _check(Scorer(about=True)).cited(claim, {1: won})
    assert (about.verdict, about.support) == ("unverified", 0.9)
    assert about.quote is not None
    assert about.quote.text == TITLE
    (verifier,) = await _check(Scorer()).cited(claim, {1: won})
    assert verifier.verdict == "entailed"  # the rules doubt; the verifier reads it


async def test_a_doubt_stands_where_no_model_scores_it() -> None:
    # The evaluator unavailable: the check's min_support falls to -1, yet a doubt stays unverified.
    won = Evidence(
        index="i", id="sb50", field="text", excerpts=(Span("i", "sb50", "text", 0, len(SB), SB),), rank=0, marker=1
    )
    check = Check(question="When was Super Bowl 50 played?", scorer=None, min_support=-1.0, min_coverage=0.5)
    (verdict,) = await check.cited(parse_claims("The Carolina Panthers defeated the Denver Broncos [1]."), {1: won})
    assert (verdict.verdict, verdict.support) == ("unverified", None)
