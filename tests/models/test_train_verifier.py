"""The claim verifier's training as a lent GPU runs it: pairs that travel as one small file, an
encoder from a reader-evaluator checkpoint under a fresh 3-way head, and a soup of two runs."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForSequenceClassification

from onnx_models.data.verifier_pairs import LABELS, Pair, load_pairs, save_pairs
from onnx_models.train.average import average
from onnx_models.train.modeling import ReaderEvaluatorModel, is_reader_evaluator_checkpoint
from onnx_models.train.verifier import parse_args, train, training_pairs

PAIRS = [
    Pair("the letter was written by ada lovelace in 1843.", "ada wrote the letter.", 0, "vitaminc"),
    Pair("the letter was written by ada lovelace in 1843.", "ada wrote it in 1900.", 1, "vitaminc"),
    Pair("numbers 1 2 3 — «quoted» text", 'The answer to "who?" is ada.', 2, "question_elsewhere", "who?"),
    Pair("a short one", "a short one", 0, "sentence", "what is it?"),
]


def test_pairs_travel_as_one_file_and_come_back_equal(tmp_path: Path) -> None:
    path = save_pairs(PAIRS, tmp_path / "pairs" / "p.jsonl.gz")
    assert load_pairs(path) == PAIRS
    # The file is the same bytes on every run: no timestamp in the gzip header.
    assert save_pairs(PAIRS, tmp_path / "again.jsonl.gz").read_bytes() == path.read_bytes()


def test_the_sample_takes_each_kind_from_its_own_side() -> None:
    sample = training_pairs(PAIRS * 5, vitaminc=3, contrastive=1, seed=0)
    assert sum(p.kind == "vitaminc" for p in sample) == 3
    assert sum(p.kind != "vitaminc" for p in sample) == 1


def test_a_verifier_trains_from_a_reader_checkpoint_and_two_runs_make_a_soup(
    tiny_checkpoint: Path, tmp_path: Path
) -> None:
    pairs = save_pairs(PAIRS * 4, tmp_path / "pairs.jsonl.gz")
    runs = []
    # The first run does not move (lr 0): its encoder is the reader's as it started.
    for seed, lr in ((1, "0"), (2, "1e-3")):
        out = tmp_path / f"run-{seed}"
        argv = ["--out", str(out), "--pairs", str(pairs), "--base", str(tiny_checkpoint), "--lr", lr]
        argv += ["--init", str(tiny_checkpoint), "--batch", "4", "--seed", str(seed), "--threads", "1"]
        train(parse_args(argv))
        runs.append(out)
    config = AutoConfig.from_pretrained(runs[0])
    assert config.id2label == dict(enumerate(LABELS))
    # Not marked as a reader-evaluator checkpoint, or the export would read it as one.
    assert not is_reader_evaluator_checkpoint(runs[0])
    started = AutoModelForSequenceClassification.from_pretrained(runs[0]).base_model.state_dict()
    reader = ReaderEvaluatorModel.load(tiny_checkpoint).encoder.state_dict()
    assert reader.keys() <= started.keys()
    assert all(torch.equal(started[k], reader[k]) for k in reader)
    soup = average(runs, tmp_path / "soup")
    one, two, mean = (load_file(str(p / "model.safetensors")) for p in (*runs, soup))
    assert any(not torch.equal(one[k], two[k]) for k in one)
    assert all(torch.allclose(mean[k], (one[k] + two[k]) / 2) for k in one if one[k].is_floating_point())
    logits = AutoModelForSequenceClassification.from_pretrained(soup)(input_ids=torch.tensor([[2, 5, 3]])).logits
    assert logits.shape == (1, len(LABELS))
