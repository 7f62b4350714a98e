"""Ray jobs: a run's jobs submitted to a Ray cluster through its Job Submission API.

The Ray submission id is eyas's job id, so a resumed eyas asks Ray for the job and re-attaches instead of
submitting twice. The workload scripts travel as the job's runtime_env working_dir; the data paths stay absolute
(shared storage on the cluster). Beside each job, eyas keeps a record in the work directory (`<workdir>/ray/jobs/
<job_id>/job.json`, and `secrets.env` when the job has secrets, which then never enter Ray's runtime env, which
the dashboard shows): a job with a record that the cluster no longer knows was lost with it (a restarted head).
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import time
from typing import Any

from eyas.tools.errors import JobError
from eyas.tools.hosts.host import Host
from eyas.tools.jobs.detached import SECRETS_FILE, Jobs, JobSpec, JobState, JobStatus, secrets_file
from eyas.tools.jobs.resources import job_resources
from eyas.tools.jobs.upload import WORKLOADS_DIR, remote_workloads_dir
from eyas.tools.settings.config import ClusterConfig

try:
    from ray.dashboard.modules.job.common import JOB_ACTOR_NAME_TEMPLATE
    from ray.job_submission import JobDetails, JobSubmissionClient
except ImportError:  # pragma: no cover - the message below says what to install
    JobSubmissionClient = None  # type: ignore[assignment,misc]

_CLIENT_ERRORS = (RuntimeError, ValueError, OSError)  # the client's HTTP errors, refused connections, bad input
_RAY_MONITOR_PERIOD_S = 1.0  # how often Ray's job manager checks a job's supervisor actor (JOB_MONITOR_LOOP_PERIOD_S)
_TERMINATED = 143  # a stopped job's exit code, as a shell reports a command ended by SIGTERM
# Ray's error types that mean the job's process or its node vanished, not that the command failed.
_VANISHED = {"JOB_SUPERVISOR_ACTOR_DIED", "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE"}
# The client logs every upload of the working_dir at INFO; eyas's own lines say what happens.
for _name in ("ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk", "ray._private.runtime_env"):
    logging.getLogger(_name).setLevel(logging.ERROR)


class RayJobs:
    """The jobs of one eyas work directory, run on the Ray cluster at `cluster.ray_address`."""

    def __init__(self, host: Host, workdir: str, cluster: ClusterConfig) -> None:
        if JobSubmissionClient is None:
            raise JobError(
                'The config sets [cluster] executor = "ray", but Ray is not installed in eyas\'s environment. '
                "Install it with `pip install 'eyas[ray]'` (or `pip install 'ray[default]'`), or remove the executor "
                "line to run jobs detached on the host."
            )
        assert cluster.ray_address is not None  # the config's validator requires it for executor = "ray"
        self.host = host
        self.address = cluster.ray_address
        self.cluster = cluster
        self.workloads_dir = remote_workloads_dir(workdir)
        self._records = Jobs(host, f"{workdir.rstrip('/')}/ray")  # ids and record directories, as detached jobs
        self._client = self._call(f"Connecting to the Ray job server at {self.address}", self._connect)

    def _connect(self) -> Any:
        return JobSubmissionClient(self.address)

    def _call(self, doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A client call; what fails becomes one readable JobError."""
        try:
            return fn(*args, **kwargs)
        except _CLIENT_ERRORS as exc:
            raise self._error(doing, exc) from None

    def _error(self, doing: str, exc: BaseException) -> JobError:
        return JobError(
            f"{doing} failed: {_reason(exc)}. Check that the Ray head is up (`ray status` on it) and that [cluster] "
            "ray_address is its dashboard's HTTP address (port 8265 by default; reachable from here when the head "
            "was started with `ray start --head --dashboard-host 0.0.0.0`)."
        )

    # --- launching

    def entrypoint(self, spec: JobSpec) -> str:
        """The job's shell command: owner-only files (umask 077, as a detached job's run.sh), the workload scripts
        from Ray's copy of the working_dir, secrets from the record's file, then the job's own cwd."""
        q = shlex.quote
        prefix = f"{self.workloads_dir}/"
        parts = ["umask 077", 'EYAS_WORKLOADS="$PWD"']  # Ray starts the entrypoint in its unpacked working_dir
        if spec.secrets:
            parts.append(f". {q(f'{self._records.directory(spec.job_id)}/{SECRETS_FILE}')} || exit 126")
        if spec.cwd:
            parts.append(f"cd {q(spec.cwd)} || exit 126")
        argv = [f'"$EYAS_WORKLOADS"/{q(arg[len(prefix) :])}' if arg.startswith(prefix) else q(arg) for arg in spec.argv]
        parts.append("exec " + " ".join(argv))
        return "; ".join(parts)

    def runtime_env(self, spec: JobSpec) -> dict[str, Any]:
        base = dict(self.cluster.runtime_env)
        env_vars = {**dict(base.pop("env_vars", None) or {}), **spec.env}  # type: ignore[call-overload]
        return {**base, "working_dir": str(WORKLOADS_DIR), "env_vars": env_vars}

    def submission(self, spec: JobSpec) -> dict[str, Any]:
        """The keyword arguments of `submit_job` for this job (shown at the gate, recorded in job.json)."""
        resources = job_resources(self.cluster, spec.job_id)
        submission: dict[str, Any] = {
            "entrypoint": self.entrypoint(spec),
            "submission_id": spec.job_id,
            "runtime_env": self.runtime_env(spec),
            "metadata": {"eyas_job": spec.job_id},
            "entrypoint_num_cpus": resources.num_cpus,
            "entrypoint_num_gpus": resources.num_gpus,
            "entrypoint_memory": resources.memory,
        }
        if resources.labels:
            submission["entrypoint_label_selector"] = dict(resources.labels)
        return submission

    def launch(self, spec: JobSpec) -> JobState:
        """Submit the job unless Ray knows its id; then only report the job's state (re-attach)."""
        state = self.status(spec.job_id)
        if state.status is not JobStatus.ABSENT:
            return state  # known to Ray, or lost with the cluster: `forget` comes first (the failure gate's retry)
        directory = self._records.directory(spec.job_id)
        submission = self.submission(spec)
        if spec.secrets:
            self.host.write_text(f"{directory}/{SECRETS_FILE}", secrets_file(spec.secrets), mode=0o600)
        record = {"address": self.address, **submission, "secrets": sorted(spec.secrets)}
        self.host.write_text(f"{directory}/job.json", json.dumps(record, indent=1), mode=0o600)
        try:
            self._client.submit_job(**submission)
        except _CLIENT_ERRORS as exc:
            if "already exists" not in str(exc):  # else another launcher of the same id was first: re-attach
                raise self._error(f"Submitting job {spec.job_id}", exc) from None
        return self.status(spec.job_id)

    # --- reading

    def statuses(self, job_ids: list[str]) -> list[JobState]:
        if not job_ids:
            return []
        known = {
            details.submission_id: details
            for details in self._call("Listing the Ray cluster's jobs", self._client.list_jobs)
            if details.submission_id in job_ids
        }
        return [self._state(job_id, known.get(job_id)) for job_id in job_ids]

    def status(self, job_id: str) -> JobState:
        return self.statuses([job_id])[0]

    def _state(self, job_id: str, details: JobDetails | None) -> JobState:
        directory = self._records.directory(job_id)
        fields: dict[str, Any] = {"job_id": job_id, "host": f"ray {self.address}", "directory": directory}
        if details is None:
            # A record without a job: the cluster forgot it (its head restarted without persistence).
            recorded = self.host.exists(f"{directory}/job.json")
            return JobState(**fields, status=JobStatus.LOST if recorded else JobStatus.ABSENT)
        fields["started_at"] = details.start_time / 1000 if details.start_time else None
        fields["finished_at"] = details.end_time / 1000 if details.end_time else None
        ray_status = str(details.status.value)
        if ray_status in ("PENDING", "RUNNING"):
            return JobState(**fields, status=JobStatus.RUNNING)
        if ray_status == "SUCCEEDED":
            return JobState(**fields, status=JobStatus.SUCCEEDED, rc=0)
        code = details.driver_exit_code
        if ray_status == "STOPPED":
            return JobState(**fields, status=JobStatus.FAILED, rc=_TERMINATED if code is None else _shell_rc(code))
        error = str(getattr(details.error_type, "value", details.error_type) or "")
        if code is None and error in _VANISHED:
            return JobState(**fields, status=JobStatus.LOST)
        # No exit code otherwise: the command never started (a runtime env that failed to set up, say).
        return JobState(**fields, status=JobStatus.FAILED, rc=1 if code is None else _shell_rc(code))

    def list(self) -> list[JobState]:
        result = self.host.run(f"ls -1 {shlex.quote(self._records.root)} 2>/dev/null", timeout=30)
        return self.statuses(sorted(result.stdout.split()))

    def tail(self, job_id: str, lines: int = 50) -> str:
        """The end of the job's log; from Ray's last message when the node that ran it is gone."""
        try:
            text = self._client.get_job_logs(job_id)
        except _CLIENT_ERRORS:
            try:
                text = self._client.get_job_info(job_id).message or ""
            except _CLIENT_ERRORS:
                return ""
        kept = text.splitlines()[-lines:] if lines > 0 else []
        return "\n".join(kept) + ("\n" if kept else "")

    # --- control

    def cancel(self, job_id: str, grace_s: float = 10.0) -> JobState:
        """Ask Ray to stop the job (SIGTERM, then SIGKILL after Ray's own wait) and wait until it ended."""
        state = self.status(job_id)
        if state.status is not JobStatus.RUNNING:
            return state
        self._call(f"Stopping job {job_id}", self._client.stop_job, job_id)
        deadline = time.monotonic() + grace_s + 30
        while state.status is JobStatus.RUNNING and time.monotonic() < deadline:
            time.sleep(0.2)
            state = self.status(job_id)
        return state

    def forget(self, job_id: str) -> None:
        """Remove a finished job from Ray and its record, so the same id can be submitted afresh."""
        state = self.status(job_id)
        if state.status is JobStatus.RUNNING:
            raise JobError(f"Job {job_id} is still running on the Ray cluster; cancel it before forgetting it.")
        self._wait_released(job_id)
        try:
            self._client.delete_job(job_id)
        except _CLIENT_ERRORS as exc:
            if "does not exist" not in str(exc):  # else only the record is left: a cluster that forgot the job
                raise self._error(f"Deleting job {job_id} from the Ray cluster", exc) from None
        directory = shlex.quote(self._records.directory(job_id))
        self.host.run(f"rm -rf -- {directory}", timeout=60).check(f"Removing the record of job {job_id}")

    def _wait_released(self, job_id: str, timeout_s: float = 120.0) -> None:
        """Wait until Ray has let go of a finished job, before deleting it. Ray's job manager watches a job
        through its supervisor actor, by id, until it sees that actor dead, and a watch that finds the job's
        record gone writes it back as failed ("supervisor actor died"); an id submitted again while the old watch
        lives is watched by it, and reported failed when the old actor goes. So: the old supervisor dead, then
        Ray's own poll period twice over."""
        from ray.util.state import list_actors

        name = JOB_ACTOR_NAME_TEMPLATE.format(job_id=job_id)
        deadline = time.monotonic() + timeout_s

        def alive() -> bool:
            try:
                actors = list_actors(address=self.address, filters=[("name", "=", name)], raise_on_missing_output=False)
            except _CLIENT_ERRORS:
                return False  # no state API to ask (an older head): nothing to wait for
            return any(actor.state != "DEAD" for actor in actors)

        while alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2 * _RAY_MONITOR_PERIOD_S)


def _shell_rc(code: int) -> int:
    """Ray reports a signal as its negative number; a shell as 128 + the number, as detached jobs do."""
    return 128 - code if code < 0 else code


def _reason(exc: BaseException) -> str:
    """The line of a client error that says what went wrong: Ray wraps the server's traceback in its message."""
    lines = [line.strip() for line in str(exc).splitlines() if len(line.strip()) > 1]
    raised = [line for line in lines if re.match(r"^[A-Za-z_.]+(Error|Exception): ", line)]
    return (raised or lines or [type(exc).__name__])[-1].rstrip(".")
