from __future__ import annotations

import logging
from pathlib import Path

import pytest
from answerbox.core.errors import ModelError
from answerbox.models.session import CPU, OnnxSession, import_onnxruntime

_HAS_GPU = Path("/dev/nvidia0").exists()


@pytest.mark.skipif(_HAS_GPU, reason="checks the fallback on a host without a GPU")
def test_asking_for_cuda_without_a_gpu_falls_back_to_cpu_in_one_line(
    tiny_export: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # onnxruntime-gpu lists CUDA as available here even though it cannot run it; the CPU build
    # (answerbox[cpu]) does not list it at all, and asks for it are plain CPU sessions.
    if "CUDAExecutionProvider" not in import_onnxruntime().get_available_providers():
        pytest.skip("the CPU build of onnxruntime is installed: no CUDA provider to fall back from")
    with caplog.at_level(logging.INFO, logger="answerbox.models.session"):
        session = OnnxSession(tiny_export / "model.fp32.onnx", providers=["CUDAExecutionProvider"])
    assert session.provider == CPU
    assert caplog.messages == [
        "model.fp32.onnx runs on CPUExecutionProvider (CUDAExecutionProvider could not be loaded here)"
    ]
    # Not ONNX Runtime's own multi-line ERROR about the CUDA libraries on stderr.
    assert "onnxruntime" not in capfd.readouterr().err


def test_unknown_provider_is_ignored(tiny_export: Path) -> None:
    session = OnnxSession(tiny_export / "model.int8.onnx", providers=["NoSuchExecutionProvider"])
    assert session.provider == CPU


def test_missing_model_file_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        OnnxSession(tmp_path / "missing.onnx", providers=[CPU])
