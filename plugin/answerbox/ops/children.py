"""Processes answerbox starts (the local LLM) and how they end with it.

A child is stopped with terminate, a grace period, then kill. On Linux it also gets a
parent-death signal, so even a ``kill -9`` of answerbox leaves no orphan listening on a
port. SIGTERM (what ``docker stop``, systemd, Kubernetes and shell traps send) is made to
unwind like Ctrl-C, so every ``finally`` and context manager that stops a child runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence

__all__ = ["PortInUseError", "interrupt_on_sigterm", "require_free_port", "spawn", "stop"]

_PR_SET_PDEATHSIG = 1


class PortInUseError(RuntimeError):
    """Another process listens on the port a child was to serve on."""


def require_free_port(host: str, port: int) -> None:
    """Fail now, clearly, rather than let a health check pass against someone else's server."""
    with socket.socket() as probe:
        # As servers bind: connections of a stopped server in TIME_WAIT do not hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise PortInUseError(
                f"port {port} on {host} is already in use ({error.strerror}): stop what holds it or pick another port"
            ) from None


def _die_with(parent: int) -> Callable[[], None]:
    def set_parent_death_signal() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        # The parent may have died between fork and prctl: then no signal would ever come.
        if os.getppid() != parent:
            os._exit(1)

    return set_parent_death_signal


def spawn(command: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start ``command`` so that it dies with this process.

    Linux delivers the parent-death signal when the *thread* that started the child ends,
    so start children from a thread that lives as long as they should (the main thread).
    """
    preexec = _die_with(os.getpid()) if sys.platform.startswith("linux") else None
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=preexec)


def stop(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Terminate, wait up to ``grace_s``, then kill: the child is gone when this returns."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def interrupt_on_sigterm() -> None:
    """Make SIGTERM unwind the main thread like SIGINT does (``KeyboardInterrupt``)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
