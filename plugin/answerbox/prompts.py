"""Prompts: Jinja2 templates from ``templates/``, rendered in a sandbox with strict variables.

A pipeline may override a template with its own text; it is rendered by the same sandbox,
so a pipeline author cannot reach Python objects, and a missing variable is an error. The
sandbox is also bounded, since a search may carry its own template: template text, rendered
size, exponents and sequence repetition have limits, and a render that runs past its time
budget (a loop nested in a loop) is stopped. A refused template is a ConfigError (400).
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from answerbox.errors import ConfigError

__all__ = ["MAX_PROMPT_CHARS", "MAX_TEMPLATE_CHARS", "RENDER_BUDGET_S", "Prompt", "PromptLibrary", "oneline"]

MAX_TEMPLATE_CHARS = 20_000
MAX_PROMPT_CHARS = 200_000
RENDER_BUDGET_S = 0.2  # a real prompt renders in well under a millisecond
_MAX_EXPONENT = 64


class _RenderTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_budget(seconds: float) -> Iterator[None]:
    """Stop the template code running in this thread once it has used ``seconds`` of CPU.

    Compiled templates are Python: a trace function sees each line they run and raises
    there, which no template loop can avoid. CPU time of this thread, not wall time: on a
    busy machine a prompt may wait for the CPU longer than it takes to render. The previous
    trace function comes back after."""
    deadline = time.thread_time() + seconds

    def check(frame: FrameType, event: str, arg: Any) -> Any:
        if time.thread_time() > deadline:
            raise _RenderTimeout
        return check

    previous = sys.gettrace()
    sys.settrace(check)
    try:
        yield
    finally:
        sys.settrace(previous)


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """Refuses the operators that make huge values from small text: ``x ** big`` and
    ``'s' * big`` (interception also keeps them from being folded at compile time)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, int | float) and abs(right) > _MAX_EXPONENT:
            raise SecurityError(f"exponent {right} is above {_MAX_EXPONENT}")
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if isinstance(sequence, str | list | tuple) and isinstance(times, int) and len(sequence) * times > MAX_PROMPT_CHARS:
                    raise SecurityError(f"repeating a sequence {times} times makes more than {MAX_PROMPT_CHARS} items")
        return super().call_binop(context, operator, left, right)


def oneline(text: Any) -> str:
    return " ".join(str(text).split())


class Prompt:
    """One compiled template with the hash of its source (part of cache keys)."""

    def __init__(self, name: str, template: jinja2.Template, source: str) -> None:
        self.name = name
        self._template = template
        self.sha256 = hashlib.sha256(source.encode()).hexdigest()

    def render(self, **variables: Any) -> str:
        chunks: list[str] = []
        size = 0
        try:
            with _time_budget(RENDER_BUDGET_S):
                for chunk in self._template.generate(**variables):
                    size += len(chunk)
                    if size > MAX_PROMPT_CHARS:
                        raise ConfigError(f"prompt [{self.name}] renders to more than {MAX_PROMPT_CHARS} characters")
                    chunks.append(chunk)
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"prompt [{self.name}]: {exc.message}") from exc
        except SecurityError as exc:
            raise ConfigError(f"prompt [{self.name}] was refused: {exc}") from exc
        except _RenderTimeout:
            raise ConfigError(f"prompt [{self.name}] used more than {RENDER_BUDGET_S:g}s of CPU to render") from None
        return "".join(chunks).strip()


class PromptLibrary:
    def __init__(self, templates_dir: Path) -> None:
        self._dir = templates_dir
        self._env = _BoundedSandbox(
            loader=jinja2.FileSystemLoader(str(templates_dir)),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
        )
        # Text from documents (and from the reader's spans) goes into prompts through this
        # filter: on one line, it cannot start a line that poses as a new block, a question
        # or an answer of the prompt's own format.
        self._env.filters["oneline"] = oneline

    def get(self, name: str, override: str | None = None) -> Prompt:
        """The template ``name`` (e.g. ``query_expansion/q2d_zs.j2``), or ``override`` text in its place."""
        try:
            if override is not None:
                if len(override) > MAX_TEMPLATE_CHARS:
                    raise ConfigError(f"prompt [{name}] override is longer than {MAX_TEMPLATE_CHARS} characters")
                return Prompt(f"{name} (override)", self._env.from_string(override), override)
            source = (self._dir / name).read_text()
            return Prompt(name, self._env.get_template(name), source)
        except jinja2.TemplateNotFound as exc:
            raise ConfigError(f"prompt template [{name}] not found in {self._dir}") from exc
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"prompt [{name}] has a syntax error at line {exc.lineno}: {exc.message}") from exc
