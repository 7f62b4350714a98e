"""A run's context on this machine, for the tests that drive one node or writer without a target: the local host
(its workdir under the test's folder), a target that nothing serves, and the run folder `r1`."""

from __future__ import annotations

import sys
from pathlib import Path

from eyas.graph.context import RunContext
from eyas.graph.runs import RunDir
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig


def local_context(tmp_path: Path, model_dir: str = "/models/m") -> RunContext:
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path / "work"))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="m", model_dir=model_dir),
    )
    return RunContext(
        config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=RunDir(tmp_path / "r1")
    )
