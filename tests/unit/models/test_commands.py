"""``answerbox models export|pack|unpack`` import the building side, ``onnx_models``, as any package
is imported: where it is not importable (the wheel does not carry it; a console script does not look
in the folder it runs from), the command says in one line where and how to run it. With it
importable: tests/models/test_export.py and tests/models/test_packing.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from answerbox.models.commands import add_models_subcommand

from tests.support.repo import REPO_ROOT


@pytest.mark.parametrize("command", ["export", "pack", "unpack"])
def test_without_onnx_models_the_command_says_where_to_run_it(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not importable, as from a console script or outside a checkout: the checkout is not on sys.path.
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if Path(entry or ".").resolve() != REPO_ROOT])
    for name in [name for name in sys.modules if name.split(".")[0] == "onnx_models"]:
        monkeypatch.delitem(sys.modules, name)
    parser = argparse.ArgumentParser()
    add_models_subcommand(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["models", command, str(tmp_path), *([str(tmp_path)] if command == "export" else [])])
    with pytest.raises(SystemExit) as exited:
        args.run(args)
    assert str(exited.value) == (
        f"answerbox models {command}: onnx_models is missing: run it from the root of an answerbox checkout "
        f"(where onnx_models/ lives) as `python -m answerbox.ops.cli models {command} ...`, "
        "with the [export] extra installed"
    )
    assert list(tmp_path.iterdir()) == []  # nothing written
