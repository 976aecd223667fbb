"""ONNX reader and evaluator: one encoder, a span head and a relevance head, batched across callers.

Importing this package is cheap; onnxruntime loads inside :func:`load_models`.
"""

from answerbox.models.evaluator import Evaluator
from answerbox.models.loader import Models, load_models
from answerbox.models.manifest import ModelManifest
from answerbox.models.reader import Reader, ReaderSpan

__all__ = ["Evaluator", "ModelManifest", "Models", "Reader", "ReaderSpan", "load_models"]
