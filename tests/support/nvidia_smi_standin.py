"""STAND-IN for nvidia-smi: there is no GPU on this machine, so a script on PATH prints real nvidia-smi output
(tests/support/fixtures, the exact CSV of each query eyas makes) for an 8-GPU host. The compute-apps fixture names its
process as {PID}, replaced by the pid of a real process the test started, so that production's process tree
is found on this machine as it would be on the GPU host."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def install_nvidia_smi(bin_dir: Path, *, holder_pid: int, prefix: str = "nvidia_smi_8gpu_h100") -> Path:
    """Write the stand-in into bin_dir (put it first on PATH); compute apps are held by `holder_pid`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    apps = bin_dir / "apps.csv"
    apps.write_text((FIXTURES / f"{prefix}_apps.csv").read_text().replace("{PID}", str(holder_pid)))
    gpus, uuids = FIXTURES / f"{prefix}.csv", FIXTURES / f"{prefix}_uuids.csv"
    topo = FIXTURES / "nvidia_smi_topo_pcie.txt"
    script = bin_dir / "nvidia-smi"
    script.write_text(
        f"""#!/bin/sh
# stand-in for nvidia-smi (no GPU here): real output of an 8-GPU host, by query
case "$*" in
  *--query-compute-apps=*) cat {shlex.quote(str(apps))} ;;
  *--query-gpu=index,uuid*) cat {shlex.quote(str(uuids))} ;;
  topo*) cat {shlex.quote(str(topo))} ;;
  *) cat {shlex.quote(str(gpus))} ;;
esac
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script
