"""No pipeline reads the server's files: ``examples_file`` resolves only inside the configured
``files_dir``, only for stored pipelines, with a size cap, and no error echoes a file's bytes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import AnswerboxFactory

SECRET = "ANSWERBOX_SECRET_TOKEN=s3cr3t"


def _pipeline(examples_file: str) -> dict[str, Any]:
    return {
        "request_processors": [{"llm_query_expansion": {"method": "q2e", "mode": "fs", "examples_file": examples_file}}]
    }


@pytest.fixture
def files(tmp_path: Path) -> Path:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "good.json").write_text(json.dumps([{"query": "q", "output": "o"}]))
    (allowed / "big.json").write_text(json.dumps([{"query": "q" * 100_000, "output": "o"}]))
    (tmp_path / "secret.txt").write_text(SECRET)
    (allowed / "link.json").symlink_to(tmp_path / "secret.txt")
    return allowed


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "/proc/self/environ", "/dev/zero", "../secret.txt", "link.json", "missing.json", "big.json"]
)
def test_files_outside_the_folder_or_too_big_are_refused(
    make_answerbox: AnswerboxFactory, client: httpx.Client, files: Path, name: str
) -> None:
    url = make_answerbox(files_dir=str(files))
    started = time.monotonic()
    response = client.put(f"{url}/_search/pipeline/fewshot", json=_pipeline(name))
    assert time.monotonic() - started < 2
    assert response.status_code == 400, response.text
    reason = response.json()["error"]["reason"]
    assert "examples_file" in reason
    assert SECRET not in reason
    assert "root:" not in reason
    assert client.get(f"{url}/_answerbox/stats/search_pipeline").status_code == 200


def test_a_search_s_own_pipeline_names_no_files(
    make_answerbox: AnswerboxFactory, client: httpx.Client, files: Path
) -> None:
    url = make_answerbox(files_dir=str(files))
    response = client.post(f"{url}/any/_search", json={"search_pipeline": _pipeline("good.json")})
    assert response.status_code == 400
    assert "examples_file is for stored pipelines" in response.json()["error"]["reason"]
    assert client.put(f"{url}/_search/pipeline/fewshot", json=_pipeline("good.json")).status_code == 200


def test_without_a_configured_folder_no_file_is_read(
    make_answerbox: AnswerboxFactory, client: httpx.Client, files: Path
) -> None:
    url = make_answerbox()
    response = client.put(f"{url}/_search/pipeline/fewshot", json=_pipeline(str(files / "good.json")))
    assert response.status_code == 400
    assert "needs files_dir" in response.json()["error"]["reason"]
