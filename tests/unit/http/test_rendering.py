"""A ``filter_path`` past what any client writes is refused before a pipeline runs: a filter's cost
grows with its paths and their ``**``s times the answer's fields. How a filter applies is
tests/http/test_rendering.py's, against osmem-server."""

from __future__ import annotations

import tracemalloc

import pytest
from answerbox.core.errors import InvalidRequest
from answerbox.http.rendering import MAX_ANY_LEVELS, MAX_FILTER_PATHS, MAX_PATH_SEGMENTS, Rendering

from tests.unit.asgi import in_process, opensearch_error

PIPELINE_SEARCH = {"query": {"match_all": {}}, "search_pipeline": {"request_processors": []}}


@pytest.mark.parametrize(
    "filter_path",
    [
        ",".join(f"f{i}" for i in range(MAX_FILTER_PATHS + 1)),
        ".".join(["a"] * (MAX_PATH_SEGMENTS + 1)),
        ".".join(["**", "a"] * (MAX_ANY_LEVELS + 1)),
    ],
    ids=["paths", "segments", "any-levels"],
)
async def test_a_filter_path_past_the_limits_is_refused(filter_path: str) -> None:
    with pytest.raises(InvalidRequest):
        Rendering.split({"filter_path": filter_path})
    async with in_process() as client:
        response = await client.post("/books/_search", params={"filter_path": filter_path}, json=PIPELINE_SEARCH)
    assert "filter_path" in opensearch_error(response, 400, "illegal_argument_exception")


def test_filters_at_the_limits_are_taken() -> None:
    at_limits = [
        ",".join(f"f{i}" for i in range(MAX_FILTER_PATHS)),
        ".".join(["a"] * MAX_PATH_SEGMENTS),
        ".".join(["**", "a"] * MAX_ANY_LEVELS),
        "**.**.**.a",  # one level wildcard, written three times
    ]
    for filter_path in at_limits:
        rendering, rest = Rendering.split({"filter_path": filter_path, "pretty": "false"})
        assert rendering.filters
        assert not rendering.pretty
        assert rest == {}
    assert Rendering.split({"filter_path": "**.**.a"})[0] == Rendering.split({"filter_path": "**.a"})[0]


def test_distinct_wildcard_filters_keep_nothing_behind() -> None:
    """A compiled pattern kept per filter_path (``functools.cache``) grew the server by 35 MB over
    60 searches and never shrank: a caller's filters now leave nothing once their answer is written."""
    answer = {"hits": {"hits": [{"_id": "dune", "_source": {"title": "Dune"}}]}}

    def render(n: int) -> None:
        rendering, _ = Rendering.split({"filter_path": f"hits.hits.*{n:04d}*{'x' * 2000}*"})
        assert rendering.filtered(answer) == {}

    render(0)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for n in range(1, 1001):
            render(n)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 100_000  # the 1,000 patterns alone are 2 MB
