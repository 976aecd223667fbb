"""The one digest of a JSON-able value: keys of caches and of built pipelines."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["json_digest"]


def json_digest(value: Any) -> str:
    """sha256 of ``value`` as canonical JSON (sorted keys; what JSON lacks, as ``str``)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
