"""The JSON schemas answerbox asks structured-output endpoints for."""

from __future__ import annotations

from typing import Any

from answerbox.processors.chain_of_query.parser import CHAIN_SCHEMA
from answerbox.processors.cited_answer.citations import ANSWER_SCHEMA
from answerbox.processors.retrieval_evaluator.keywords import KEYWORDS_SCHEMA


def test_the_schemas_are_strict_and_capped() -> None:
    """OpenAI's strict mode wants every property required and no others; a 135M model wants caps."""

    def objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
        found = [schema] if schema.get("type") == "object" else []
        children = [*schema.get("properties", {}).values(), schema.get("items", {})]
        return found + [o for child in children if child for o in objects(child)]

    for schema in (CHAIN_SCHEMA, KEYWORDS_SCHEMA, ANSWER_SCHEMA):
        for obj in objects(schema.body):
            assert obj["additionalProperties"] is False
            assert obj["required"] == list(obj["properties"])
    assert KEYWORDS_SCHEMA.body["properties"]["keywords"]["maxItems"] == 3


def test_the_chain_caps_its_strings_and_drops_the_caps_on_demand() -> None:
    """A small model that repeats itself must close its first node within max_tokens."""
    node = CHAIN_SCHEMA.body["properties"]["nodes"]["items"]["properties"]
    assert CHAIN_SCHEMA.capped
    assert node["query"]["maxLength"] > 0
    assert node["answer"]["maxLength"] > 0
    uncapped = CHAIN_SCHEMA.uncapped()
    assert not uncapped.capped
    assert uncapped.name == CHAIN_SCHEMA.name
    assert uncapped.body["properties"]["nodes"]["items"]["properties"]["query"] == {"type": "string"}
    assert uncapped.body["properties"]["nodes"]["maxItems"] == CHAIN_SCHEMA.body["properties"]["nodes"]["maxItems"]
    assert not KEYWORDS_SCHEMA.capped
    assert KEYWORDS_SCHEMA.uncapped() == KEYWORDS_SCHEMA
