"""Rebuild a training checkpoint from a shipped fp32 ONNX model, so training can go on from it.

    PYTHONPATH=plugin python -m onnx_models.train.recover onnx_models/default/model.fp32.onnx OUT
    python -m onnx_models.train.reader --init OUT ...

Checkpoints live outside the repo and a fresh machine has none; the fp32 graph holds every
weight. The TorchScript exporter renames some weights (a MatMul's, transposed, becomes
``onnx::MatMul_N``), so the mapping is learned, not guessed: the base encoder is exported
with the same code, and each of its initializers is matched to the parameter it came from by
value. The trained graph has the same structure, hence the same initializer names.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from onnx_models.export.variants import export_model
from onnx_models.train.modeling import ReaderEvaluatorModel
from onnx_models.train.reader import default_encoder_dir

__all__ = ["load_graph_weights", "parameter_names", "recover"]

log = logging.getLogger(__name__)


def _initializers(path: Path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def _mapping(model: ReaderEvaluatorModel, exported: dict[str, np.ndarray]) -> dict[str, tuple[str, bool]]:
    """parameter name → (initializer name, stored transposed)."""
    mapping: dict[str, tuple[str, bool]] = {}
    for name, tensor in model.state_dict().items():
        value = tensor.detach().numpy()
        for init, array in exported.items():
            if array.shape == value.shape and np.array_equal(array, value):
                mapping[name] = (init, False)
                break
            if value.ndim == 2 and array.shape == value.T.shape and np.array_equal(array, value.T):
                mapping[name] = (init, True)
                break
    return mapping


def _check(model: ReaderEvaluatorModel, onnx_path: Path) -> None:
    """The rebuilt model must compute what the graph computes."""
    import onnxruntime as ort

    ids = torch.randint(0, int(model.config.vocab_size), (2, 24))
    mask, types = torch.ones_like(ids), torch.zeros_like(ids)
    with torch.no_grad():
        expected = [t.numpy() for t in model(ids, mask, types)]
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()})
    worst = max(float(np.abs(a - b).max()) for a, b in zip(expected, got, strict=True))
    if worst > 1e-3:
        raise SystemExit(f"the rebuilt model differs from {onnx_path} by {worst}")
    log.info("rebuilt model matches the graph (max difference %.2e)", worst)


def parameter_names(encoder: Path) -> dict[str, tuple[str, bool]]:
    """parameter name → (initializer name, stored transposed), learned by exporting ``encoder``."""
    base = ReaderEvaluatorModel.from_encoder(encoder)
    # Distinct head values, so that no two parameters can match the same initializer by chance.
    torch.manual_seed(0)
    for head in (base.qa_outputs, base.relevance):
        torch.nn.init.normal_(head.bias)
    with tempfile.TemporaryDirectory() as tmp:
        base.save(Path(tmp) / "base", encoder)
        export_model(Path(tmp) / "base", Path(tmp) / "onnx", variants=("fp32",))
        return _mapping(base, _initializers(Path(tmp) / "onnx" / "model.fp32.onnx"))


def load_graph_weights(
    model: ReaderEvaluatorModel, onnx_path: Path, mapping: dict[str, tuple[str, bool]]
) -> ReaderEvaluatorModel:
    """``model`` with the weights of the graph at ``onnx_path``, checked to compute what it computes."""
    trained = _initializers(onnx_path)
    state = model.state_dict()
    # Parameters the graph folded away (e.g. position ids) keep the model's values.
    for name, (init, transposed) in mapping.items():
        array = trained[init].T if transposed else trained[init]
        state[name] = torch.from_numpy(np.array(array, copy=True)).to(state[name].dtype)
    missing = sorted(n for n in state if n not in mapping and state[n].is_floating_point())
    if missing:
        raise SystemExit(f"no initializer found for {missing}")
    model.load_state_dict(state)
    _check(model.eval(), onnx_path)
    log.info("loaded %d tensors from %s", len(mapping), onnx_path)
    return model


def recover(onnx_path: Path, out: Path, encoder: Path) -> Path:
    model = load_graph_weights(ReaderEvaluatorModel.from_encoder(encoder), onnx_path, parameter_names(encoder))
    model.save(out, encoder)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("onnx", type=Path, help="an fp32 reader-evaluator graph (model.fp32.onnx)")
    parser.add_argument("out", type=Path, help="checkpoint directory to write (for train --init)")
    parser.add_argument("--encoder", type=Path, default=default_encoder_dir(), help="the encoder it was trained from")
    args = parser.parse_args(argv)
    recover(args.onnx, args.out, args.encoder)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    raise SystemExit(main(sys.argv[1:]))
