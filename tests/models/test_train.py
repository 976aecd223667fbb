"""Training runs are resumable: a run stopped and resumed ends with the same weights as one
that ran through, and a resume with another recipe is refused. Hard negatives are the
article's best BM25 paragraphs without the answer. Kept weights average into a checkpoint.
Held-out articles stay out of the run, and the tail to average is chosen on them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from answerbox.models.windows import Window, WindowTokenizer, load_tokenizer
from safetensors.torch import load_file

from onnx_models.data.squad import TRAIN_FILES, Paragraph, Question, in_holdout
from onnx_models.evaluate.select_average import by_step, select
from onnx_models.evaluate.select_average import parse_args as select_args
from onnx_models.train.average import average
from onnx_models.train.modeling import ReaderEvaluatorModel
from onnx_models.train.reader import (
    Example,
    answer_spans,
    hard_negatives,
    parse_args,
    span_labels,
    span_masks,
    spans_loss,
    train,
)
from onnx_models.train.tiny import tiny_config
from tests.models.conftest import TOPICS


def _args(tarball: Path, checkpoint: Path, out: Path, *extra: str) -> list[str]:
    return ["--data", str(tarball), "--encoder", str(checkpoint), "--init", str(checkpoint), "--out", str(out),
            "--max-length", "48", "--stride", "12", "--batch-size", "4", "--epochs", "2", "--log-every", "1",
            "--threads", "1", "--random-negatives", "0", *extra]  # fmt: skip


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "model.safetensors"))


def test_a_stopped_run_resumes_exactly(tiny_checkpoint: Path, tarball: Path, tmp_path: Path) -> None:
    through = train(parse_args(_args(tarball, tiny_checkpoint, tmp_path / "through")))
    assert through.step == 24  # 24 questions: 24 positives + 24 hard negatives, 4 a batch, 2 epochs
    # The smallest time budget stops after the first step, on a checkpoint.
    stopped = train(parse_args(_args(tarball, tiny_checkpoint, tmp_path / "split", "--max-minutes", "1e-9")))
    assert stopped.step == 1
    assert (tmp_path / "split" / "checkpoint.pt").is_file()
    summary = json.loads((tmp_path / "split" / "train_summary.json").read_text())
    assert summary["finished"] is False
    resumed = train(parse_args(_args(tarball, tiny_checkpoint, tmp_path / "split", "--resume")))
    assert resumed.step == 24
    assert resumed.history == pytest.approx(through.history, abs=0)
    want, got = _weights(tmp_path / "through"), _weights(tmp_path / "split")
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want)
    log = (tmp_path / "split" / "train.log").read_text()
    assert "resumed at step 1/24" in log
    assert "steps/s ETA" in log


def test_a_resume_with_another_recipe_is_refused(tiny_checkpoint: Path, tarball: Path, tmp_path: Path) -> None:
    train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, "--max-minutes", "1e-9")))
    with pytest.raises(SystemExit, match="other settings: lr"):
        train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, "--resume", "--lr", "0.5")))


def test_hard_negatives_are_the_articles_best_paragraphs_without_the_answer() -> None:
    texts = [
        "the bridge opened in 1932 over the harbour",  # gold
        "the bridge over the harbour was painted grey",
        "ferries crossed the harbour before the bridge",
        "the bridge toll paid for it by 1932",  # holds the answer: never a negative
        "wool was the colony's first export",
    ]
    question = Question(
        id="q", text="when did the bridge over the harbour open?", answers=("1932",), answer_starts=(23,)
    )
    paragraphs = [Paragraph(id=f"p{i}", article="bridge", context=t, questions=(question,) if i == 0 else ())
                  for i, t in enumerate(texts)]  # fmt: skip
    other = Paragraph(id="x", article="other", context="the bridge over the harbour", questions=())
    one = hard_negatives([*paragraphs, other])
    three = hard_negatives([*paragraphs, other], depth=3)
    assert [p.id for p in one[("p0", "q")]] == ["p1"]
    assert [p.id for p in three[("p0", "q")]] == ["p1", "p2", "p4"]


def test_kept_weights_average_into_a_checkpoint(tiny_checkpoint: Path, tarball: Path, tmp_path: Path) -> None:
    # Stopped after one step, resumed to the end: two checkpoints, two kept weight sets.
    train(parse_args(_args(tarball, tiny_checkpoint, tmp_path / "run", "--max-minutes", "1e-9", "--keep-weights")))
    train(parse_args(_args(tarball, tiny_checkpoint, tmp_path / "run", "--resume", "--keep-weights")))
    kept = sorted((tmp_path / "run" / "weights").iterdir())
    assert [p.name for p in kept] == ["step-1", "step-24"]
    final, last_kept = _weights(tmp_path / "run"), _weights(kept[1])
    assert final.keys() == last_kept.keys()
    assert all(torch.equal(final[k], last_kept[k]) for k in final)
    average(kept, tmp_path / "mean")
    first, last, mean = _weights(kept[0]), _weights(kept[1]), _weights(tmp_path / "mean")
    assert any(not torch.equal(first[k], last[k]) for k in first)
    assert all(torch.allclose(mean[k], (first[k] + last[k]) / 2) for k in first if first[k].is_floating_point())


def test_average_refuses_checkpoints_of_other_shapes(tiny_checkpoint: Path, tmp_path: Path) -> None:
    config = tiny_config()
    config.num_hidden_layers = 1
    ReaderEvaluatorModel(config).save(tmp_path / "one-layer", tiny_checkpoint)
    with pytest.raises(SystemExit, match="does not have the parameters"):
        average([tiny_checkpoint, tmp_path / "one-layer"], tmp_path / "mean")


def test_held_out_articles_are_never_trained_on(tiny_checkpoint: Path, tarball: Path, tmp_path: Path) -> None:
    articles = [f"{name}/{topic}" for name in TRAIN_FILES for topic in TOPICS]
    kept = [a for a in articles if not in_holdout(a, 0.5)]
    assert 0 < len(kept) < len(articles)  # the split is stable: this fraction splits the fixture
    state = train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, "--holdout", "0.5")))
    questions = 3 * len(kept)  # three paragraphs of one question each per article
    assert state.step == math.ceil(2 * questions / 4) * 2  # positives + hard negatives, 4 a batch, 2 epochs
    assert f"from {questions} paragraphs" in (tmp_path / "train.log").read_text()


def test_select_average_keeps_the_best_tail_on_the_held_out_articles(
    tiny_checkpoint: Path, tarball: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    train(
        parse_args(_args(tarball, tiny_checkpoint, run, "--holdout", "0.5", "--max-minutes", "1e-9", "--keep-weights"))
    )
    train(parse_args(_args(tarball, tiny_checkpoint, run, "--holdout", "0.5", "--resume", "--keep-weights")))
    kept = list((run / "weights").iterdir())
    argv = [*map(str, kept), "--holdout", "0.5", "--out", str(tmp_path / "chosen"), "--data", str(tarball),
            "--max-length", "48", "--stride", "12"]  # fmt: skip
    selection = select(select_args(argv))
    assert selection.questions == 12  # the four held-out articles' questions
    assert [c.checkpoints for c in selection.candidates] == [["step-12"], ["step-1", "step-12"]]
    best = max(selection.candidates, key=lambda c: (c.em, c.f1, len(c.checkpoints)))
    assert selection.chosen == best
    record = json.loads((tmp_path / "chosen" / "selection.json").read_text())
    assert record["chosen"]["checkpoints"] == best.checkpoints
    assert record["holdout"] == 0.5
    chosen, last = _weights(tmp_path / "chosen"), _weights(run / "weights" / "step-12")
    same = all(torch.equal(chosen[k], last[k]) for k in last)
    assert same == (best.checkpoints == ["step-12"])


def test_select_average_orders_kept_weights_by_step(tmp_path: Path) -> None:
    names = ["step-2106", "step-241", "step-1409"]
    assert [p.name for p in by_step([tmp_path / n for n in names])] == ["step-241", "step-1409", "step-2106"]
    with pytest.raises(SystemExit, match="kept weights"):
        by_step([tmp_path / "avg8"])


def test_a_checkpoint_from_before_a_setting_existed_resumes(
    tiny_checkpoint: Path, tarball: Path, tmp_path: Path
) -> None:
    train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, "--max-minutes", "1e-9")))
    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    del saved["state"].recipe["int8_aware"]  # as a run checkpointed before --int8-aware was written
    torch.save(saved, tmp_path / "checkpoint.pt")
    assert train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, "--resume"))).step == 24
    with pytest.raises(SystemExit, match="other settings: int8_aware"):
        train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, "--resume", "--int8-aware")))


def _window(tiny_checkpoint: Path, passage: str) -> Window:
    tokenizer = WindowTokenizer(load_tokenizer(tiny_checkpoint / "tokenizer.json"), max_length=48, stride=12)
    return tokenizer.windows("which program?", [passage])[0]


def test_every_annotators_answer_is_a_right_span(tiny_checkpoint: Path) -> None:
    passage = "the rural housing stability program began in 2019."
    answers = ("rural housing stability program", "housing stability program", "rural housing stability program")
    question = Question("q", "which program?", answers, tuple(passage.index(a) for a in answers))
    window = _window(tiny_checkpoint, passage)
    spans = answer_spans(window, question)
    said = [passage[window.offsets[s][0] : window.offsets[e][1]] for s, e in spans]
    assert said == ["rural housing stability program", "housing stability program"]  # the first annotator's first


def test_the_spans_loss_is_one_softmax_over_the_spans_the_reader_decodes(tiny_checkpoint: Path) -> None:
    passage = "the rural housing stability program began in 2019."
    window = _window(tiny_checkpoint, passage)
    answer = "rural housing stability program"
    found = span_labels(window, passage.index(answer), passage.index(answer) + len(answer))
    assert found is not None
    start, end = found
    shorter = (start + 1, end)
    example = Example(window, ((start, end), shorter), relevant=1.0)
    length = len(window)
    allowed, right = span_masks([example], length, max_answer_tokens=end - start)
    assert right[0, start, end]
    assert allowed[0, start, end]  # right though one token longer than the band
    assert allowed[0, 0, 0]  # no answer
    assert not allowed[0, 0, 1]
    assert allowed[0, start, end - 1]  # cut short: a rival
    starts, ends = torch.randn(1, length, generator=torch.Generator().manual_seed(3)).unbind(0)[0], torch.randn(length)
    scores = starts[:, None] + ends[None, :]
    by_hand = torch.logsumexp(scores[torch.from_numpy(allowed[0])], 0) - torch.logsumexp(
        scores[torch.from_numpy(right[0])], 0
    )
    got = spans_loss(starts[None], ends[None], [example], max_answer_tokens=end - start)
    assert got.item() == pytest.approx(by_hand.item(), rel=1e-5)
    # Raising the end one token short lowers the answers' share: the loss rises.
    ends[end - 1] += 4.0
    assert spans_loss(starts[None], ends[None], [example], max_answer_tokens=end - start).item() > got.item()


def test_a_spans_run_trains_and_resumes_only_as_one(tiny_checkpoint: Path, tarball: Path, tmp_path: Path) -> None:
    spans = ("--span-loss", "spans")
    state = train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, *spans, "--max-minutes", "1e-9")))
    assert state.step == 1
    assert math.isfinite(state.history[0])
    with pytest.raises(SystemExit, match="other settings: span_loss"):
        train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, "--resume")))
    assert train(parse_args(_args(tarball, tiny_checkpoint, tmp_path, *spans, "--resume"))).step == 24
