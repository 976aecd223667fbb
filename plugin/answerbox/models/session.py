"""One ONNX Runtime session per model file: provider choice with a clean CPU fallback.

onnxruntime-gpu lists CUDAExecutionProvider as *available* even on machines without a
GPU or CUDA libraries; the session then quietly runs on CPU. So the provider in use is
read back from the session, never assumed from the request.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from answerbox.core.errors import ModelError

__all__ = ["CPU", "OnnxSession", "import_onnxruntime"]

log = logging.getLogger(__name__)

CPU = "CPUExecutionProvider"
_DEVICE_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")


def import_onnxruntime() -> ModuleType:
    try:
        import onnxruntime
    except ModuleNotFoundError as exc:
        raise ModelError(
            "answerbox models need onnxruntime: pip install onnxruntime-gpu (it also runs on CPU)"
        ) from exc
    module: ModuleType = onnxruntime
    return module


@contextlib.contextmanager
def _quiet_provider_loading(ort: ModuleType) -> Iterator[None]:
    """ONNX Runtime logs a device provider that cannot load (no GPU, no CUDA libraries) as a red
    multi-line ERROR although it then runs on the CPU as asked; the outcome is logged once, above."""
    ort.set_default_logger_severity(4)  # fatal only
    try:
        yield
    finally:
        ort.set_default_logger_severity(2)  # ONNX Runtime's default: warnings and up


class OnnxSession:
    """Creates the session once; ``run`` is thread-safe (ONNX Runtime allows concurrent ``run``)."""

    def __init__(self, path: Path, *, providers: Sequence[str], intra_op_threads: int = 0) -> None:
        ort = import_onnxruntime()
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if intra_op_threads:
            options.intra_op_num_threads = intra_op_threads
        available = set(ort.get_available_providers())
        wanted = [p for p in providers if p in available] or [CPU]
        if CPU not in wanted:
            wanted.append(CPU)  # the last resort ONNX Runtime itself would pick
        try:
            with _quiet_provider_loading(ort):
                self._session = ort.InferenceSession(str(path), sess_options=options, providers=wanted)
        except Exception as exc:  # any provider failure: retry on the CPU once
            if wanted == [CPU]:
                raise ModelError(f"cannot load {path}: {exc}") from exc
            log.warning("ONNX session on %s failed (%s); falling back to %s", wanted, exc, CPU)
            try:
                self._session = ort.InferenceSession(str(path), sess_options=options, providers=[CPU])
            except Exception as cpu_exc:  # translated at this seam
                raise ModelError(f"cannot load {path}: {cpu_exc}") from cpu_exc
        self.provider: str = self._session.get_providers()[0]
        if self.provider != wanted[0]:
            # One line instead of ONNX Runtime's multi-line error about missing CUDA libraries.
            log.info("%s runs on %s (%s could not be loaded here)", path.name, self.provider, wanted[0])
        else:
            log.info("%s runs on %s", path.name, self.provider)
        self.input_names = tuple(i.name for i in self._session.get_inputs())
        self.output_names = tuple(o.name for o in self._session.get_outputs())
        # Whether runs bind their inputs and outputs: on a device by default (bench/gpu_serving.py
        # sets it both ways to time each).
        self.io_binding = self.provider in _DEVICE_PROVIDERS

    def run(self, inputs: Mapping[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[np.float32]]:
        feed = {name: inputs[name] for name in self.input_names}
        try:
            if self.io_binding:
                return self._run_bound(feed)
            values = self._session.run(list(self.output_names), feed)
        except Exception as exc:  # onnxruntime raises its own untyped errors: translate them
            raise ModelError(f"ONNX inference failed: {exc}") from exc
        return dict(zip(self.output_names, values, strict=True))

    def _run_bound(self, feed: Mapping[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[np.float32]]:
        # IOBinding copies inputs to the device once and lets the outputs stay there until
        # the single copy back, instead of ORT staging every tensor per call.
        binding = self._session.io_binding()
        for name, value in feed.items():
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
        for name in self.output_names:
            binding.bind_output(name, "cuda")
        self._session.run_with_iobinding(binding)
        return dict(zip(self.output_names, binding.copy_outputs_to_cpu(), strict=True))
