"""answerbox: a drop-in search-pipeline extension for OpenSearch."""

__version__ = "0.1.0"

__all__ = ["__version__"]
