"""A run's ``train.log``: its trainer's progress, in the run's folder, whatever the console shows
(a lent GPU's call brings the log back beside the weights)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

__all__ = ["progress_log"]


@contextlib.contextmanager
def progress_log(log: logging.Logger, out: Path) -> Iterator[None]:
    """``log``'s records at INFO and above also go to ``out/train.log`` while the block runs."""
    out.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / "train.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.setLevel(level)
        log.removeHandler(handler)
        handler.close()
