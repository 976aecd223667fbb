"""The packed fp32 graph: half the size in the repository, rebuilt by ``answerbox models unpack``
with float16 weights and the int8 graph's lookup tables, the int8 graph left as it was."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from answerbox.core.config import ModelSettings
from answerbox.core.errors import ModelError
from answerbox.models import load_models
from answerbox.models.manifest import PACKED_FP32
from answerbox.ops.cli import main
from onnx import numpy_helper

from onnx_models.export.packing import pack_fp32, unpack_fp32
from tests.models.conftest import DEFAULT_DIR
from tests.support.repo import REPO_ROOT

TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")
DEVICE_TREE_LIMIT = 64 * 2**20  # what the device tool lets travel to a lent GPU, carried paths included
GPU_CARRY = 14 * 2**20  # device_both.sh's .gpu: base, data, pairs and wheels, 12.1 MB measured


@pytest.fixture
def model_dir(tiny_export: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    shutil.copytree(tiny_export, directory)
    return directory


def _weights(path: Path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def _run(path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    outputs: list[np.ndarray] = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    return outputs


def test_unpack_rebuilds_fp32_from_float16_weights_and_the_int8_tables(
    model_dir: Path, tiny_inputs: dict[str, np.ndarray]
) -> None:
    original = _weights(model_dir / "model.fp32.onnx")
    expected_outputs = _run(model_dir / "model.fp32.onnx", tiny_inputs)
    int8_bytes = (model_dir / "model.int8.onnx").read_bytes()

    pack_fp32(model_dir)
    (model_dir / "model.fp32.onnx").unlink()
    # The CLI's command, as deploy/local/setup.sh runs it.
    assert main(["models", "unpack", str(model_dir)]) == 0

    rebuilt = _weights(model_dir / "model.fp32.onnx")
    assert rebuilt.keys() == original.keys()
    tables = [name for name in original if name.endswith(".weight") and any(t in name for t in TABLES)]
    assert len(tables) == 3
    int8 = _weights(model_dir / "model.int8.onnx")
    for name, value in original.items():
        assert rebuilt[name].dtype == value.dtype
        if name in tables:
            q, scale, zero = (int8[f"{name}_{part}"] for part in ("quantized", "scale", "zero_point"))
            np.testing.assert_array_equal(
                rebuilt[name], ((q.astype(np.int32) - zero.astype(np.int32)) * scale).astype(np.float32)
            )
        elif value.dtype == np.float32:
            np.testing.assert_array_equal(rebuilt[name], value.astype(np.float16).astype(np.float32))
        else:
            np.testing.assert_array_equal(rebuilt[name], value)
    assert (model_dir / "model.int8.onnx").read_bytes() == int8_bytes
    # What those roundings cost, within the int8 graph's tolerance (tests/models/test_export.py).
    for got, want in zip(_run(model_dir / "model.fp32.onnx", tiny_inputs), expected_outputs, strict=True):
        assert float(np.abs(got - want).max()) < 0.1


def test_the_packed_graph_holds_no_table_and_float16_weights(model_dir: Path) -> None:
    packed = onnx.load(str(pack_fp32(model_dir)))
    names = {t.name for t in packed.graph.initializer}
    assert not any(t in name for name in names for t in TABLES)
    assert {t.data_type for t in packed.graph.initializer} <= {onnx.TensorProto.FLOAT16, onnx.TensorProto.INT64}


def test_a_missing_fp32_graph_names_the_command_that_rebuilds_it(model_dir: Path) -> None:
    pack_fp32(model_dir)
    (model_dir / "model.fp32.onnx").unlink()
    with pytest.raises(ModelError, match=f"answerbox models unpack {model_dir}"):
        load_models(ModelSettings(dir=model_dir, variant="fp32", providers=["CPUExecutionProvider"]))


def test_the_shipped_fp32_graph_is_the_packed_one_rebuilt(tmp_path: Path) -> None:
    """The repository keeps only the packed graph; the fp32 graph served must be what it rebuilds to."""
    if not (DEFAULT_DIR / PACKED_FP32).exists():
        pytest.skip("onnx_models/default is not exported yet")
    for name in ("manifest.json", "model.int8.onnx", PACKED_FP32):
        shutil.copyfile(DEFAULT_DIR / name, tmp_path / name)
    assert (unpack_fp32(tmp_path)).read_bytes() == (DEFAULT_DIR / "model.fp32.onnx").read_bytes()


def test_the_tracked_tree_leaves_room_to_carry_a_training_run_to_a_lent_gpu() -> None:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = [REPO_ROOT / name for name in listed.decode().split("\0") if name]
    assert REPO_ROOT / "onnx_models/default/model.fp32.onnx" not in files
    size = sum(f.stat().st_size for f in files if f.is_file())
    assert size + GPU_CARRY <= DEVICE_TREE_LIMIT, f"the tracked tree is {size / 2**20:.1f} MiB"
