"""For the tests that assert what the checks find on a host without a GPU (this machine, CI): skipped, with the
reason, on a machine where the gpus check would find one (nvidia-smi on a non-interactive shell's PATH, as
tools/checks/gpus.py looks for it)."""

from __future__ import annotations

import pytest

from eyas.tools.hosts.local import LocalHost

NVIDIA_SMI = LocalHost().which("nvidia-smi")

without_a_gpu = pytest.mark.skipif(
    NVIDIA_SMI is not None,
    reason=f"this machine has a GPU ({NVIDIA_SMI}): the test asserts what the checks find on a host without one",
)
