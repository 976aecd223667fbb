"""Calibration: the manifest's thresholds, rerank fusion weight, span cover margin and answer confidence."""
