"""The served int8 rounding, simulated in PyTorch for quantization-aware fine-tuning.

``onnx_models.train.reader --int8-aware`` routes the encoder's Linears and embedding tables through this, so the
training forward pass sees what ``onnx_models.export.variants.to_int8`` will do at run time and
the weights learn to tolerate it (the output heads stay fp32 there, so here too). It mirrors
ONNX Runtime's dynamic quantization:

- activations: uint8, asymmetric, one scale for the whole tensor from its min and max with 0
  kept in range (``DynamicQuantizeLinear``); the feed-forward Linears' inputs are first
  divided per token by their max |x| and their products multiplied back (``row_scaling``);
- weights: int8, symmetric, one scale per output channel, 7-bit (``reduce_range``: [-64, 64],
  scale = max |w| / 64);
- embedding tables (word, position, token type): uint8, asymmetric, one scale per table.

Gradients pass straight through the rounding. Parameter names do not change, so
checkpoints, averaging and export work as before.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional

from onnx_models.train.modeling import ReaderEvaluatorModel

__all__ = ["simulate_int8"]

_WEIGHT_RANGE = (-64, 64)
_UINT8_RANGE = (0, 255)


def simulate_int8(model: ReaderEvaluatorModel) -> int:
    """Make every Linear and Embedding of ``model.encoder`` compute as the int8 graph will;
    returns how many."""
    linears = {name: m for name, m in model.encoder.named_modules() if isinstance(m, nn.Linear)}
    tables = [m for m in model.encoder.modules() if isinstance(m, nn.Embedding)]
    for name, linear in linears.items():
        forward = _per_token_int8_linear if _feed_forward(name) else _int8_linear
        linear.forward = functools.partial(forward, linear)  # type: ignore[method-assign]
    for table in tables:
        table.forward = functools.partial(_uint8_lookup, table)  # type: ignore[method-assign]
    return len(linears) + len(tables)


def _feed_forward(name: str) -> bool:
    """The modules ``row_scaling.feed_forward`` names in the exported graph."""
    return name.endswith("intermediate.dense") or (name.endswith("output.dense") and "attention" not in name)


def _int8_linear(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return functional.linear(_per_tensor_uint8(x), _weights(linear.weight), linear.bias)


def _per_token_int8_linear(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    scale = x.detach().abs().amax(dim=-1, keepdim=True).clamp(min=torch.finfo(torch.float32).tiny)
    y = functional.linear(_per_tensor_uint8(x / scale), _weights(linear.weight)) * scale
    return y if linear.bias is None else y + linear.bias


def _uint8_lookup(table: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    return functional.embedding(ids, _per_tensor_uint8(table.weight), table.padding_idx)


def _per_tensor_uint8(x: torch.Tensor) -> torch.Tensor:
    full = x.float()
    lo = full.detach().min().clamp(max=0.0)
    hi = full.detach().max().clamp(min=0.0)
    qmin, qmax = _UINT8_RANGE
    scale = ((hi - lo) / (qmax - qmin)).clamp(min=torch.finfo(torch.float32).tiny)
    zero_point = (qmin - lo / scale).round().clamp(qmin, qmax).to(torch.int32)
    return torch.fake_quantize_per_tensor_affine(full, scale, zero_point, qmin, qmax).to(x.dtype)


def _weights(weight: torch.Tensor) -> torch.Tensor:
    qmin, qmax = _WEIGHT_RANGE
    absmax = weight.detach().abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny)
    scale = absmax * 2 / (qmax - qmin)
    zero_point = torch.zeros(weight.shape[0], dtype=torch.int32, device=weight.device)
    return torch.fake_quantize_per_channel_affine(weight, scale, zero_point, 0, qmin, qmax)
