"""``answerbox doctor`` and ``GET /_answerbox/health``: each fault said in one line, with its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import AnswerboxFactory
from tests.support.auth_proxy import AuthProxy, User
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

PIPELINE = {"response_processors": [{"cited_answer": {"size": 3}}]}


@pytest.fixture
def secured(osmem_url: str) -> Iterator[str]:
    """osmem-server behind OpenSearch-style basic auth; the service user may write answerbox's indices."""
    users = {
        "admin": User("a", write=("*",)),
        "service": User("s", read=("*",), write=(".answerbox-pipelines", ".answerbox-cache")),
    }
    with serve(AuthProxy(osmem_url, users).app()) as url:
        yield url


def doctor(tmp_path: Path, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``answerbox doctor`` in its own process, configured by ``ANSWERBOX_*`` variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ANSWERBOX_")}
    variables = {f"ANSWERBOX_{name.upper()}": value for name, value in env.items()}
    command = [sys.executable, "-m", "answerbox.ops.cli", "doctor", *flags]
    return subprocess.run(command, env=clean | variables, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def lines(run: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Each finding's check name → its line."""
    found = {}
    for line in run.stdout.splitlines():
        check = line.split("] ", 1)[1].split(": ", 1)[0]
        found[check] = line
    return found


def test_a_healthy_stack_is_all_green(
    secured: str, scripted_llm: tuple[ScriptedLLM, str], tmp_path: Path, client: httpx.Client
) -> None:
    _, llm_url = scripted_llm
    admin = ("admin", "a")
    assert client.put(
        f"{secured}/.answerbox-pipelines/_doc/answers", json={"definition": PIPELINE}, auth=admin
    ).status_code in (200, 201)
    run = doctor(
        tmp_path,
        opensearch__url=secured,
        opensearch__service_username="service",
        opensearch__service_password="s",
        llm__base_url=llm_url,
    )
    found = lines(run)
    assert run.returncode == 0, run.stdout + run.stderr
    assert set(found) == {
        "opensearch",
        "rights on .answerbox-pipelines",
        "rights on .answerbox-cache",
        "stored pipelines",
        "llm",
        "models",
        "templates",
    }
    assert all(line.startswith("[ok]") for check, line in found.items() if check != "llm"), run.stdout
    assert "1 stored, all valid" in found["stored pipelines"]
    assert "CPUExecutionProvider" in found["models"]
    # The scripted LLM takes no response_format: it answers, without structured output.
    assert found["llm"].startswith("[warn] llm: smollm2 at")
    assert "without structured output" in found["llm"]


def test_a_wrong_password_is_one_failed_line(secured: str, tmp_path: Path) -> None:
    run = doctor(
        tmp_path, opensearch__url=secured, opensearch__service_username="service", opensearch__service_password="wrong"
    )
    assert run.returncode == 1
    [line] = [line for line in run.stdout.splitlines() if line.startswith("[fail]")]
    assert line.startswith("[fail] opensearch:")
    assert "refused the service credentials (401)" in line
    assert "service_password" in line


def test_opensearch_down_is_one_line_with_its_cause_and_the_traceback_only_when_verbose(tmp_path: Path) -> None:
    from answerbox.server import free_port

    down = f"http://127.0.0.1:{free_port()}"
    run = doctor(tmp_path, opensearch__url=down)
    assert run.returncode == 1
    assert "Traceback" not in run.stdout + run.stderr
    assert run.stderr == ""
    [line] = [line for line in run.stdout.splitlines() if line.startswith("[fail]")]
    assert line.startswith(f"[fail] opensearch: {down} cannot be reached")
    verbose = doctor(tmp_path, "--verbose", opensearch__url=down)
    assert "Traceback" in verbose.stderr
    assert lines(verbose) == lines(run)


def test_a_stopped_llm_is_one_failed_line(osmem_url: str, tmp_path: Path) -> None:
    from answerbox.server import free_port

    run = doctor(tmp_path, opensearch__url=osmem_url, llm__base_url=f"http://127.0.0.1:{free_port()}/v1")
    assert run.returncode == 1
    [line] = [line for line in run.stdout.splitlines() if line.startswith("[fail]")]
    assert line.startswith("[fail] llm:")
    assert "does not answer" in line
    assert "llm.base_url" in line


def test_a_missing_model_is_one_failed_line(osmem_url: str, tmp_path: Path) -> None:
    run = doctor(tmp_path, opensearch__url=osmem_url, models__dir=str(tmp_path / "no-model"))
    assert run.returncode == 1
    [line] = [line for line in run.stdout.splitlines() if line.startswith("[fail]")]
    assert line.startswith("[fail] models:")
    assert "manifest.json is missing" in line
    assert "models.dir" in line


def test_a_pipeline_this_version_cannot_build_fails_the_check(
    osmem_url: str, tmp_path: Path, client: httpx.Client
) -> None:
    stale = {"response_processors": [{"cited_answer": {"snippet_min_support": 0.2}}]}
    assert client.put(
        f"{osmem_url}/.answerbox-pipelines/_doc/old?refresh=true", json={"definition": stale}
    ).status_code in (200, 201)
    try:
        run = doctor(tmp_path, opensearch__url=osmem_url)
        assert run.returncode == 1
        assert lines(run)["stored pipelines"].startswith("[fail] stored pipelines: 1 of 1 no longer validate: old (")
        assert "snippet_min_support" in lines(run)["stored pipelines"]
    finally:
        client.delete(f"{osmem_url}/.answerbox-pipelines/_doc/old?refresh=true")


def test_health_is_the_same_checks_for_probes(make_answerbox: AnswerboxFactory, client: httpx.Client) -> None:
    from answerbox.server import free_port

    healthy = client.get(f"{make_answerbox()}/_answerbox/health")
    body: dict[str, Any] = healthy.json()
    assert healthy.status_code == 200
    assert body["status"] == "yellow"  # no LLM configured: a warning
    assert {c["check"]: c["status"] for c in body["checks"]}["llm"] == "warn"
    assert body["contract_version"]
    # A stopped LLM fails its check but only degrades answers: the replica stays ready.
    llm_down = client.get(f"{make_answerbox(llm={'base_url': f'http://127.0.0.1:{free_port()}/v1'})}/_answerbox/health")
    assert llm_down.status_code == 200
    assert llm_down.json()["status"] == "yellow"
    assert [c["check"] for c in llm_down.json()["checks"] if c["status"] == "fail"] == ["llm"]
    # Without OpenSearch no search can run: not ready. Nor can OpenSearch say who asks: each check
    # is its name and status, the details (its address among them) are `answerbox doctor`'s.
    cluster_down = client.get(
        f"{make_answerbox(opensearch={'url': f'http://127.0.0.1:{free_port()}'})}/_answerbox/health"
    )
    assert cluster_down.status_code == 503
    assert cluster_down.json()["status"] == "red"
    [failed] = [c for c in cluster_down.json()["checks"] if c["status"] == "fail"]
    assert failed == {"check": "opensearch", "status": "fail"}
