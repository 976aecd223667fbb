"""How long a model call waits for batch-mates: not at all on the CPU unless configured."""

from __future__ import annotations

import pytest
from answerbox.core.config import ModelSettings
from answerbox.models.loader import DEVICE_BATCH_WAIT_S, batch_wait_s
from answerbox.models.session import CPU


@pytest.mark.parametrize(
    ("configured", "provider", "expected"),
    [
        (None, CPU, 0.0),
        (None, "CUDAExecutionProvider", DEVICE_BATCH_WAIT_S),
        (6.0, CPU, 0.006),
        (0.0, "CUDAExecutionProvider", 0.0),
    ],
)
def test_the_wait_is_the_setting_else_the_providers_default(
    configured: float | None, provider: str, expected: float
) -> None:
    assert batch_wait_s(ModelSettings(max_wait_ms=configured), provider) == pytest.approx(expected)


def test_a_negative_wait_is_refused() -> None:
    with pytest.raises(ValueError, match="max_wait_ms"):
        ModelSettings(max_wait_ms=-1)
