"""What travels to a lent GPU and back: float16 shards under the size a file may come back at,
the training files as a folder ``train --data`` reads, a training checkpoint rebuilt from the
tree's packed graph with no encoder weights, and a clean start from the base encoder."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from onnx_models.data.squad import TRAIN_FILES, load_squad
from onnx_models.export.packing import pack_fp32
from onnx_models.train.modeling import ReaderEvaluatorModel
from onnx_models.train.travel import (
    base_bundle,
    checkpoint_from_tree,
    extract_data,
    fresh_start,
    from_shards,
    to_shards,
)


def test_shards_stay_under_the_limit_and_come_back_as_float16_rounded_weights(
    tiny_checkpoint: Path, tmp_path: Path
) -> None:
    weights = load_file(str(tiny_checkpoint / "model.safetensors"))
    largest = max(a.size * 2 for a in weights.values())
    limit = largest // 3  # so that the largest table must be cut into parts
    shards = to_shards(tiny_checkpoint, tmp_path / "shards", shard_bytes=limit)
    assert len(shards) > 3
    assert all(s.stat().st_size < limit + 4096 for s in shards)  # a zip header per array at most
    rebuilt = from_shards(tmp_path / "shards", tmp_path / "checkpoint", tokenizer=tiny_checkpoint)
    back = load_file(str(rebuilt / "model.safetensors"))
    assert back.keys() == weights.keys()
    for name, value in weights.items():
        np.testing.assert_array_equal(back[name], value.astype(np.float16).astype(value.dtype))
    assert (
        ReaderEvaluatorModel.load(rebuilt).config.num_hidden_layers
        == ReaderEvaluatorModel.load(tiny_checkpoint).config.num_hidden_layers
    )
    assert (rebuilt / "tokenizer.json").read_bytes() == (tiny_checkpoint / "tokenizer.json").read_bytes()


def test_a_weight_beyond_float16_range_is_refused(tiny_checkpoint: Path, tmp_path: Path) -> None:
    model = ReaderEvaluatorModel.load(tiny_checkpoint)
    with torch.no_grad():
        model.relevance.bias.fill_(1e6)
    model.save(tmp_path / "wide", tiny_checkpoint)
    with pytest.raises(ValueError, match=r"relevance\.bias"):
        to_shards(tmp_path / "wide", tmp_path / "shards")


def test_the_extracted_training_files_read_as_the_tarball_does(tarball: Path, tmp_path: Path) -> None:
    folder = extract_data(tmp_path / "data", tarball)
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{name}.gz" for name in TRAIN_FILES)
    assert load_squad(TRAIN_FILES, folder) == load_squad(TRAIN_FILES, tarball)
    with pytest.raises(FileNotFoundError, match="nyt"):
        load_squad(["nyt_v1.0.json"], tmp_path)


def test_a_checkpoint_rebuilt_from_the_packed_graph_computes_what_its_fp32_graph_does(
    tiny_checkpoint: Path, tiny_export: Path, tiny_inputs: dict[str, np.ndarray], tmp_path: Path
) -> None:
    # The tiny checkpoint's encoder stands for the base encoder (all-MiniLM-L6-v2).
    encoder = tmp_path / "encoder"
    ReaderEvaluatorModel.load(tiny_checkpoint).encoder.save_pretrained(encoder)
    shutil.copyfile(tiny_checkpoint / "tokenizer.json", encoder / "tokenizer.json")
    base = base_bundle(encoder, tmp_path / "base")
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_export, model_dir)
    pack_fp32(model_dir)
    (model_dir / "model.fp32.onnx").unlink()
    # Only what `base` wrote and the model directory: no encoder weights.
    assert not (base / "model.safetensors").exists()

    checkpoint = checkpoint_from_tree(model_dir, base, tmp_path / "checkpoint")

    import onnxruntime as ort

    graph = ort.InferenceSession(str(model_dir / "model.fp32.onnx"), providers=["CPUExecutionProvider"])
    expected = graph.run(None, tiny_inputs)
    with torch.no_grad():
        got = ReaderEvaluatorModel.load(checkpoint)(*(torch.from_numpy(a) for a in tiny_inputs.values()))
    mask = tiny_inputs["attention_mask"].astype(bool)
    for g, e in zip(got, expected, strict=True):
        g, e = g.numpy(), np.asarray(e)
        assert float(np.abs(g[mask] - e[mask]).max() if g.shape == mask.shape else np.abs(g - e).max()) < 1e-4


def test_a_clean_start_is_the_base_encoder_with_the_same_new_heads_each_time(
    tiny_checkpoint: Path, tmp_path: Path
) -> None:
    trained = ReaderEvaluatorModel.load(tiny_checkpoint)
    encoder = tmp_path / "encoder"
    trained.encoder.save_pretrained(encoder)
    shutil.copyfile(tiny_checkpoint / "tokenizer.json", encoder / "tokenizer.json")

    fresh_start(encoder, tmp_path / "start")
    fresh_start(encoder, tmp_path / "again")
    start = ReaderEvaluatorModel.load(from_shards(tmp_path / "start", tmp_path / "a", tokenizer=encoder))
    again = ReaderEvaluatorModel.load(from_shards(tmp_path / "again", tmp_path / "b", tokenizer=encoder))

    for name, value in trained.encoder.state_dict().items():
        torch.testing.assert_close(start.encoder.state_dict()[name], value.half().float(), rtol=0, atol=0)
    # The trained heads are gone: what starts clean has learned no answer.
    assert not torch.equal(start.qa_outputs.weight, trained.qa_outputs.weight.half().float())
    assert not start.relevance.bias.any()
    # Every run of a call starts from the same heads, so their mean is a soup.
    for name, value in start.state_dict().items():
        torch.testing.assert_close(again.state_dict()[name], value, rtol=0, atol=0)
