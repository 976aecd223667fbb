"""llm.structured_output: which response_format the client sends, found by one probe in auto
mode and remembered; against the scripted OpenAI-compatible server, in-process (its ASGI app
as the client's transport)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from answerbox.core.config import LLMSettings, Settings
from answerbox.core.errors import LLMError
from answerbox.llm import LLMClient
from answerbox.llm.structured import Schema, object_schema, string
from answerbox.prompts.library import PromptLibrary

from tests.support.scripted_llm import ScriptedLLM
from tests.unit.asgi import LLM_URL

ANSWER = Schema("answer", object_schema(answer={"type": "string"}))
CAPPED = Schema("answer", object_schema(answer=string(20)))
MESSAGES = [{"role": "user", "content": "Who wrote Dune?"}]


@pytest.fixture
def scripted() -> ScriptedLLM:
    return ScriptedLLM()


def _client(scripted: ScriptedLLM, **settings: Any) -> LLMClient:
    transport = httpx2.ASGITransport(app=scripted.app())
    return LLMClient(
        LLMSettings(base_url=LLM_URL, **settings), PromptLibrary(Settings().templates_dir), transport=transport
    )


async def test_auto_probes_once_for_concurrent_first_calls_and_remembers(scripted: ScriptedLLM) -> None:
    scripted.formats, scripted.replies = ("json_schema", "json_object"), ['{"answer": "Frank Herbert"}']
    client = _client(scripted)
    try:
        assert await asyncio.gather(*(client.structured() for _ in range(5))) == [True] * 5
        for _ in range(2):
            assert (await client.complete(MESSAGES, schema=ANSWER)).text == '{"answer": "Frank Herbert"}'
        assert await client.structured()
    finally:
        await client.aclose()
    assert [p["response_format"]["type"] for p in scripted.probes] == ["json_schema"]
    expected = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER.body, "strict": True}}
    assert [c["response_format"] for c in scripted.calls] == [expected, expected]


@pytest.mark.parametrize("refusal_status", [400, 422, 500], ids=["vllm", "validation", "llama-cpp-python"])
async def test_a_server_refusing_json_schema_gets_json_object_with_the_schema(
    scripted: ScriptedLLM, refusal_status: int
) -> None:
    scripted.formats, scripted.refusal_status = ("json_object",), refusal_status
    client = _client(scripted)
    try:
        assert await client.structured()
        await client.complete(MESSAGES, schema=ANSWER)
    finally:
        await client.aclose()
    assert [p["response_format"]["type"] for p in scripted.probes] == ["json_schema", "json_object"]
    assert scripted.calls[0]["response_format"] == {"type": "json_object", "schema": ANSWER.body}


async def test_a_server_taking_neither_form_is_remembered_as_none(scripted: ScriptedLLM) -> None:
    client = _client(scripted)
    try:
        assert not await client.structured()
        assert not await client.structured()
        await client.complete(MESSAGES, schema=ANSWER)
    finally:
        await client.aclose()
    assert len(scripted.probes) == 2
    assert "response_format" not in scripted.calls[0]


async def test_none_sends_no_probe_and_no_response_format(scripted: ScriptedLLM) -> None:
    scripted.formats = ("json_schema", "json_object")
    client = _client(scripted, structured_output="none")
    try:
        assert not await client.structured()
        await client.complete(MESSAGES, schema=ANSWER)
    finally:
        await client.aclose()
    assert scripted.probes == []
    assert "response_format" not in scripted.calls[0]


async def test_a_probe_without_an_answer_decides_nothing(scripted: ScriptedLLM) -> None:
    """A server that is overloaded at the first probe is probed again, not written off."""
    scripted.formats, scripted.fail, scripted.fail_status = ("json_object",), True, 503
    client = _client(scripted)
    try:
        assert not await client.structured()
        scripted.fail = False
        assert await client.structured()
    finally:
        await client.aclose()
    assert [p["response_format"]["type"] for p in scripted.probes] == ["json_schema", "json_schema", "json_object"]


@pytest.mark.parametrize("form", ["json_schema", "json_object"])
async def test_string_caps_are_sent_where_the_server_takes_them(scripted: ScriptedLLM, form: str) -> None:
    scripted.formats, scripted.replies = (form,), ['{"answer": "Frank Herbert"}']
    client = _client(scripted, structured_output=form)
    try:
        for _ in range(2):
            assert (await client.complete(MESSAGES, schema=CAPPED)).text == '{"answer": "Frank Herbert"}'
    finally:
        await client.aclose()
    assert [c["response_format"] for c in scripted.calls] == [response_format_of(form, CAPPED)] * 2


@pytest.mark.parametrize("refusal_status", [400, 422, 500])
async def test_a_server_refusing_string_caps_gets_the_schema_without_them_from_then_on(
    scripted: ScriptedLLM, refusal_status: int
) -> None:
    """OpenAI's strict mode documents no maxLength: the first refusal is retried uncapped and remembered."""
    scripted.formats, scripted.caps, scripted.refusal_status = ("json_schema",), False, refusal_status
    scripted.replies = ['{"answer": "Frank Herbert"}']
    client = _client(scripted)
    try:
        for _ in range(2):
            assert (await client.complete(MESSAGES, schema=CAPPED)).text == '{"answer": "Frank Herbert"}'
    finally:
        await client.aclose()
    sent = [c["response_format"]["json_schema"]["schema"] for c in scripted.calls]
    assert sent == [CAPPED.body, ANSWER.body, ANSWER.body]  # refused once, then never capped again


async def test_an_overloaded_server_is_not_taken_to_refuse_caps(scripted: ScriptedLLM) -> None:
    scripted.formats, scripted.fail, scripted.fail_status = ("json_schema",), True, 503
    client = _client(scripted, structured_output="json_schema")
    try:
        with pytest.raises(LLMError):
            await client.complete(MESSAGES, schema=CAPPED)
        scripted.fail = False
        await client.complete(MESSAGES, schema=CAPPED)
    finally:
        await client.aclose()
    assert [c["response_format"]["json_schema"]["schema"] for c in scripted.calls] == [CAPPED.body, CAPPED.body]


def response_format_of(form: str, schema: Schema) -> dict[str, Any]:
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": schema.name, "schema": schema.body, "strict": True}}
    return {"type": "json_object", "schema": schema.body}
