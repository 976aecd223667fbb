"""The follow-up bench's rule (``bench/followup_pairs.py``) on a paragraph written here, not the data file."""

from __future__ import annotations

from bench.followup_pairs import entities, follow_ups, pronoun_follow_up, sample_pairs
from onnx_models.data.squad import Paragraph, Question


def _question(id: str, text: str, answer: str) -> Question:
    return Question(id=id, text=text, answers=(answer,), answer_starts=(0,))


def _paragraph(id: str, *questions: Question) -> Paragraph:
    return Paragraph(
        id=id, article="dev/Super_Bowl_50", context="Super Bowl 50 was played at Levi's Stadium.", questions=questions
    )


SUPER_BOWL = _paragraph(
    "dev/0/0",
    _question("q1", "Which NFL team represented the AFC at Super Bowl 50?", "Denver Broncos"),
    _question("q2", "Where did Super Bowl 50 take place?", "Levi's Stadium"),
    _question("q3", "Who won the game?", "Denver Broncos"),
)


def _texts(question: str) -> list[str]:
    return [e.text for e in entities(question)]


def test_entities_are_runs_of_capitalised_words_less_a_first_function_word() -> None:
    assert _texts("Which NFL team represented the AFC at Super Bowl 50?") == ["NFL", "AFC", "Super Bowl 50"]
    assert _texts("The Denver Broncos beat whom in the U.S.?") == ["Denver Broncos", "U.S."]
    assert _texts("In 2015, who coached Carolina?") == ["Carolina"]  # a number alone is no entity


def test_a_possessive_is_kept_apart_and_ends_the_entity() -> None:
    (beyonce, band) = entities("When did Beyonce's Destiny's Child start?")[:2]
    assert (beyonce.text, beyonce.possessive is not None, band.text) == ("Beyonce", True, "Destiny")
    (broncos,) = entities("Who was the Denver Broncos' coach?")
    assert (broncos.text, broncos.possessive is not None) == ("Denver Broncos", True)


def test_the_follow_up_says_it_or_its_and_takes_the_article_along() -> None:
    assert (
        pronoun_follow_up("Where did Super Bowl 50 take place?", entities("Where did Super Bowl 50 take place?")[0])
        == "Where did it take place?"
    )
    assert (
        pronoun_follow_up(
            "Who coached the Denver Broncos in 2015?", entities("Who coached the Denver Broncos in 2015?")[0]
        )
        == "Who coached it in 2015?"
    )
    possessive = "Beyonce's first album came out when?"
    assert pronoun_follow_up(possessive, entities(possessive)[0]) == "Its first album came out when?"


def test_no_follow_up_when_it_is_too_short_or_still_names_the_entity() -> None:
    assert pronoun_follow_up("Who is Beyonce?", entities("Who is Beyonce?")[0]) is None
    twice = "Did Tesla meet Edison before Tesla left?"
    assert pronoun_follow_up(twice, entities(twice)[0]) is None


def test_one_pair_a_paragraph_the_first_that_qualifies() -> None:
    (pair,) = follow_ups([SUPER_BOWL])
    assert (pair.first.id, pair.entity, pair.original_follow_up) == (
        "q1",
        "Super Bowl 50",
        "Where did Super Bowl 50 take place?",
    )
    assert pair.follow_up == _question("q2/followup", "Where did it take place?", "Levi's Stadium")
    assert pair.paragraph is SUPER_BOWL


def test_the_second_question_may_come_before_the_first() -> None:
    paragraph = _paragraph(
        "dev/0/1",
        _question("a", "Where did Super Bowl 50 take place?", "Levi's Stadium"),
        _question("b", "Which team won Super Bowl 50?", "Denver Broncos"),
    )
    (pair,) = follow_ups([paragraph])
    assert (pair.first.id, pair.follow_up.id) == ("a", "b/followup")
    assert pair.follow_up.text == "Which team won it?"


def test_a_name_used_as_a_modifier_makes_no_pair() -> None:
    paragraph = _paragraph(
        "dev/0/2",
        _question("a", "What share of German schools are private?", "7%"),
        _question("b", "How many German students attend private schools?", "750,000"),
    )
    assert follow_ups([paragraph]) == []


def test_the_sample_is_seeded() -> None:
    paragraphs = [
        _paragraph(f"dev/0/{i}", *(_question(f"{q.id}-{i}", q.text, q.answers[0]) for q in SUPER_BOWL.questions))
        for i in range(6)
    ]
    assert [p.follow_up.id for p in sample_pairs(paragraphs, 3, 7)] == [
        p.follow_up.id for p in sample_pairs(paragraphs, 3, 7)
    ]
    assert len(sample_pairs(paragraphs, 3, 7)) == 3
    assert sample_pairs(paragraphs, 10, 7) == follow_ups(paragraphs)
