"""Model fixtures: a tiny random checkpoint exported once per session, a batch for its graphs,
and the shipped default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from answerbox.config import ModelSettings
from answerbox.models import Models, load_models
from answerbox.models.export import export_model
from answerbox.models.manifest import MANIFEST_FILE, ModelManifest
from answerbox.models.windows import WindowTokenizer, load_tokenizer, pad_windows

from onnx_models.tiny import make_tiny_checkpoint

DEFAULT_DIR = ModelSettings().dir
TINY_QUESTION = "who wrote the letter?"
TINY_PASSAGES = ["the letter was written by ada lovelace in 1843.", "a short one", "numbers 1 2 3 " * 12]


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-checkpoint"))


@pytest.fixture(scope="session")
def tiny_export(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-onnx")
    # The tiny config has 128 positions: windows must stay below that.
    export_model(tiny_checkpoint, out, variants=("fp32", "fp16", "int8"), max_length=48, stride=12)
    return out


@pytest.fixture(scope="session")
def tiny_inputs(tiny_export: Path) -> dict[str, np.ndarray]:
    """The tiny graphs' inputs: windows of different lengths padded into one batch, so padding
    must not change the real positions."""
    manifest = ModelManifest.load(tiny_export)
    tokenizer = WindowTokenizer(
        load_tokenizer(tiny_export / manifest.tokenizer), max_length=manifest.max_length, stride=manifest.stride
    )
    ids, mask, types = pad_windows(tokenizer.windows(TINY_QUESTION, TINY_PASSAGES))
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


@pytest.fixture(scope="session")
def reader_models(tiny_export: Path) -> Iterator[Models]:
    """The shipped default model when it exists (a fresh clone has it), else the tiny one."""
    directory = DEFAULT_DIR if (DEFAULT_DIR / MANIFEST_FILE).exists() else tiny_export
    models = load_models(ModelSettings(dir=directory, variant="int8", providers=["CPUExecutionProvider"]))
    yield models
    models.close()
