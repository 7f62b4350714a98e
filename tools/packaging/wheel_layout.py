"""Hatchling build hook: the repository's fixed top-level folders become the installed `eyas` package.

The repository keeps agents/, graph/, tools/ and prompts/ at its top level (plus `__init__.py` and
`__main__.py`), and they install as `eyas.agents`, `eyas.graph`, ... Every file under those folders goes into
the wheel, so a new subpackage cannot be forgotten. An editable install instead gets a one-line `.pth` import
hook that resolves `eyas` to the checkout, so edits take effect without reinstalling. This file is not shipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "eyas"
FOLDERS = ("agents", "graph", "tools", "prompts")
ROOT_FILES = ("__init__.py", "__main__.py", "eyas.example.toml")
SKIPPED_PARTS = {"__pycache__"}
SKIPPED_SUFFIXES = {".pyc", ".pyo"}


def editable_hook_line(root: Path) -> str:
    """A `.pth` line (run by `site` at start-up) that finds `eyas` in the checkout, and nothing else."""
    init, location = str(root / "__init__.py"), str(root)
    return (
        "import sys; sys.meta_path.append(type('EyasCheckout', (), {'find_spec': staticmethod("
        "lambda name, path=None, target=None: __import__('importlib.util').util.spec_from_file_location("
        f"name, {init!r}, submodule_search_locations=[{location!r}]) if name == {PACKAGE!r} else None)}}))\n"
    )


def package_files(root: Path) -> dict[str, str]:
    """Source path -> path in the wheel, for every file of the package."""
    here = Path(__file__).resolve()
    files = {str(root / name): f"{PACKAGE}/{name}" for name in ROOT_FILES}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root)
            if not path.is_file() or path.resolve() == here:
                continue
            if SKIPPED_PARTS.intersection(relative.parts) or path.suffix in SKIPPED_SUFFIXES:
                continue
            files[str(path)] = f"{PACKAGE}/{relative.as_posix()}"
    return files


class EyasLayout(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "eyas-layout"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root).resolve()
        if version == "editable":
            hook = Path(self.directory) / f"_{PACKAGE}_checkout.pth"
            hook.parent.mkdir(parents=True, exist_ok=True)
            hook.write_text(editable_hook_line(root))
            build_data["force_include_editable"][str(hook)] = hook.name
        else:
            build_data["force_include"].update(package_files(root))
