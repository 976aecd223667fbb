"""retrieval_evaluator: the ONNX evaluator grades the hits and corrects bad retrieval (CRAG)."""

from answerbox.processors.retrieval_evaluator.processor import RetrievalEvaluator

__all__ = ["RetrievalEvaluator"]
