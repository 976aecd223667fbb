"""A student reader-evaluator keeps the teacher's chosen encoder layers, its embeddings and heads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from onnx_models.train.modeling import ReaderEvaluatorModel
from onnx_models.train.student import student


def test_the_student_is_the_teacher_less_the_layers_it_drops(tiny_checkpoint: Path, tmp_path: Path) -> None:
    out = student(tiny_checkpoint, tmp_path / "student", [1])
    teacher, kept = ReaderEvaluatorModel.load(tiny_checkpoint), ReaderEvaluatorModel.load(out)
    assert kept.config.num_hidden_layers == 1 == len(kept.encoder.encoder.layer)
    later = teacher.encoder.encoder.layer[1].state_dict()
    assert all(torch.equal(v, later[k]) for k, v in kept.encoder.encoder.layer[0].state_dict().items())
    for module in ("qa_outputs", "relevance"):
        ours, theirs = getattr(kept, module).state_dict(), getattr(teacher, module).state_dict()
        assert all(torch.equal(v, theirs[k]) for k, v in ours.items())
    assert torch.equal(
        kept.encoder.embeddings.word_embeddings.weight, teacher.encoder.embeddings.word_embeddings.weight
    )
    assert (out / "tokenizer.json").read_bytes() == (tiny_checkpoint / "tokenizer.json").read_bytes()


@pytest.mark.parametrize("keep", [[], [0, 0], [2]])
def test_layers_the_teacher_lacks_or_repeats_are_refused(
    tiny_checkpoint: Path, tmp_path: Path, keep: list[int]
) -> None:
    with pytest.raises(SystemExit, match="--keep-layers"):
        student(tiny_checkpoint, tmp_path / "student", keep)
