"""A student learns the teacher's span distributions and relevance besides the labels."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from onnx_models.train.distill import distillation_loss
from onnx_models.train.reader import parse_args, train
from onnx_models.train.student import student
from tests.models.test_train import _args


def _outputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, 7, generator=generator), torch.randn(3, 7, generator=generator), torch.randn(3)


MASK = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])


def test_a_student_that_says_what_the_teacher_says_pays_only_the_relevance_entropy() -> None:
    teacher = _outputs(0)
    relevance = torch.nn.functional.binary_cross_entropy_with_logits(teacher[2], torch.sigmoid(teacher[2]))
    assert distillation_loss(teacher, teacher, MASK, 2.0).item() == pytest.approx(relevance.item(), abs=1e-6)
    assert distillation_loss(_outputs(1), teacher, MASK, 2.0) > relevance + 0.1


def test_padding_takes_no_part() -> None:
    ours, theirs = _outputs(1), _outputs(0)
    moved = ours[0].clone()
    moved[MASK == 0] += 50.0
    assert distillation_loss((moved, ours[1], ours[2]), theirs, MASK, 2.0).item() == pytest.approx(
        distillation_loss(ours, theirs, MASK, 2.0).item(), abs=1e-5
    )


def test_a_step_down_its_gradient_brings_the_student_nearer() -> None:
    teacher = _outputs(0)
    start, end, relevance = (t.clone().requires_grad_(True) for t in _outputs(1))
    before = distillation_loss((start, end, relevance), teacher, MASK, 2.0)
    grads = torch.autograd.grad(before, [start, end, relevance])
    with torch.no_grad():
        stepped = (start - 0.5 * grads[0], end - 0.5 * grads[1], relevance - 0.5 * grads[2])
    assert distillation_loss(stepped, teacher, MASK, 2.0) < before


def test_a_run_with_a_teacher_adds_its_loss_to_the_labels(tiny_checkpoint: Path, tarball: Path, tmp_path: Path) -> None:
    one_layer = student(tiny_checkpoint, tmp_path / "student", [0])
    argv = _args(tarball, one_layer, tmp_path / "alone", "--max-steps", "3", "--encoder", str(tiny_checkpoint))
    alone = train(parse_args(argv))
    argv = _args(tarball, one_layer, tmp_path / "taught", "--max-steps", "3", "--encoder", str(tiny_checkpoint))
    taught = train(parse_args([*argv, "--teacher", str(tiny_checkpoint)]))
    # The same weights and the same first batch: the teacher's loss is the difference, and it is positive.
    assert taught.history[0] > alone.history[0]
    assert taught.recipe["teacher"] == str(tiny_checkpoint)
