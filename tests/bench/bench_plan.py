"""The planner's accuracy on the embedded target: predicted against measured, side by side in one run.

A throughput probe of the live server (tools/planning/measure.py) predicts the generation time of a small run;
then generate.py really runs it, and extract.py (hf backend) really writes the hidden states. Two
predictions are compared with what happened: before the run (every answer assumed to reach max_tokens,
prompts as long as the server tokenizes the shipped set's) and after it (fed the generated file's counts).
Needs the embedded target's server (EYAS_TARGET_PORT, default 8765) and its venv.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.data import PROMPT_SET
from eyas.tools.planning.estimate import PlanInputs, estimate, token_stats
from eyas.tools.planning.measure import (
    measure_prompt_tokens,
    model_config_path,
    probe_throughput,
    read_model_dims,
    served_model_root,
)
from eyas.tools.target.embedded import EmbeddedTarget

WORKLOADS = Path(__file__).resolve().parents[2] / "tools" / "workloads"
SAMPLES, MAX_TOKENS, CONCURRENCY = 48, 64, 16


def main() -> None:
    target = EmbeddedTarget.from_env()
    config, http, host = target.config(), HttpClient(), LocalHost()
    dims = read_model_dims(host, model_config_path(host, served_model_root(http, config.target)))
    probe = probe_throughput(http, config.target, concurrency=CONCURRENCY)
    prompt_tokens = measure_prompt_tokens(http, config.target) or 0.0
    print(
        f"probe: {probe.tokens_per_s:.1f} tokens/s decoding + {probe.overhead_s:.3f} s per request "
        f"({probe.requests} requests at concurrency {CONCURRENCY}, {probe.wall_s:.1f} s)"
    )

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        single_turn = [line for line in PROMPT_SET.read_text().splitlines() if '"prompt"' in line][:SAMPLES]
        (directory / "in.jsonl").write_text("\n".join(single_turn) + "\n")
        out = directory / "out.jsonl"
        subprocess.run(
            [
                str(target.python), str(WORKLOADS / "generate.py"), "--input", str(directory / "in.jsonl"),
                "--output", str(out), "--base-url", config.target.base_url, "--model", config.target.model,
                "--concurrency", str(CONCURRENCY), "--max-tokens", str(MAX_TOKENS), "--temperature", "0",
            ],
            check=True, capture_output=True,
        )  # fmt: skip
        summary = json.loads(out.with_suffix(".summary.json").read_text())
        subprocess.run(
            [
                str(target.python), str(WORKLOADS / "extract.py"), "--model", str(target.model_dir),
                "--input", str(out), "--out", str(directory / "hs"), "--backend", "hf",
            ],
            check=True, capture_output=True,
        )  # fmt: skip
        written = sum(path.stat().st_size for path in (directory / "hs").glob("hs_*.safetensors"))
        files = len(list((directory / "hs").glob("hs_*.safetensors")))
        stats = token_stats(out.read_text().splitlines())
        assert stats is not None

    common = {"model": dims, "samples": SAMPLES, "generation_tok_s": probe.tokens_per_s, "free_disk_bytes": 10**12}
    common["generation_overhead_s"] = probe.overhead_s
    before = estimate(PlanInputs(max_tokens=MAX_TOKENS, prompt_tokens=prompt_tokens, **common))
    after = estimate(PlanInputs(max_tokens=MAX_TOKENS, measured=stats, **common))
    measured_s = summary["wall_s"]
    print(f"run: {SAMPLES} single-turn prompts, max_tokens {MAX_TOKENS}, concurrency {CONCURRENCY}: {measured_s:.1f} s")
    print(f"  {summary['tokens_per_s']:.1f} tokens/s; per sample {stats.avg_completion_tokens:.1f} answer tokens")
    print(f"  and {stats.avg_sequence_tokens:.1f} tokens in all; {files} hidden-state files, {written:,} bytes")
    print(f"{'':<36}{'predicted':>12}{'measured':>12}{'ratio':>8}")
    rows = [
        ("generation time, before (s)", before.generation_hours * 3600, measured_s),
        ("generation time, after (s)", after.generation_hours * 3600, measured_s),
        ("hidden-state bytes, before", before.hidden_state_bytes, written),
        ("hidden-state bytes, after", after.hidden_state_bytes, written),
    ]
    for name, predicted, actual in rows:
        print(f"{name:<36}{predicted:>12,.0f}{actual:>12,.0f}{predicted / actual:>8.3f}")


if __name__ == "__main__":
    main()
