"""Evaluation: the reader's and ranking's metrics, run rows, the verifier's thresholds and checkpoint averaging."""
