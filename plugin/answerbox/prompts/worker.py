"""The process that renders prompt overrides, and the server's side of it.

A pipeline's own template text (an override) is hostile until shown otherwise. The sandbox
(``prompt_sandbox``) bounds every C call it knows of before it runs, and a trace function
stops template loops; but one long C call it does not foresee would hold the interpreter
lock, stalling every request, and could take the server's memory. So an override renders
in one child process (``python -m answerbox.prompts.worker``), started on the first override
render: it compiles the text in the same sandbox (``sandbox.prompt_environment``) and renders
it as the server renders a shipped template (``sandbox.render``), under an address-space limit
(``MEMORY_LIMIT_BYTES``: past it an allocation is a MemoryError, so a 400, not the machine's
out-of-memory killer). The server only awaits the reply: the event loop never waits on the
worker. A render not back within ``RENDER_TIMEOUT_S`` of wall time, or a worker that died, is
killed, and the render fails as a failing template does (ConfigError, 400); the next render
starts a fresh worker. So does a render whose caller stopped waiting midway: its reply would
otherwise be read as the next one's.

Renders go one at a time: a real one takes well under a millisecond. Their CPU budget is the
sandbox's, counted in the worker: ``RENDER_BUDGET_S`` a prompt, or what is left of the
request's ``limits.render_budget_s`` where less. The worker's CPU time is then counted
against the request; a render stopped by the timeout counts its whole budget. The timeout is
wall time, well above the budget: it fires only for what the budget cannot stop.

Messages are a 4-byte length and JSON, both ways: the variables are plain data, and what the
worker sends back is only ever read as data (never unpickled), and only up to a bounded size.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import resource
import signal
import struct
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

import jinja2
from pydantic_core import to_jsonable_python

from answerbox.core.errors import AnswerboxError, ConfigError
from answerbox.prompts.sandbox import MAX_VALUE_CHARS, prompt_environment, render, request_render_budget, spend

__all__ = ["MEMORY_LIMIT_BYTES", "RENDER_TIMEOUT_S", "WORKER_COMMAND", "PromptWorker", "main"]

MEMORY_LIMIT_BYTES = 512 * 2**20
RENDER_TIMEOUT_S = 1.0  # five times a prompt's CPU budget
# Python's start and the sandbox's import, on a busy machine: no template runs yet.
_START_TIMEOUT_S = 30.0
# How the server starts the worker (read at each start).
WORKER_COMMAND: tuple[str, ...] = (sys.executable, "-m", "answerbox.prompts.worker")
_LENGTH = struct.Struct(">I")
# A rendered prompt, each character at most a 6-byte JSON escape, and the reply's few other fields.
_MAX_REPLY_BYTES = 6 * MAX_VALUE_CHARS + 4096
_COMPILED = 64  # overrides the worker keeps compiled


class PromptWorker:
    """The server's side: one worker, started on first use, replaced once stopped."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def render(self, name: str, source: str, variables: Mapping[str, Any], budget_s: float) -> str:
        """``source``, an override of the prompt ``name``, rendered with ``variables`` within
        ``budget_s`` of CPU; a ConfigError says why not, as ``Prompt.render``'s does."""
        # Models (few-shot examples) become the dicts they dump to: a template reads them alike.
        request = _frame(
            {"name": name, "source": source, "variables": to_jsonable_python(variables), "budget_s": budget_s}
        )
        async with self._lock:
            try:
                process = await self._running()
                async with asyncio.timeout(RENDER_TIMEOUT_S):
                    reply = await _exchange(process, request)
            except TimeoutError:
                await self._stop()
                spend(budget_s)
                raise ConfigError(
                    f"prompt [{name}] did not render within {RENDER_TIMEOUT_S:g}s and was stopped"
                ) from None
            except (OSError, EOFError, ValueError):
                await self._stop()
                raise ConfigError(f"prompt [{name}] stopped the process rendering it") from None
            except BaseException:
                # Cancelled midway (or the worker did not start): a reply may still come.
                await self._stop()
                raise
        spend(reply["cpu_s"])
        if "error" in reply:
            raise ConfigError(reply["error"])
        return str(reply["text"])

    async def aclose(self) -> None:
        await self._stop()

    async def _running(self) -> asyncio.subprocess.Process:
        if self._process is not None and self._process.returncode is None:
            return self._process
        await self._stop()
        self._process = process = await asyncio.create_subprocess_exec(
            *WORKER_COMMAND, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        try:
            async with asyncio.timeout(_START_TIMEOUT_S):
                await _receive(process)  # its first message: ready
        except (TimeoutError, OSError, EOFError, ValueError) as exc:
            raise AnswerboxError("the prompt worker did not start") from exc
        return process

    async def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):  # it had exited already
            process.kill()
        await process.wait()


def _frame(message: Mapping[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode()
    return _LENGTH.pack(len(body)) + body


async def _exchange(process: asyncio.subprocess.Process, request: bytes) -> Any:
    if process.stdin is None:
        raise OSError("the prompt worker has no stdin")
    process.stdin.write(request)
    await process.stdin.drain()
    return await _receive(process)


async def _receive(process: asyncio.subprocess.Process) -> Any:
    if process.stdout is None:
        raise OSError("the prompt worker has no stdout")
    (size,) = _LENGTH.unpack(await process.stdout.readexactly(_LENGTH.size))
    if size > _MAX_REPLY_BYTES:
        raise ValueError(f"a reply of {size} bytes")
    return json.loads(await process.stdout.readexactly(size))


def _read(stream: IO[bytes]) -> Any:
    """The next request, or None once the server has closed the pipe."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(header)
    return json.loads(stream.read(size))


def _send(stream: IO[bytes], message: Mapping[str, Any]) -> None:
    stream.write(_frame(message))
    stream.flush()


def main() -> None:
    """The worker: renders one request at a time, until the server stops it or closes its stdin."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the server's terminal is for the server
    # Replies go out on a descriptor of their own: whatever prints goes to stderr, never into a reply.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    environment = prompt_environment()

    @functools.lru_cache(maxsize=_COMPILED)
    def compiled(source: str) -> jinja2.Template:
        return environment.from_string(source)

    _send(replies, {"ready": True})
    while (request := _read(sys.stdin.buffer)) is not None:
        started = time.thread_time()
        reply: dict[str, Any]
        try:
            with request_render_budget(request["budget_s"]):
                reply = {"text": render(request["name"], compiled(request["source"]), request["variables"])}
        except ConfigError as exc:
            reply = {"error": exc.reason}
        reply["cpu_s"] = time.thread_time() - started
        _send(replies, reply)


if __name__ == "__main__":
    main()
