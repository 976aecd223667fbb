"""Prompts: Jinja2 templates from ``templates/``, rendered in a bounded sandbox with strict variables.

A stored pipeline may override a template with its own text; it is rendered by the same
sandbox (``prompt_sandbox``), so a pipeline author cannot reach Python objects or make a
huge value, and a missing variable is an error. Template text and rendered size have limits,
and a render that runs past its CPU budget (a loop nested in a loop) is stopped. An
override is compiled without a loader: it can include nothing. A refused or failing
template is a ConfigError (400) that names the prompt, never a path on the server.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError

from answerbox.errors import ConfigError
from answerbox.prompt_sandbox import MAX_VALUE_CHARS, BoundedSandbox, RenderTimeout, time_budget

__all__ = ["MAX_RENDERED_CHARS", "MAX_TEMPLATE_CHARS", "RENDER_BUDGET_S", "Prompt", "PromptLibrary", "oneline"]

MAX_TEMPLATE_CHARS = 20_000
MAX_RENDERED_CHARS = MAX_VALUE_CHARS
RENDER_BUDGET_S = 0.2  # a real prompt renders in well under a millisecond
# What a template's own code may get wrong: each is the template's fault, never the server's.
_TEMPLATE_FAULTS = (
    ArithmeticError,
    LookupError,
    RecursionError,
    TypeError,
    ValueError,
    jinja2.TemplateError,
    MemoryError,
)


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
            with time_budget(RENDER_BUDGET_S):
                for chunk in self._template.generate(**variables):
                    size += len(chunk)
                    if size > MAX_RENDERED_CHARS:
                        raise ConfigError(f"prompt [{self.name}] renders to more than {MAX_RENDERED_CHARS} characters")
                    chunks.append(chunk)
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"prompt [{self.name}]: {exc.message}") from exc
        except SecurityError as exc:
            raise ConfigError(f"prompt [{self.name}] was refused: {exc}") from exc
        except RenderTimeout:
            raise ConfigError(
                f"prompt [{self.name}] ran out of CPU time to render ({RENDER_BUDGET_S:g}s a prompt, "
                f"limits.render_budget_s a request)"
            ) from None
        except _TEMPLATE_FAULTS as exc:
            raise ConfigError(f"prompt [{self.name}] failed to render: {type(exc).__name__}") from None
        return "".join(chunks).strip()


class PromptLibrary:
    def __init__(self, templates_dir: Path) -> None:
        self._dir = templates_dir
        self._env = BoundedSandbox(jinja2.FileSystemLoader(str(templates_dir)))
        # A pipeline's own text includes, imports and extends nothing: no loader.
        self._override_env = BoundedSandbox()
        for env in (self._env, self._override_env):
            # Text from documents (and from the reader's spans) goes into prompts through this
            # filter: on one line, it cannot start a line that poses as a new block, a question
            # or an answer of the prompt's own format.
            env.filters["oneline"] = oneline

    def get(self, name: str, override: str | None = None) -> Prompt:
        """The template ``name`` (e.g. ``query_expansion/q2d_zs.j2``), or ``override`` text in its place."""
        try:
            if override is not None:
                if len(override) > MAX_TEMPLATE_CHARS:
                    raise ConfigError(f"prompt [{name}] override is longer than {MAX_TEMPLATE_CHARS} characters")
                return Prompt(f"{name} (override)", self._override_env.from_string(override), override)
            source = (self._dir / name).read_text()
            return Prompt(name, self._env.get_template(name), source)
        except jinja2.TemplateNotFound as exc:
            raise ConfigError(f"prompt template [{name}] not found") from exc
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"prompt [{name}] has a syntax error at line {exc.lineno}: {exc.message}") from exc
