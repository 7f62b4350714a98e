"""What the README's two commands install, as make itself would run them (`make -n -B`: every recipe printed, none
run): `make demo` eyas alone, `make test` (and the developer targets) the dev and Ray extras on top."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pip_installs(target: str) -> list[str]:
    """The pip install lines of `make TARGET` from scratch."""
    shown = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), target], capture_output=True, text=True, check=True,
                           timeout=30)  # fmt: skip
    return [line for line in shown.stdout.splitlines() if "pip install" in line]


def test_the_demo_installs_eyas_without_the_dev_and_ray_extras() -> None:
    installs = pip_installs("demo")
    assert installs and all(line.endswith(" -e .") for line in installs), installs


@pytest.mark.parametrize("target", ["test", "test-fast", "lint"])
def test_the_tests_and_the_developer_targets_get_the_extras(target: str) -> None:
    assert any(line.endswith("-e '.[dev,ray]'") for line in pip_installs(target))
