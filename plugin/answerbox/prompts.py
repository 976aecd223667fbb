"""Prompts: Jinja2 templates from ``templates/``, rendered in a sandbox with strict variables.

A pipeline may override a template with its own text; it is rendered by the same sandbox,
so a pipeline author cannot reach Python objects, and a missing variable is an error.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from answerbox.errors import ConfigError

__all__ = ["Prompt", "PromptLibrary"]


class Prompt:
    """One compiled template with the hash of its source (part of cache keys)."""

    def __init__(self, name: str, template: jinja2.Template, source: str) -> None:
        self.name = name
        self._template = template
        self.sha256 = hashlib.sha256(source.encode()).hexdigest()

    def render(self, **variables: Any) -> str:
        try:
            return self._template.render(**variables).strip()
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"prompt [{self.name}]: {exc.message}") from exc


class PromptLibrary:
    def __init__(self, templates_dir: Path) -> None:
        self._dir = templates_dir
        self._env = ImmutableSandboxedEnvironment(
            loader=jinja2.FileSystemLoader(str(templates_dir)),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
        )

    def get(self, name: str, override: str | None = None) -> Prompt:
        """The template ``name`` (e.g. ``query_expansion/q2d_zs.j2``), or ``override`` text in its place."""
        try:
            if override is not None:
                return Prompt(f"{name} (override)", self._env.from_string(override), override)
            source = (self._dir / name).read_text()
            return Prompt(name, self._env.get_template(name), source)
        except jinja2.TemplateNotFound as exc:
            raise ConfigError(f"prompt template [{name}] not found in {self._dir}") from exc
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"prompt [{name}] has a syntax error at line {exc.lineno}: {exc.message}") from exc
