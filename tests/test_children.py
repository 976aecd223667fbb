"""Stopping answerbox stops what it started: ``answerbox local-llm`` and ``answerbox demo``
get SIGTERM (what shell traps, ``docker stop``, systemd and Kubernetes send), and neither a
process of their group nor a listening port survives; a ``kill -9`` leaks no llama.cpp server."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from answerbox.ops.children import PortInUseError, require_free_port
from answerbox.server import free_port

ANSWERBOX = [sys.executable, "-m", "answerbox.ops.cli"]


def _state_and_group(pid: int) -> tuple[str, int] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], int(fields[2])


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError):
        return 0


def _group(pgid: int) -> list[int]:
    """Live members of a process group. A zombie holds no port and no memory once its last
    thread is gone; until then (llama.cpp's threads still exiting) it still holds its sockets."""
    members = []
    for entry in os.listdir("/proc"):
        pid = int(entry) if entry.isdigit() else 0
        if pid and (found := _state_and_group(pid)) and found[1] == pgid and (found[0] != "Z" or _threads(pid) > 1):
            members.append(pid)
    return members


def _is_llama_server(pid: int) -> bool:
    """llama.cpp's server as local-llm starts it: xllamacpp's, or llama-cpp-python's."""
    return any(name in _cmdline(pid) for name in ("xllamacpp", "llama_cpp.server"))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    # Its own session: the group is exactly what this command started.
    return subprocess.Popen(
        [*ANSWERBOX, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )


def _wait_for_line(process: subprocess.Popen[str], pattern: str, timeout_s: float = 180) -> re.Match[str]:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if match := re.search(pattern, line):
            return match
    pytest.fail(f"no line matching {pattern!r}; output:\n{''.join(seen)}")


def _eventually_empty(pgid: int, timeout_s: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := _group(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _port_is_free(port: int) -> bool:
    try:
        require_free_port("127.0.0.1", port)
    except PortInUseError:
        return False
    return True


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Whatever a test started is killed, group and all, even when the test fails."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        for pid in _group(process.pid):
            os.kill(pid, signal.SIGKILL)
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def _local_llm(started: list[subprocess.Popen[str]]) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    process = _start("local-llm", "--port", str(port), "--threads", "1")
    started.append(process)
    _wait_for_line(process, rf"local LLM .* at http://127\.0\.0\.1:{port}/v1")
    return process, port


@pytest.mark.real_llm
def test_sigterm_to_local_llm_stops_its_llama_server(started: list[subprocess.Popen[str]]) -> None:
    process, port = _local_llm(started)
    group = _group(process.pid)
    assert any(_is_llama_server(pid) for pid in group), [_cmdline(pid) for pid in group]
    assert not _port_is_free(port)

    process.send_signal(signal.SIGTERM)  # to answerbox alone, as docker stop does
    process.wait(30)
    assert _eventually_empty(process.pid) == []
    assert _port_is_free(port)


@pytest.mark.real_llm
def test_kill_9_of_local_llm_takes_its_llama_server_along(started: list[subprocess.Popen[str]]) -> None:
    process, port = _local_llm(started)
    process.kill()  # no handler runs: only the parent-death signal can stop the child
    process.wait(10)
    assert _eventually_empty(process.pid) == []
    assert _port_is_free(port)


def test_local_llm_refuses_a_port_that_is_taken(started: list[subprocess.Popen[str]]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        process = _start("local-llm", "--port", str(port))
        started.append(process)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in output
    assert not any(_is_llama_server(pid) for pid in _group(process.pid))


def test_sigterm_to_demo_stops_osmem_and_frees_both_ports(started: list[subprocess.Popen[str]]) -> None:
    port = free_port()
    process = _start("demo", "--no-llm", "--port", str(port), "--query", "Who won Super Bowl 50?")
    started.append(process)
    osmem_port = int(_wait_for_line(process, r"osmem-server \(OpenSearch API\) at http://[\d.]+:(\d+)").group(1))
    _wait_for_line(process, rf"answerbox is serving at http://127\.0\.0\.1:{port}")
    assert len(_group(process.pid)) >= 1
    assert not _port_is_free(port)
    assert not _port_is_free(osmem_port)

    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 128 + signal.SIGINT
    assert _eventually_empty(process.pid) == []
    assert _port_is_free(port)
    assert _port_is_free(osmem_port)


def test_sigterm_to_serve_shuts_down_cleanly(started: list[subprocess.Popen[str]], osmem_url: str) -> None:
    port = free_port()
    env = {"ANSWERBOX_OPENSEARCH__URL": osmem_url, "ANSWERBOX_PORT": str(port)}
    process = _start("serve", "--log-level", "info", env=env)
    started.append(process)
    _wait_for_line(process, rf"Uvicorn running on http://127\.0\.0\.1:{port}")
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    assert _eventually_empty(process.pid) == []
    assert _port_is_free(port)
