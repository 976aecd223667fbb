"""SearchBackend's alias lookup, through opensearch-py against the in-process cluster: as the
caller, cached briefly per caller and target, OpenSearch's errors mapped onto answerbox's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from answerbox.core.config import OpenSearchSettings
from answerbox.core.errors import UpstreamError
from answerbox.opensearch import Caller, OpenSearchClients

from tests.unit.fake_opensearch import FakeOpenSearch, basic

TENANT_A = {"term": {"tenant": "A"}}
ALICE = Caller.from_headers(basic("alice"))
BOB = Caller.from_headers(basic("bob"))


@pytest.fixture
def cluster() -> FakeOpenSearch:
    fake = FakeOpenSearch()
    fake.index_docs("docs", [{"tenant": "A"}, {"tenant": "B"}])
    fake.alias("docs", "tenant_a", filter=TENANT_A)
    return fake


@pytest.fixture
async def clients(cluster: FakeOpenSearch) -> AsyncIterator[OpenSearchClients]:
    opened = OpenSearchClients(OpenSearchSettings(), connection_class=cluster.connection())
    yield opened
    await opened.aclose()


async def test_aliases_are_read_as_the_caller(cluster: FakeOpenSearch, clients: OpenSearchClients) -> None:
    params = {"expand_wildcards": "open"}
    found = await clients.search.aliases(index="tenant_a", params=params, caller=ALICE)
    assert found == {"docs": {"aliases": {"tenant_a": {"filter": TENANT_A}}}}
    (sent,) = cluster.sent("/tenant_a/_alias", "GET")
    assert sent.params == params
    assert sent.headers["authorization"] == ALICE.as_dict()["authorization"]
    assert sent.user is None  # never the service's login


async def test_aliases_are_cached_per_caller_and_target(cluster: FakeOpenSearch, clients: OpenSearchClients) -> None:
    for caller, index in [(ALICE, "tenant_a"), (ALICE, "tenant_a"), (BOB, "tenant_a"), (ALICE, "docs")]:
        await clients.search.aliases(index=index, params={}, caller=caller)
    assert [(r.path, r.headers["authorization"]) for r in cluster.sent("/*/_alias")] == [
        ("/tenant_a/_alias", ALICE.as_dict()["authorization"]),
        ("/tenant_a/_alias", BOB.as_dict()["authorization"]),
        ("/docs/_alias", ALICE.as_dict()["authorization"]),
    ]


async def test_an_unknown_target_is_opensearchs_error_and_not_cached(
    cluster: FakeOpenSearch, clients: OpenSearchClients
) -> None:
    for _ in range(2):
        with pytest.raises(UpstreamError) as raised:
            await clients.search.aliases(index="nope", params={}, caller=ALICE)
        assert raised.value.status == 404
    assert len(cluster.sent("/nope/_alias")) == 2
