"""A deploy.json for the report and the dashboard to show: a drafter production turned away."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from eyas.tools.service.deploy_result import DeployResult, Probe


def rolled_back(run: Path) -> DeployResult:
    """deploy.json of a drafter production turned away, as in the demo: slower and rarely accepted. Its drop-in
    holds production's whole command line, one unbroken line of 330 characters."""
    argv = ["/root/.cache/eyas/target-venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
            "/root/.cache/eyas/models/SmolLM2-135M-Instruct", "--port", "8765"]  # fmt: skip
    deployed = [*argv, "--speculative-config", json.dumps({"method": "eagle3", "num_speculative_tokens": 3,
                "model": "/root/.cache/eyas/work/runs/full-pipeline/drafter"}, separators=(",", ":"))]  # fmt: skip
    result = DeployResult(
        kept=False,
        reason="speedup 0.73x is under the threshold 1x (8.6 tokens/s with the drafter, 11.8 without)",
        drop_in="/etc/systemd/system/vllm.service.d/zz-eyas-drafter.conf",
        drop_in_text=f"[Service]\nExecStart=\nExecStart={shlex.join(deployed)}\n",
        argv_before=argv,
        argv_deployed=deployed,
        before=Probe(requests=8, completion_tokens=256, seconds=21.7, tokens_per_s=11.8),
        after=Probe(requests=8, completion_tokens=256, seconds=29.8, tokens_per_s=8.6, mean_acceptance_length=1.03),
        speedup=8.6 / 11.8,  # as the deploy stores it (tools/service/deploy.py)
    )
    (run / "deploy.json").write_text(result.model_dump_json())
    return result
