"""Hidden-state extraction on the embedded target: throughput against a bare forward pass, bytes against the formula.

1. hf backend: extract.py's own `run` over a corpus of varied lengths (its throughput leaves out loading
   the model), then the bare decoder forward pass over the very same token ids in the same batches, in
   alternating rounds in one process (extract_vs_forward.py). The ratio is what tokenizing, capturing,
   copying, writing and fsyncing the files cost.
2. Bytes on disk over the planner's formula (tokens x hidden x layers x 2 + token ids + mask), per run.
3. With --vllm: the vllm backend (startup left out) against plain vLLM prefill of the same prompts
   (max_tokens=1, same concurrency) on a server without the extraction method.

    python tests/bench/bench_extract.py [--samples 32] [--rounds 3] [--vllm]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.hidden_states_file import read_header, sample_files

BENCH = Path(__file__).resolve().parent
BATCH_TOKENS = 4096
PLAIN_PORT = 8821
SENTENCES = [
    "Hawks hunt from a perch and strike in a short dive.",
    "A river carries sand down to the sea, where it settles into deltas.",
    "Bread rises because yeast turns sugar into gas that the dough traps.",
    "Comets grow tails of dust and ice as they near the sun.",
]


def write_corpus(path: Path, samples: int) -> None:
    """Answers from about 30 to 700 tokens, so batching by length and padding are exercised."""
    with path.open("w") as handle:
        for index in range(samples):
            answer = " ".join(SENTENCES[(index + k) % len(SENTENCES)] for k in range(2 + (index * 7) % 50))
            turns = [
                {"role": "user", "content": f"Tell me about topic {index}."},
                {"role": "assistant", "content": answer},
            ]
            handle.write(json.dumps({"id": f"b{index}", "conversations": turns}) + "\n")


def run_json(argv: list[str], env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{argv[1]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def header_bytes(directory: Path) -> int:
    return sum(read_header(path)[1] for path in sample_files(directory))


def plain_prefill(target: EmbeddedTarget, files: Path, log: Path, concurrency: int) -> dict:
    """Plain vLLM (no extraction) prefilling the same prompts, timed like the vllm backend's requests."""
    prompts = []
    for path in sample_files(files):
        header, start = read_header(path)
        begin, end = header["token_ids"]["data_offsets"]
        raw = path.read_bytes()[start + begin : start + end]
        prompts.append(list(memoryview(raw).cast("q")))
    argv = [str(target.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(target.model_dir)]
    argv += ["--host", "127.0.0.1", "--port", str(PLAIN_PORT), "--max-model-len", "4097", "--api-server-count", "1"]
    argv += ["--enforce-eager"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}"}
    base = f"http://127.0.0.1:{PLAIN_PORT}"
    with log.open("wb") as out:
        server = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                if httpx.get(f"{base}/v1/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the plain vLLM server did not start; see {log}")
            time.sleep(1)
        model = httpx.get(f"{base}/v1/models").json()["data"][0]["id"]

        def one(prompt: list[int]) -> None:
            body = {"model": model, "prompt": prompt, "max_tokens": 1}
            httpx.post(f"{base}/v1/completions", json=body, timeout=600).raise_for_status()

        started = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, prompts))
        seconds = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(timeout=120)
    tokens = sum(map(len, prompts))
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating extraction/bare-forward rounds, plus warm-up"
    )
    parser.add_argument("--vllm", action="store_true", help="also benchmark the vllm backend (two server starts)")
    args = parser.parse_args()
    target = EmbeddedTarget.from_env()
    with tempfile.TemporaryDirectory(prefix="eyas-bench-extract-") as scratch:
        work = Path(scratch)
        corpus = work / "corpus.jsonl"
        write_corpus(corpus, args.samples)
        extract = [str(target.python), str(WORKLOADS_DIR / "extract.py"), "--model", str(target.model_dir)]
        extract += ["--input", str(corpus)]

        helper = [str(target.python), str(BENCH / "extract_vs_forward.py"), "--model", str(target.model_dir)]
        helper += ["--input", str(corpus), "--work", str(work), "--rounds", str(args.rounds)]
        measured = run_json([*helper, "--batch-tokens", str(BATCH_TOKENS)])
        rounds = [
            (r["extract"], r["bare"], r["extract"]["new_tokens_per_s"] / r["bare"]["tokens_per_s"]) for r in measured
        ]
        hf, bare, ratio = sorted(rounds, key=lambda row: row[2])[len(rounds) // 2]  # the median round
        cores, files = os.cpu_count(), hf["files"]
        per_sample = (hf["seconds"] - hf["startup_seconds"]) / files
        print(f"corpus: {files} samples, {hf['tokens']} tokens ({hf['tokens'] / files:.0f} per sample)")
        print(f"hf extraction: {hf['new_tokens_per_s']:.0f} tokens/s, model load {hf['startup_seconds']:.1f} s")
        print(f"bare forward pass, same tokens and batches: {bare['tokens_per_s']:.0f} tokens/s")
        print(f"  throughput ratio extraction / bare forward: {ratio:.3f} (median of {args.rounds} alternating rounds:")
        print("  " + ", ".join(f"{row[2]:.3f}" for row in rounds) + ")")
        print(f"  seconds per sample on {cores} cores: {per_sample:.3f} (+ {hf['startup_seconds']:.1f} s once)")
        headers = header_bytes(work / "hf-0") / files
        print(f"bytes on disk / formula: {hf['bytes_ratio']:.5f} ({headers:.0f} header bytes per file)")

        if args.vllm:
            vllm = run_json([*extract, "--out", str(work / "vllm"), "--backend", "vllm", "--concurrency", "4"])
            plain = plain_prefill(target, work / "hf-0", work / "plain-vllm.log", 4)
            speed, start = vllm["new_tokens_per_s"], vllm["startup_seconds"]
            print(f"vllm extraction: {speed:.0f} tokens/s, server start {start:.1f} s")
            print(f"plain vLLM prefill, same prompts, concurrency 4: {plain['tokens_per_s']:.0f} tokens/s")
            print(f"  throughput ratio vllm extraction / plain prefill: {speed / plain['tokens_per_s']:.3f}")
            print(f"  vllm extraction / hf bare forward: {speed / bare['tokens_per_s']:.3f}")
            print(f"bytes on disk / formula (vllm): {vllm['bytes_ratio']:.5f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
