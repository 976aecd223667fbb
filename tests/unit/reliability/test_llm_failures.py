"""An LLM that breaks the protocol degrades the expansion, never the search (a choice without a
message, a body that is not JSON), and a server that drips its reply a byte at a time (each
read is quick, the whole never ends) is cut off at the call's timeout. In-process: the
scripted LLM's app is the client's transport, the cluster the fake one. A stream chunk that
is not JSON needs the reader's snippet and stays in tests/reliability/test_llm_failures.py."""

from __future__ import annotations

import httpx2
import pytest
from answerbox.core.config import LLMSettings, Settings
from answerbox.core.errors import LLMTimeout
from answerbox.llm import LLMClient
from answerbox.prompts.library import PromptLibrary

from tests.support.scripted_llm import ScriptedLLM
from tests.unit.asgi import LLM_URL, in_process
from tests.unit.fake_opensearch import FakeOpenSearch

DOCS = [
    {"_id": "dune", "text": "Spice is mined on the desert planet Arrakis."},
    {"_id": "emma", "text": "A comedy of manners."},
]
EXPAND = {"request_processors": [{"llm_query_expansion": {"timeout_s": 5}}]}
BROKEN = {
    "no message": (
        b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
        b'"finish_reason": "stop"}]}',
        "the LLM sent a malformed reply (AttributeError)",
    ),
    "not json": (b"<html>502 Bad Gateway</html>", "the LLM sent a malformed reply (JSONDecodeError)"),
}


@pytest.fixture
def cluster() -> FakeOpenSearch:
    cluster = FakeOpenSearch()
    cluster.index_docs("books", DOCS)
    return cluster


@pytest.mark.parametrize(("reply", "complaint"), BROKEN.values(), ids=BROKEN.keys())
async def test_a_malformed_completion_falls_back(cluster: FakeOpenSearch, reply: bytes, complaint: str) -> None:
    llm = ScriptedLLM(raw=reply)
    async with in_process(cluster=cluster, llm_app=llm.app()) as client:
        response = await client.post(
            "/books/_search", json={"query": {"match": {"text": "spice"}}, "search_pipeline": EXPAND}
        )
    assert response.status_code == 200, response.text
    assert [h["_id"] for h in response.json()["hits"]["hits"]] == ["dune"]
    report = response.json()["ext"]["answerbox"]
    assert report["query_expansion"]["fallback"] is True
    (warning,) = report["warnings"]
    assert complaint in warning
    assert len(llm.calls) == 1


async def test_a_dripping_server_is_cut_off_at_the_timeout() -> None:
    """The client's read timeout never fires (each byte comes quickly): the whole reply is bounded."""
    llm = ScriptedLLM(drip_s=0.05)  # the ~300-byte reply would take 15 s
    settings = LLMSettings(base_url=LLM_URL, timeout_s=0.1)
    client = LLMClient(settings, PromptLibrary(Settings().templates_dir), transport=httpx2.ASGITransport(app=llm.app()))
    try:
        with pytest.raises(LLMTimeout, match=r"^the LLM did not answer within 0\.1s$"):
            await client.complete([{"role": "user", "content": "Where is spice mined?"}])
    finally:
        await client.aclose()
    assert len(llm.calls) == 1
