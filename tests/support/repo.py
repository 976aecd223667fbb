"""The repository the tests run from (deploy files, guides, git): the package itself never looks there."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parents[2]
