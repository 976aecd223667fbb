"""Model fixtures: a tiny random checkpoint exported once per session, a batch for its graphs,
the shipped default, and a bigbench tarball of small training files."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from answerbox.core.config import ModelSettings
from answerbox.models import Models, load_models
from answerbox.models.manifest import MANIFEST_FILE, ModelManifest
from answerbox.models.windows import WindowTokenizer, load_tokenizer, pad_windows

from onnx_models.data.squad import TRAIN_FILES
from onnx_models.export.variants import export_model
from onnx_models.train.tiny import make_tiny_checkpoint

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


_MEMBER_DIR = "bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts/"
TOPICS = ["apples grow on trees", "rivers flow to the sea", "bees make honey", "owls hunt at night"]


def _squad_file(name: str) -> bytes:
    articles = []
    for a, topic in enumerate(TOPICS):
        paragraphs = []
        for p in range(3):
            context = f"in {1900 + 10 * a + p} people said {topic}. other words fill part {p} here."
            answer = str(1900 + 10 * a + p)
            qas = [{"id": f"{name}-{a}-{p}", "question": f"when did people say {topic}?",
                    "answers": [{"text": answer, "answer_start": context.index(answer)}]}]  # fmt: skip
            paragraphs.append({"context": context, "qas": qas})
        articles.append({"title": topic, "paragraphs": paragraphs})
    return json.dumps({"data": articles}).encode()


@pytest.fixture(scope="session")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bigbench tarball holding small training files in the squad_shifts format."""
    path = tmp_path_factory.mktemp("data") / "bigbench.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name in TRAIN_FILES:
            data = _squad_file(name)
            info = tarfile.TarInfo(_MEMBER_DIR + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path
