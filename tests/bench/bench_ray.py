"""What a Ray job costs over a detached job, for the same short job, measured side by side in one run.

A real two-node Ray cluster on this machine (tests/support/ray_cluster.py: a head and a worker node, each its own `ray
start`) and detached jobs on this host run the same Python job, alternating, `--repeats` times each:
- start-up latency: from the launch call to the job's first line of its own (a file it writes with the time);
- wall time: from the launch call until the executor reports the job finished (polled every 0.1 s).
Printed as medians and as ratios Ray / detached. The Ray job asks for the worker node (its label), as a phase's
job on a cluster would ask for a GPU node.

Then a short real extraction (extract.py, hf backend, the embedded SmolLM2 on CPU, `--samples` conversations
made from eyas's shipped prompts): its wall time as one detached job, as one Ray job, and as two detached shards
at once (--shard 0/2 and 1/2), printed as the ratios Ray / detached and one job / two shards.

    .venv/bin/python tests/bench/bench_ray.py [--repeats 5] [--work-s 2] [--samples 48]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # tests/: the Ray cluster helper

from eyas.graph.phases.extract.jobs import ExtractionRequest, extract_job
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec
from eyas.tools.jobs.executor import JobExecutor
from eyas.tools.jobs.ray_jobs import RayJobs
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.settings.config import ClusterConfig, HostConfig
from eyas.tools.target.embedded import EmbeddedTarget
from ray_cluster import WORKER_LABEL, RayCluster

JOB = """
import sys, time
from pathlib import Path
Path(sys.argv[1]).write_text(repr(time.time()))
end = time.perf_counter() + float(sys.argv[2])
while time.perf_counter() < end:
    pass
"""


def measure(jobs: JobExecutor, job_id: str, workdir: Path, work_s: float) -> tuple[float, float]:
    """(start-up latency, wall time) of one job, in seconds."""
    marker = workdir / f"{job_id}.started"
    started = time.time()
    jobs.launch(JobSpec(job_id=job_id, argv=[sys.executable, "-c", JOB, str(marker), str(work_s)]))
    while not jobs.status(job_id).finished:
        time.sleep(0.1)
    wall = time.time() - started
    if not marker.exists():
        raise SystemExit(f"job {job_id} ended without starting its work:\n{jobs.tail(job_id)}")
    return float(marker.read_text()) - started, wall


def conversations(path: Path, count: int) -> Path:
    """`count` of the shipped prompts, each answered by itself: text enough for a forward pass."""
    import json

    prompts = Path(__file__).resolve().parents[2] / "tools" / "data" / "prompts.jsonl"
    rows = [json.loads(line) for line in prompts.read_text().splitlines() if line.strip()]
    with path.open("w") as out:
        for row in [row for row in rows if "prompt" in row][:count]:
            text = row["prompt"]
            pair = [{"role": "user", "content": text}, {"role": "assistant", "content": text}]
            out.write(json.dumps({"id": row["id"], "conversations": pair}) + "\n")
    return path


def extraction_walls(executors: dict[str, JobExecutor], workdir: Path, samples: int) -> dict[str, float]:
    """Wall seconds of the same extraction: one detached job, one Ray job, two detached shards at once."""
    target = EmbeddedTarget.from_env()
    host = HostConfig(address="local", python=str(target.python), workdir=str(workdir))
    workloads = upload_workloads(LocalHost(), str(workdir))
    data = conversations(workdir / "conversations.jsonl", samples)

    def request(out: str, shard: tuple[int, int] = (0, 1)) -> ExtractionRequest:
        return ExtractionRequest(
            model_dir=str(target.model_dir), conversations=str(data), out_dir=str(workdir / out), max_tokens=512,
            shard=shard,
        )  # fmt: skip

    def run(jobs: JobExecutor, specs: list[JobSpec]) -> float:
        started = time.time()
        for spec in specs:
            jobs.launch(spec)
        while not all(state.finished for state in jobs.statuses([spec.job_id for spec in specs])):
            time.sleep(0.1)
        failed = [spec.job_id for spec in specs if jobs.status(spec.job_id).rc != 0]
        if failed:
            raise SystemExit(f"extraction jobs {failed} failed:\n{jobs.tail(failed[0])}")
        return time.time() - started

    walls = {
        "one detached job": run(executors["detached"], [extract_job("x1.extract", host, workloads, request("one"))]),
        "one Ray job": run(executors["ray"], [extract_job("xr.extract", host, workloads, request("ray"))]),
    }
    shards = [extract_job(f"x2.extract-{i}", host, workloads, request("two", (i, 2))) for i in range(2)]
    walls["two detached shards"] = run(executors["detached"], shards)
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--work-s", type=float, default=2.0, help="the job's own CPU work")
    parser.add_argument("--samples", type=int, default=48, help="conversations of the short extraction")
    args = parser.parse_args()
    cluster = RayCluster()
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as scratch:
        workdir = Path(scratch)
        try:
            began = time.time()
            cluster.start()
            print(f"Ray cluster (head + worker) up in {time.time() - began:.1f} s")
            config = ClusterConfig.model_validate(
                {"executor": "ray", "ray_address": cluster.address, "resources": {"train": {"labels": WORKER_LABEL}}}
            )
            executors: dict[str, JobExecutor] = {
                "detached": Jobs(LocalHost(), str(workdir)),
                "ray": RayJobs(LocalHost(), str(workdir), config),
            }
            results: dict[str, list[tuple[float, float]]] = {name: [] for name in executors}
            for name in executors:
                (workdir / name).mkdir()
            for repeat in range(args.repeats):
                for name, jobs in executors.items():
                    results[name].append(measure(jobs, f"bench-{repeat}.train", workdir / name, args.work_s))
            walls = extraction_walls(executors, workdir, args.samples)
        finally:
            cluster.stop()
    print(f"{args.repeats} jobs each, {args.work_s:g} s of work per job, medians:")
    medians = {
        name: (statistics.median(s for s, _ in runs), statistics.median(w for _, w in runs))
        for name, runs in results.items()
    }
    for name, (start_s, wall_s) in medians.items():
        print(f"  {name:9} start-up {start_s:7.2f} s   wall {wall_s:7.2f} s")
    (ray_start, ray_wall), (det_start, det_wall) = medians["ray"], medians["detached"]
    print(f"ratio Ray / detached: start-up {ray_start / det_start:.1f}x, wall {ray_wall / det_wall:.2f}x")
    print(f"extraction of {args.samples} conversations (hf, SmolLM2 on CPU), wall:")
    for name, wall in walls.items():
        print(f"  {name:20} {wall:7.1f} s")
    print(
        f"ratio Ray / detached: {walls['one Ray job'] / walls['one detached job']:.2f}x; speedup of two shards over "
        f"one job: {walls['one detached job'] / walls['two detached shards']:.2f}x"
    )


if __name__ == "__main__":
    main()
