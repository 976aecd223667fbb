"""A pipeline may carry its own prompt template, and a search may carry its own pipeline: a
hostile template is refused with an OpenSearch-shaped 400 in well under a second, and the
server goes on serving."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import AnswerboxFactory

HOSTILE = {
    "huge string": "{{ 'x' * 10**9 }} {{ query }}",
    "huge number": "{{ 3 ** (10**6) }} {{ query }}",
    "nested loops": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}{{ query }}",
    "huge output": "{% for a in range(100000) %}{{ query }} and more words{% endfor %}",
    "huge template": "{{ query }}" + " " * 30_000,
}


def _pipeline(prompt: str) -> dict[str, object]:
    return {"request_processors": [{"llm_query_expansion": {"prompt": prompt}}]}


@pytest.mark.parametrize("template", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_templates_are_refused_quickly(answerbox: str, client: httpx.Client, template: str) -> None:
    started = time.monotonic()
    stored = client.put(f"{answerbox}/_search/pipeline/hostile", json=_pipeline(template))
    inline = client.post(f"{answerbox}/any/_search", json={"search_pipeline": _pipeline(template)})
    assert time.monotonic() - started < 2
    for response in (stored, inline):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "illegal_argument_exception" and "llm_query_expansion" in error["reason"]
        assert error["root_cause"][0]["type"] == "illegal_argument_exception"
    assert client.get(f"{answerbox}/_search/pipeline/hostile").status_code == 404
    assert client.get(f"{answerbox}/_answerbox/stats/search_pipeline").status_code == 200


def test_ordinary_arithmetic_and_loops_still_render(make_answerbox: AnswerboxFactory, client: httpx.Client) -> None:
    url = make_answerbox()
    template = "{% for i in range(3) %}{{ i ** 2 }}{% endfor %} {{ '-' * 3 }} {{ query }}"
    assert client.put(f"{url}/_search/pipeline/fine", json=_pipeline(template)).status_code == 200
