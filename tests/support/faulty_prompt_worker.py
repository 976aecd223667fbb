"""The prompt worker (``answerbox.prompts.worker``) with globals that stand for what the
sandbox does not foresee, to run in its place (``COMMAND``, as ``WORKER_COMMAND``):

- ``stall()``: one C call that holds the interpreter lock for hours, and that no trace
  function sees;
- ``hog()``: asks for more memory than the worker may have;
- ``crash()``: the worker killed, as the out-of-memory killer would;
- ``pid()``: the process rendering, to tell the worker from the server.

Globals, not filters: the server compiles an override too, and a filter it lacks would be
refused there, before any render.
"""

from __future__ import annotations

import os
import signal
import sys

import jinja2
from answerbox.prompts import worker as prompt_worker
from answerbox.prompts.sandbox import BoundedSandbox, prompt_environment

__all__ = ["COMMAND"]

COMMAND = (sys.executable, __file__)


def _stall() -> int:
    return sum(range(10**13))


def _hog() -> str:
    return "x" * 2**31


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _with_faults(loader: jinja2.BaseLoader | None = None) -> BoundedSandbox:
    environment = prompt_environment(loader)
    environment.globals.update(stall=_stall, hog=_hog, crash=_crash, pid=os.getpid)
    return environment


if __name__ == "__main__":
    setattr(prompt_worker, "prompt_environment", _with_faults)  # noqa: B010  (the worker reads it at its start)
    prompt_worker.main()
