"""The corrective search's keywords: read from the LLM's reply (text or JSON), or taken from the question."""

from __future__ import annotations

from answerbox.processors.retrieval_evaluator.keywords import fallback_keywords, parse_keywords, read_keywords


def test_keywords_from_the_llm_and_without_it() -> None:
    question = "Where was Henry Feilden born, and what was his occupation and his extra job?"
    completion = "\n query: Henry Feilden, occupation, born, extra\nquestion: x"
    assert parse_keywords(completion, question) == ["Henry Feilden", "occupation", "born"]
    # Keywords that share no content word with the question are not extracted from it.
    assert parse_keywords("query: Billy Carlson, the, Henry", question) == ["Henry"]
    assert parse_keywords("   ", question) == []
    assert fallback_keywords("In what city was Billy Carlson born?") == ["city", "Billy Carlson born"]


def test_json_keywords_keep_the_words_from_the_question() -> None:
    question = "In what city was Billy Carlson born?"
    reply = '{"keywords": ["city, Billy Carlson", "born", "Paris", "city"]}'
    assert read_keywords(reply, question, structured=True) == ["city", "Billy Carlson", "born"]
    # Cut off at max_tokens, or prose: the text format's reading.
    for reply in ('{"keywords": ["city", "Bil', "query: city, Billy Carlson, born"):
        assert read_keywords(reply, question, structured=True) == parse_keywords(reply, question)
