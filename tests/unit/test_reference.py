"""``docs/reference.md`` is what the configuration models say now: every setting and every
processor parameter, each in its table."""

from __future__ import annotations

from answerbox.core.config import Settings
from answerbox.ops.reference import reference
from answerbox.processors.registry import default_registry

from tests.support.repo import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference.md"


def test_the_reference_is_not_stale() -> None:
    assert REFERENCE.read_text() == reference(), "rewrite it: python -m answerbox.ops.reference > docs/reference.md"


def test_every_setting_and_processor_parameter_has_its_row() -> None:
    text = reference()
    for section, field in Settings.model_fields.items():
        names = getattr(field.annotation, "model_fields", None)
        for name in names or [section]:
            assert f"| `{section}.{name}` |" in text or f"| `{name}` |" in text
    for processor in default_registry().types():
        assert f"### `{processor.type_name}`" in text
        for name in processor.config_model.model_fields:
            assert f"| `{name}` |" in text
    assert "| `limits.header_timeout_s` | `float` | `10.0` |" in text
