"""A body that came compressed (``Content-Encoding: gzip`` or ``deflate``) is read inflated,
within the size limit; any other encoding is left as it came. Which ``Accept-Encoding`` takes a
gzipped answer. Over real HTTP with opensearch-py's ``http_compress``: tests/http/test_compression.py."""

from __future__ import annotations

import gzip
import zlib

import pytest
from answerbox.core.config import Limits
from answerbox.core.errors import ParseError, RequestTooLarge
from answerbox.http.bodies import decoded
from answerbox.http.rendering import accepts_gzip
from starlette.requests import Request

BODY = b'{"query": {"match": {"text": "who wrote Dune"}}, "search_pipeline": "answers"}'
LIMITS = Limits(max_request_bytes=64 * 1024)


def _request(encoding: str | None) -> Request:
    headers = [(b"content-encoding", encoding.encode())] if encoding is not None else []
    return Request({"type": "http", "method": "POST", "path": "/_search", "headers": headers})


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "sent"),
    [
        ("gzip", gzip.compress(BODY)),
        ("x-gzip", gzip.compress(BODY)),
        (" GZIP ", gzip.compress(BODY)),
        ("deflate", zlib.compress(BODY)),
        ("deflate", _raw_deflate(BODY)),  # without zlib's header, as some clients send it
    ],
)
async def test_a_compressed_body_is_read_inflated(encoding: str, sent: bytes) -> None:
    assert await decoded(_request(encoding), sent, LIMITS) == BODY


async def test_a_large_compressed_body_is_inflated_in_a_worker_thread_alike() -> None:
    body = b'{"ids": [' + b",".join(str(n).encode() for n in range(20_000)) + b"]}"
    sent = gzip.compress(body)
    assert len(sent) > 1024  # past the inline size
    assert await decoded(_request("gzip"), sent, Limits(max_request_bytes=len(body))) == body


@pytest.mark.parametrize("encoding", [None, "identity", "br", "gzip, br"])
async def test_any_other_body_is_left_as_it_came(encoding: str | None) -> None:
    sent = gzip.compress(BODY)
    assert await decoded(_request(encoding), sent, LIMITS) is sent


async def test_a_body_larger_than_the_limit_once_inflated_is_refused() -> None:
    bomb = gzip.compress(b" " * (LIMITS.max_request_bytes + 1))
    assert len(bomb) < 1024
    with pytest.raises(RequestTooLarge):
        await decoded(_request("gzip"), bomb, LIMITS)
    exactly = b" " * LIMITS.max_request_bytes
    assert await decoded(_request("gzip"), gzip.compress(exactly), LIMITS) == exactly


@pytest.mark.parametrize(
    ("encoding", "sent"),
    [
        ("gzip", b"not gzip at all"),
        ("gzip", gzip.compress(BODY)[:-12]),  # cut off
        ("gzip", gzip.compress(BODY) + gzip.compress(BODY)),  # a second stream after the first
        ("deflate", b"\xff\xfe not deflate"),
    ],
)
async def test_a_body_that_is_not_what_its_encoding_says_is_a_parse_error(encoding: str, sent: bytes) -> None:
    with pytest.raises(ParseError):
        await decoded(_request(encoding), sent, LIMITS)


@pytest.mark.parametrize(
    ("accept_encoding", "taken"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("br;q=1.0, GZIP;q=0.5", True),
        ("x-gzip", True),
        ("*", True),
        (None, False),
        ("", False),
        ("identity", False),
        ("deflate, br", False),
        ("gzip;q=0", False),
        ("gzip;q=0, *", False),  # named, gzip's own weight decides
        ("gzip;q=nonsense", False),
    ],
)
def test_which_accept_encoding_takes_a_gzipped_answer(accept_encoding: str | None, taken: bool) -> None:
    assert accepts_gzip(accept_encoding) is taken
