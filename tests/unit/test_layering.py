"""The floor plan holds (ARCHITECTURE.md): imports run from the faces to the graph to the agents to the tools, the
packages of tools/ form no loop, the phases do not reach up into the gates or the life cycle, and the workloads
import nothing from eyas. Read from the source with `ast`, so an import hidden inside a function counts too."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = ("agents", "graph", "tools")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["eyas", *parts])


def imports() -> dict[str, set[str]]:
    """Each module of the package and the eyas modules it imports (at any depth of its code)."""
    found: dict[str, set[str]] = {}
    for folder in CODE:
        for path in (ROOT / folder).rglob("*.py"):
            name = module_name(path)
            package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
            targets: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                    module = ".".join([*base, node.module] if node.module else base) if node.level else node.module
                    targets.add(module or "")
                elif isinstance(node, ast.Import):
                    targets.update(alias.name for alias in node.names)
            found[name] = {target for target in targets if target == "eyas" or target.startswith("eyas.")}
    return found


IMPORTS = imports()


def offenders(source: str, target: str) -> list[str]:
    """Imports from modules under `source` into modules under `target`."""
    inside = lambda name, prefix: name == prefix or name.startswith(prefix + ".")  # noqa: E731
    return sorted(
        f"{module} imports {imported}"
        for module, targets in IMPORTS.items()
        if inside(module, source)
        for imported in targets
        if inside(imported, target)
    )


def on_a_loop(edges: dict[str, set[str]]) -> list[str]:
    """The nodes from which an import path leads back to themselves."""
    loops = []
    for start in sorted(edges):
        seen, todo = set(), list(edges[start])
        while todo:
            current = todo.pop()
            if current == start:
                loops.append(start)
                break
            if current not in seen:
                seen.add(current)
                todo.extend(edges.get(current, ()))
    return loops


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("eyas.graph", "eyas.agents.faces"),  # the state machine knows no face
        ("eyas.tools", "eyas.graph"),
        ("eyas.tools", "eyas.agents"),
        ("eyas.agents.llm", "eyas.graph"),
        ("eyas.agents.research", "eyas.graph"),
        ("eyas.agents.operator", "eyas.graph"),
        ("eyas.agents.operator_tools", "eyas.graph"),
        ("eyas.graph.phases", "eyas.graph.gates"),  # a phase does not reach up into its gate...
        ("eyas.graph.phases", "eyas.graph.life"),  # ... nor into the run's life cycle
    ],
)
def test_imports_run_one_way(source: str, target: str) -> None:
    assert offenders(source, target) == []


def test_the_workloads_import_nothing_of_eyas_but_each_other() -> None:
    """They run in the target's venv, where eyas is not installed (a sibling is imported as eyas's only when eyas
    itself imports the workload)."""
    imported = [line.split(" imports ")[1] for line in offenders("eyas.tools.workloads", "eyas")]
    assert [name for name in imported if not name.startswith("eyas.tools.workloads")] == []


def test_the_packages_of_tools_form_no_loop() -> None:
    """Package level: tools.settings, tools.hosts, ... (a flat module of tools/ counts as its own package)."""
    package = lambda name: ".".join(name.split(".")[:3])  # noqa: E731
    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in IMPORTS.items():
        if module.startswith("eyas.tools.") and not module.startswith("eyas.tools.workloads"):
            for target in targets:
                if target.startswith("eyas.tools.") and package(target) != package(module):
                    edges[package(module)].add(package(target))
    loops = on_a_loop(edges)
    assert loops == [], f"packages of tools/ on an import loop: {loops}"


def test_the_checker_sees_imports_inside_functions() -> None:
    """The cli imports most commands lazily; a checker that missed those would pass whatever they imported."""
    assert "eyas.graph.life.run_view" in IMPORTS["eyas.agents.faces.cli.report"]


def test_no_module_imports_itself_through_others() -> None:
    """An import circle (a imports b, b imports a, at any depth, inside a function too) means a piece the two share
    lives in the wrong one: it belongs in a module of its own that both import."""
    circles = on_a_loop(IMPORTS)
    assert circles == [], f"modules on an import circle: {circles}"
