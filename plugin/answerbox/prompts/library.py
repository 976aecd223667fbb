"""Prompts: Jinja2 templates from ``templates/``, rendered in a bounded sandbox with strict variables.

A stored pipeline may override a template with its own text; it is rendered by the same
sandbox (``prompt_sandbox``), so a pipeline author cannot reach Python objects or make a
huge value, and a missing variable is an error. Template text and rendered size have limits,
and a render that runs past its CPU budget (a loop nested in a loop) is stopped. An
override is compiled without a loader: it can include nothing. A refused or failing
template is a ConfigError (400) that names the prompt, never a path on the server.

The shipped templates are trusted: they render here, in well under a millisecond. An
override is compiled here only to find its syntax errors when it is defined; it renders in
the prompt worker (``prompt_worker``), a process of its own where a C call the sandbox does
not foresee can stall nothing else. So the event loop renders with ``Prompt.arender``; the
synchronous ``Prompt.render`` is for a shipped template (and is what the worker runs).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jinja2

from answerbox.core.errors import ConfigError
from answerbox.prompts.sandbox import RENDER_BUDGET_S, budget_of, prompt_environment, render
from answerbox.prompts.worker import PromptWorker

__all__ = ["MAX_TEMPLATE_CHARS", "Prompt", "PromptLibrary"]

MAX_TEMPLATE_CHARS = 20_000


class Prompt:
    """One compiled template with the hash of its source (part of cache keys). With a
    ``worker``, an override: it renders there, never in this process."""

    def __init__(
        self, name: str, template: jinja2.Template, source: str, *, worker: PromptWorker | None = None
    ) -> None:
        self.name = name
        self._template = template
        self._source = source
        self._worker = worker
        self.sha256 = hashlib.sha256(source.encode()).hexdigest()

    async def arender(self, **variables: Any) -> str:
        """What ``render`` makes, without holding up the event loop: a shipped template renders
        here, an override in the prompt worker (``variables`` then plain data, or models)."""
        if self._worker is None:
            return self.render(**variables)
        return await self._worker.render(self.name, self._source, variables, budget_of(RENDER_BUDGET_S))

    def render(self, **variables: Any) -> str:
        """Rendered in this process: a shipped template's way (and an override's, in the worker)."""
        if self._worker is not None:
            raise TypeError(f"prompt [{self.name}] is an override: it renders in the prompt worker (arender)")
        return render(self.name, self._template, variables)


class PromptLibrary:
    def __init__(self, templates_dir: Path) -> None:
        self._dir = templates_dir
        self._env = prompt_environment(jinja2.FileSystemLoader(str(templates_dir)))
        self._override_env = prompt_environment()
        self._worker = PromptWorker()

    def get(self, name: str, override: str | None = None) -> Prompt:
        """The template ``name`` (e.g. ``query_expansion/q2d_zs.j2``), or ``override`` text in its place."""
        try:
            if override is not None:
                if len(override) > MAX_TEMPLATE_CHARS:
                    raise ConfigError(f"prompt [{name}] override is longer than {MAX_TEMPLATE_CHARS} characters")
                # Compiled here too: a syntax error is refused when the pipeline is defined.
                template = self._override_env.from_string(override)
                return Prompt(f"{name} (override)", template, override, worker=self._worker)
            source = (self._dir / name).read_text()
            return Prompt(name, self._env.get_template(name), source)
        except jinja2.TemplateNotFound as exc:
            raise ConfigError(f"prompt template [{name}] not found") from exc
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"prompt [{name}] has a syntax error at line {exc.lineno}: {exc.message}") from exc
        except (RecursionError, MemoryError) as exc:
            # Jinja2 parses and compiles recursively: text nested deeply enough (a few thousand
            # brackets fit the length limit) exhausts the stack. The text's fault, not the server's.
            raise ConfigError(f"prompt [{name}] is nested too deeply to compile ({type(exc).__name__})") from None

    async def aclose(self) -> None:
        """Stops the prompt worker, if one started."""
        await self._worker.aclose()
