"""Who may import whom in ``answerbox`` (issue 86), read from the source with ``ast``.

Every ``import`` counts, at module level or inside a function (a lazy import still ties the
two modules together), ``if TYPE_CHECKING:`` ones too. An edge goes to the module named, or
to the package where the name is not a module of its own (``from answerbox.x import Name``);
that importing ``a.b.c`` runs ``a/b/__init__.py`` as well is left out.

- no cycle between modules;
- ``answerbox.core`` imports nothing of answerbox outside ``core``;
- ``answerbox.pipeline`` never imports ``answerbox.processors`` or ``answerbox.http``;
- a processor package imports no other processor package, only what they share (``text``, ``answering``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.support.repo import REPO_ROOT

PLUGIN = REPO_ROOT / "plugin"
SHARED = {"answerbox.processors.text", "answerbox.processors.answering"}


def _modules() -> dict[str, Path]:
    """Module name → file; a package by its ``__init__.py``."""
    modules = {}
    for path in sorted((PLUGIN / "answerbox").rglob("*.py")):
        parts = path.relative_to(PLUGIN).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            named += (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                above = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{above}.{base}" if base else above
            named += (f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
    found = set()
    for target in named:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    modules = _modules()
    return {name: frozenset(_imported(name, path, modules)) for name, path in modules.items()}


def _in(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _processor_package(module: str) -> str | None:
    """``answerbox.processors.<package>`` that ``module`` belongs to, if any."""
    package = ".".join(module.split(".")[:3])
    if package.startswith("answerbox.processors.") and (PLUGIN / package.replace(".", "/") / "__init__.py").is_file():
        return package
    return None


def _cycle(graph: dict[str, frozenset[str]]) -> list[str]:
    """One cycle (its modules, the first repeated at the end), or none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        path.append(module)
        for target in sorted(graph[module]):
            if found := visit(target):
                return found
        path.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        if found := visit(module):
            return found
    return []


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert "answerbox.prompts.worker" in graph["answerbox.prompts.library"]  # module level
    assert "answerbox.processors.registry" in graph["answerbox.doctor"]  # inside a function
    assert _cycle({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"b"})}) == ["b", "c", "b"]


def test_no_import_cycles() -> None:
    cycle = _cycle(_graph())
    assert not cycle, " -> ".join(cycle)


def test_core_imports_nothing_above_it() -> None:
    upward = {
        (module, target)
        for module, targets in _graph().items()
        if _in(module, "answerbox.core")
        for target in targets
        if not _in(target, "answerbox.core")
    }
    assert not upward


def test_pipeline_imports_no_processor_and_no_http() -> None:
    upward = {
        (module, target)
        for module, targets in _graph().items()
        if _in(module, "answerbox.pipeline")
        for target in targets
        if _in(target, "answerbox.processors") or _in(target, "answerbox.http")
    }
    assert not upward


def test_processor_packages_import_one_another_only_through_what_they_share() -> None:
    across = set()
    for module, targets in _graph().items():
        own = _processor_package(module)
        for target in targets:
            other = _processor_package(target)
            if own is not None and other not in (None, own, *SHARED):
                across.add((module, target))
    assert not across, sorted(across)
