"""What answerbox ships besides its code: the prompt templates, the default models and the sample corpus.

Installed from a wheel, they are package data under ``answerbox/bundled/`` (setup.cfg maps
the repository's ``templates/``, ``onnx_models/default``, ``onnx_models/verifier`` and
``deploy/embedded`` there), found
through ``importlib.resources``. In a checkout (an editable install, or ``PYTHONPATH=plugin``)
the package holds no copy, and they are the repository's own folders beside it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

__all__ = ["Shipped", "shipped"]

Shipped = Literal["templates", "model", "verifier", "sample"]

_IN_CHECKOUT: dict[Shipped, tuple[str, ...]] = {
    "templates": ("templates",),
    "model": ("onnx_models", "default"),
    "verifier": ("onnx_models", "verifier"),
    "sample": ("deploy", "embedded"),
}


def shipped(name: Shipped) -> Path:
    """The folder holding ``name``: the installed package's copy, else the checkout's."""
    installed = Path(str(resources.files("answerbox").joinpath("bundled", name)))
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[3].joinpath(*_IN_CHECKOUT[name])
