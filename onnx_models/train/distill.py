"""What a student reader-evaluator learns from its teacher besides the labels (Hinton et al. 2015).

The teacher's start and end distributions say which other tokens were nearly the answer, and
its relevance says how near a negative came: more per window than one right span or a 0/1.
``reader --teacher CKPT --distill-weight W`` adds ``W`` times this loss to the labels' loss.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from onnx_models.train.modeling import ReaderEvaluatorModel

__all__ = ["Teacher", "distillation_loss"]


def distillation_loss(
    student: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    teacher: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    mask: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """KL(teacher ‖ student) of the start and of the end distributions at ``temperature`` (times
    its square, so the gradient keeps its scale), and the relevance's cross-entropy against the
    teacher's probability. Padding (``mask`` 0) takes part in neither softmax."""
    losses = []
    for ours, theirs in zip(student[:2], teacher[:2], strict=True):
        ours = ours.masked_fill(mask == 0, -1e4) / temperature
        theirs = theirs.masked_fill(mask == 0, -1e4) / temperature
        kl = nn.functional.kl_div(ours.log_softmax(-1), theirs.log_softmax(-1), log_target=True, reduction="batchmean")
        losses.append(kl * temperature**2)
    relevance = nn.functional.binary_cross_entropy_with_logits(student[2], torch.sigmoid(teacher[2]))
    return (losses[0] + losses[1]) / 2 + relevance


class Teacher:
    """A frozen reader-evaluator whose outputs a student's windows are compared with."""

    def __init__(self, checkpoint: Path, device: torch.device) -> None:
        self._model = ReaderEvaluatorModel.load(checkpoint).to(device).eval()
        self._model.requires_grad_(False)

    @torch.no_grad()
    def __call__(
        self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor, *, bf16: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=bf16):
            start, end, relevance = (t.float() for t in self._model(ids, mask, types))
        return start, end, relevance
