"""The package as a user installs it: a built wheel (not an editable checkout) holds every subpackage and
data file, and installed into a fresh venv, the `eyas` command starts and works with no checkout around.

Editable installs resolve `eyas` to the checkout, so they hide a folder left out of the wheel; only a real
wheel shows it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FOLDERS = ("agents", "graph", "tools", "prompts")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("eyas-*.whl")
    return built


def test_every_package_folder_and_data_file_is_in_the_wheel(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = [
        init.relative_to(ROOT).parent.as_posix()
        for folder in PACKAGE_FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
        if "__pycache__" not in init.parts
    ]
    missing = [package for package in packages if f"eyas/{package}/__init__.py" not in names]
    assert not missing, f"subpackages left out of the wheel: {missing}"
    for shipped in ("eyas/__init__.py", "eyas/__main__.py", "eyas/eyas.example.toml", "eyas/tools/data/prompts.jsonl"):
        assert shipped in names
    prompts = {path.name for path in (ROOT / "prompts").iterdir() if path.is_file()}
    assert prompts <= {Path(name).name for name in names if name.startswith("eyas/prompts/")}
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert "eyas/tools/packaging/wheel_layout.py" not in names, "the build hook is not part of the package"
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)


@pytest.mark.slow
def test_a_fresh_venv_with_the_wheel_runs_the_commands(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    eyas = env_dir / "bin" / "eyas"

    def run(*args: str, rc: int = 0) -> str:
        # Run outside the checkout, so nothing can be imported from it by accident.
        done = subprocess.run([*args], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == rc, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        return done.stdout

    located = run(str(python), "-c", "import eyas; print(eyas.__file__)")
    assert located.strip().startswith(str(env_dir)), located
    assert "verify" in run(str(eyas), "--help")
    assert run(str(python), "-m", "eyas", "--version").startswith("eyas ")
    for command in ("verify", "plan", "run", "demo", "chat", "research", "replay", "target", "config"):
        assert "Usage" in run(str(eyas), command, "--help")
    assert "gate_train" in run(str(eyas), "graph", "--mermaid")
    plan = run(
        str(eyas),
        "plan",
        "--json",
        "--hidden-size",
        "7168",
        "--num-layers",
        "61",
        "--vocab-size",
        "163840",
        "--samples",
        "25000",
        "--max-tokens",
        "4096",
        "--max-seq-len",
        "8192",
        "--prompt-tokens",
        "300",
        "--free-disk",
        "2.9TB",
        "--throughput",
        "2000",
    )  # fmt: skip
    figures = json.loads(plan)
    # 5.9 TB of hidden states on 2.9 TB: the plan fits by keeping some samples' on disk and fetching the rest online.
    assert figures["fits"] is True and figures["captured_layers"] == [2, 30, 58, 61]
    assert figures["extraction_mode"]["mode"] == "hybrid" and 0 < figures["extraction_mode"]["offline_samples"] < 25000
