"""Standalone scripts run on the target host by its ML interpreter; they never import eyas."""

from pathlib import Path

WORKLOADS_DIR = Path(__file__).resolve().parent


def workload_path(name: str) -> Path:
    path = WORKLOADS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"no workload script named {name} in {WORKLOADS_DIR}")
    return path
