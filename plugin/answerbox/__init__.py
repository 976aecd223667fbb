"""answerbox: a drop-in search-pipeline extension for OpenSearch."""

__version__ = "0.3.0"

__all__ = ["__version__"]
