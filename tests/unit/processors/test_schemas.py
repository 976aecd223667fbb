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
            assert obj["additionalProperties"] is False and obj["required"] == list(obj["properties"])
    assert KEYWORDS_SCHEMA.body["properties"]["keywords"]["maxItems"] == 3
