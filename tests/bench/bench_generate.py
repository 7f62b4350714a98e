"""generate.py's own costs, measured side by side in one run (ratios; absolute figures depend on the machine).

1. Client overhead: generate.py (AsyncOpenAI) against a minimal raw asyncio HTTP loop
(tests/support/raw_http_client.py),
   both as separate processes against the same scripted stub server at the same concurrency. With a stub that
   answers at once the figure is the pure client CPU cost per request; with a stub whose answers take 0.5-1.5 s
   (a real answer of 2K tokens takes 30-60 s on a GPU) it is what a run would see.
2. Resume: the time from start to the first new request with 100K finished samples in the output, against a
   fresh start, and the time to read the 100K finished ids alone.

Stand-in: tests/support/openai_stub.py, because the point is to measure the client, not a model.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent / "tools" / "workloads"))

import done_ids  # noqa: E402
from openai_stub import MODEL, OpenAIStub  # noqa: E402

GENERATE = TESTS.parent / "tools" / "workloads" / "generate.py"
RAW = TESTS / "raw_http_client.py"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_prompts(path: Path, count: int, start: int = 0) -> None:
    with path.open("w") as f:
        for i in range(start, start + count):
            f.write(json.dumps({"id": f"s{i}", "prompt": f"Explain topic number {i} in a few sentences."}) + "\n")


def generate_command(url: str, directory: Path, concurrency: int) -> list[str]:
    return [
        sys.executable, str(GENERATE), "--input", str(directory / "in.jsonl"), "--output", str(directory / "out.jsonl"),
        "--base-url", url, "--model", MODEL, "--concurrency", str(concurrency), "--progress-every", "5",
    ]  # fmt: skip


def overhead(requests: int, concurrency: int, latency_s: float) -> dict[str, float]:
    with OpenAIStub(parse=False, latency_s=latency_s) as stub, tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_prompts(directory / "in.jsonl", requests)
        cpu = children_cpu()
        raw = subprocess.run(
            [sys.executable, str(RAW), stub.url, str(requests), str(concurrency)],
            capture_output=True,
            text=True,
            check=True,
        )
        raw_cpu, cpu = children_cpu() - cpu, children_cpu()
        subprocess.run(generate_command(stub.url, directory, concurrency), capture_output=True, text=True, check=True)
        ours_cpu = children_cpu() - cpu
        summary = json.loads((directory / "out.summary.json").read_text())
        assert summary["done"] == requests, summary
    raw_rate = requests / json.loads(raw.stdout)["wall_s"]
    ours_rate = requests / summary["wall_s"]
    return {
        "raw_req_s": raw_rate,
        "generate_req_s": ours_rate,
        "ratio": ours_rate / raw_rate,
        "raw_cpu_ms_per_req": 1000 * raw_cpu / requests,
        "generate_cpu_ms_per_req": 1000 * ours_cpu / requests,
    }


def first_request_after(directory: Path, concurrency: int) -> tuple[float, int]:
    """Seconds from launching generate.py to the stub's first chat request, and the requests it made."""
    with OpenAIStub(parse=False) as stub:
        started = time.monotonic()
        subprocess.run(generate_command(stub.url, directory, concurrency), capture_output=True, check=True)
        assert stub.first_request_at is not None
        return stub.first_request_at - started, stub.requests


def resume(finished: int, pending: int) -> dict[str, float]:
    answer = "A thorough answer, as a target model would write it. " * 20
    with tempfile.TemporaryDirectory() as tmp:
        fresh, restart = Path(tmp, "fresh"), Path(tmp, "restart")
        fresh.mkdir()
        restart.mkdir()
        write_prompts(fresh / "in.jsonl", pending, start=finished)
        write_prompts(restart / "in.jsonl", finished + pending)
        with (restart / "out.jsonl").open("w") as f:
            for i in range(finished):
                turns = [
                    {"role": "user", "content": f"Explain topic number {i} in a few sentences."},
                    {"role": "assistant", "content": answer},
                ]
                usage = {
                    "prompt_tokens": 40,
                    "completion_tokens": 230,
                    "total_tokens": 270,
                    "sequence_tokens": 270,
                    "requests": 1,
                }
                f.write(
                    json.dumps({"id": f"s{i}", "conversations": turns, "usage": usage, "finish_reason": "stop"}) + "\n"
                )
        size = (restart / "out.jsonl").stat().st_size
        started = time.monotonic()
        done = done_ids.read_done(restart / "out.jsonl")
        read_s = time.monotonic() - started
        assert len(done) == finished
        fresh_s, _ = first_request_after(fresh, 16)
        restart_s, requests = first_request_after(restart, 16)
        assert requests == pending, f"the restart sent {requests} requests for {pending} missing samples"
    return {
        "output_mb": size / 1e6,
        "read_ids_s": read_s,
        "fresh_start_s": fresh_s,
        "restart_s": restart_s,
        "ratio": restart_s / fresh_s,
    }


def main() -> None:
    print("client overhead: generate.py vs a raw asyncio HTTP loop, same stub, same concurrency (higher is better)")
    print(
        f"{'scenario':<34}{'raw req/s':>11}{'ours req/s':>12}{'ratio':>8}{'raw ms CPU/req':>16}{'ours ms CPU/req':>17}"
    )
    for requests, concurrency, latency in ((6000, 200, 0.0), (2000, 200, 1.0), (3000, 16, 0.0)):
        row = overhead(requests, concurrency, latency)
        label = f"{requests} req, concurrency {concurrency}, {latency:g} s/answer"
        print(
            f"{label:<34}{row['raw_req_s']:>11.0f}{row['generate_req_s']:>12.0f}{row['ratio']:>8.2f}"
            f"{row['raw_cpu_ms_per_req']:>16.3f}{row['generate_cpu_ms_per_req']:>17.3f}"
        )
    print()
    row = resume(100_000, 1000)
    print(f"resume with 100,000 finished samples in the output ({row['output_mb']:.0f} MB):")
    print(f"  reading their ids: {row['read_ids_s']:.2f} s")
    print(f"  start to first new request: {row['restart_s']:.2f} s, vs {row['fresh_start_s']:.2f} s for a fresh start")
    print(f"  ratio restart / fresh: {row['ratio']:.1f}")


if __name__ == "__main__":
    main()
