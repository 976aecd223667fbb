"""The rows of a run through answerbox, kept as JSON lines keyed by question id, so a run that is
stopped resumes where it was (``answer_confidence`` and ``bench/selective.py`` both run so)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from onnx_models.data.squad import Question

__all__ = ["Row", "load_rows", "resume"]

Row = dict[str, Any]


def load_rows(path: Path) -> dict[str, Row]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())} if path.exists() else {}


def resume(
    path: Path, questions: Sequence[Question], produce: Callable[[Question], Row], *, label: str, every: int = 50
) -> list[Row]:
    """The rows of ``questions`` in order: those ``path`` holds, and ``produce``'s for the others, appended as they
    come."""
    done = load_rows(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    todo = [q for q in questions if q.id not in done]
    started = time.perf_counter()
    with path.open("a") as out:
        for n, question in enumerate(todo, 1):
            done[question.id] = found = produce(question)
            out.write(json.dumps(found) + "\n")
            if n % every == 0:
                print(f"  {label}: {n}/{len(todo)} in {time.perf_counter() - started:.0f}s", flush=True)
    return [done[q.id] for q in questions]
