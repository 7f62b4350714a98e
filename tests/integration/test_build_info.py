"""Which eyas made a run: the version and the checkout's commit go into run.json and the run's evaluation.json."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import eyas
from eyas.graph.life.session import run_meta
from eyas.graph.runs import run_dir
from eyas.tools import build_info
from eyas.tools.config_source import ConfigSource
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget

ROOT = Path(eyas.__file__).resolve().parent


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_a_run_records_the_checkouts_commit_beside_its_evaluation(tmp_path: Path) -> None:
    source = ConfigSource(None, "test", EmbeddedTarget(tmp_path / "cache"))
    run = run_dir("built", tmp_path / "runs")
    run.write_meta(run_meta(source, None, DEMO))
    run.write_evaluation({"mean_acceptance_length": 1.8, "data": {"prompts": {"source": "sharegpt"}}})
    written = json.loads(run.evaluation.read_text())
    assert written["eyas"]["version"] == eyas.__version__
    assert written["eyas"]["commit"].removesuffix("+dirty") == git("rev-parse", "HEAD")
    assert written["eyas"]["commit"].endswith("+dirty") == bool(git("status", "--porcelain", "--untracked-files=no"))
    assert written["data"]["prompts"]["source"] == "sharegpt" and run.evaluation.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("inside_other_repository", [False, True])
def test_an_installed_copy_has_no_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside_other_repository: bool
) -> None:
    """A wheel's files are not a checkout of eyas, even inside another project's repository (a venv in it)."""
    if inside_other_repository:
        git("init", "-q", str(tmp_path), cwd=tmp_path)
    installed = tmp_path / "site-packages" / "eyas"
    installed.mkdir(parents=True)
    monkeypatch.setattr(build_info, "_ROOT", installed)
    assert build_info.eyas_build() == {"version": eyas.__version__, "commit": None}
