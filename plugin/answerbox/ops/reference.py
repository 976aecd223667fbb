"""``docs/reference.md``, written from the configuration models themselves: every setting and
every processor parameter, with its type, default and description.

    python -m answerbox.ops.reference > docs/reference.md

A field's description is its ``Field(description=...)``, else the comment lines right above
it (and one at its line's end) in the model's source: the comments the code already keeps.
``tests/unit/test_reference.py`` fails when the file is stale.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from answerbox.core.config import Settings

__all__ = ["reference"]

_HEADER = """# Reference

Every setting (`answerbox serve --config FILE`, YAML; or `ANSWERBOX_<SECTION>__<NAME>` in the
environment) and every processor parameter, written from the configuration models by
`python -m answerbox.ops.reference > docs/reference.md`. A test fails when this file is stale.
"""


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """Each field's comment lines in its class's body (the model's, or a base's): those right
    above it, and one at its line's end."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__module__.startswith("answerbox"):
            found |= _class_comments(cls)
    return found


def _class_comments(cls: type) -> dict[str, str]:
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    above: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        field = re.match(r"\s+(\w+)\s*:", line)
        if field and not stripped.startswith(("def ", "@")):
            inline = line.split("  # ", 1)[1].strip() if "  # " in line else ""
            found[field.group(1)] = " ".join([*above, inline]).strip()
        above = []
    return found


def _type(annotation: Any) -> str:
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return re.sub(r"\b(?:typing|pathlib|pydantic\.types|answerbox\.[\w.]+)\.", "", text).replace("NoneType", "None")


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "(computed)"
    if field.default is PydanticUndefined:
        return "(required)"
    value = field.default
    if isinstance(value, BaseModel):
        return "(section)"
    return f"`{value!r}`" if value is not None else "`None`"


def _rows(model: type[BaseModel], prefix: str) -> Iterator[str]:
    comments = _comments(model)
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if model is Settings and isinstance(annotation, type) and issubclass(annotation, BaseModel):
            continue  # a section: its own table
        text = (field.description or comments.get(name, "")).replace("|", "\\|")
        yield f"| `{prefix}{name}` | `{_type(annotation)}` | {_default(field)} | {text} |"


def _table(model: type[BaseModel], prefix: str = "") -> list[str]:
    return ["| name | type | default | description |", "|---|---|---|---|", *_rows(model, prefix)]


def _summary(cls: type) -> list[str]:
    """The first paragraph of the class's own docstring (not one it inherits), as a line."""
    own = cls.__dict__.get("__doc__")
    first = inspect.cleandoc(own).split("\n\n")[0].replace("\n", " ") if isinstance(own, str) else ""
    return [first, ""] if first else []


def reference() -> str:
    from answerbox.processors.registry import default_registry

    parts = [_HEADER, "## Settings", "", *_table(Settings), ""]
    for name, field in Settings.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            parts += [f"### `{name}`", "", *_summary(section), *_table(section, f"{name}."), ""]
    parts += ["## Processors", ""]
    for processor in default_registry().types():
        parts += [f"### `{processor.type_name}`", "", *_summary(processor), *_table(processor.config_model), ""]
    return "\n".join(parts).rstrip() + "\n"


if __name__ == "__main__":
    print(reference(), end="")
