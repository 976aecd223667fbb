"""A training run's resumable state: weights, optimizer, scheduler, position and RNG states.

Written atomically (a temporary file renamed over the old one), so a run stopped while it
saves keeps the previous checkpoint whole.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CHECKPOINT_FILE", "TrainingState", "load_state", "save_state"]

CHECKPOINT_FILE = "checkpoint.pt"


@dataclass(slots=True)
class TrainingState:
    step: int  # optimizer steps done: the next batch is the stream's batch number ``step``
    seconds: float  # training time spent before this process, over every resumed run
    history: list[float]  # loss per step
    recipe: dict[str, str]  # the arguments that shape data and schedule: a resume must match them


def _rng_states() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _restore_rng(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])


def save_state(
    directory: Path,
    state: TrainingState,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_FILE
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "state": state,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": _rng_states(),
        },
        tmp,
    )
    os.replace(tmp, path)
    return path


def load_state(
    directory: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    recipe: dict[str, str],
    added: dict[str, str] | None = None,
) -> TrainingState:
    """Restore everything saved by :func:`save_state`; refuses a checkpoint of another recipe.

    ``added``: settings newer than some checkpoints, with the value those ran with.
    """
    saved = torch.load(directory / CHECKPOINT_FILE, map_location="cpu", weights_only=False)
    state: TrainingState = saved["state"]
    before = {**(added or {}), **state.recipe}
    changed = sorted(k for k in recipe.keys() | before.keys() if recipe.get(k) != before.get(k))
    if changed:
        raise SystemExit(f"{directory / CHECKPOINT_FILE} was written with other settings: {', '.join(changed)}")
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    _restore_rng(saved["rng"])
    return state
