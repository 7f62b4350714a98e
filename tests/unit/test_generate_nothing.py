"""generate.py produces nothing, and says why (issue 28): a run whose output holds no sample at all ends 1 with the
server's first reason, never 0 with an empty file for the next phase. A real process against the scripted server of
tests/unit/test_generate.py (a real vLLM refusing --max-tokens over its max_model_len: tests/integration/
test_served_context.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from test_generate import WORKLOADS, output_ids, run, summary, write_prompts

from openai_stub import OpenAIStub, Reply, Request

sys.path.insert(0, str(WORKLOADS))
from shards import shard_of


def test_the_first_refusal_is_the_reason_given_not_the_last(tmp_path: Path) -> None:
    write_prompts(tmp_path / "in.jsonl", 3)

    def refuse(request: Request, stub: OpenAIStub) -> Reply:
        reason = "maximum context length is 2048 tokens" if request.key == "p0" else "some later reason"
        return Reply(status=400, body=json.dumps({"message": reason}).encode())

    with OpenAIStub(refuse) as stub:
        result = run(tmp_path, stub.url, "--concurrency", "1")
    assert result.returncode == 1, result.stderr
    said = "All 3 samples failed and none was generated; the first with HTTP 400: Error code: 400 - maximum context"
    assert f"{said} length is 2048" in result.stderr
    assert "some later reason" not in result.stderr
    assert summary(tmp_path)["error"].startswith("All 3 samples failed") and output_ids(tmp_path) == []


def test_an_abort_with_nothing_generated_names_the_first_failure_too(tmp_path: Path) -> None:
    write_prompts(tmp_path / "in.jsonl", 10)

    def first_400_then_503(request: Request, stub: OpenAIStub) -> Reply:
        if request.key == "p0":
            return Reply(status=400, body=b'{"message": "max_tokens is too large"}')
        return Reply(status=503, body=b"{}")

    with OpenAIStub(first_400_then_503) as stub:
        result = run(tmp_path, stub.url, "--retries", "0", "--abort-after", "4", "--concurrency", "1")
    assert result.returncode == 1 and "4 samples in a row failed, the last with HTTP 503" in result.stderr
    assert "None was generated; the first failure: HTTP 400: Error code: 400 - max_tokens is too large" in result.stderr


def test_an_input_with_no_sample_fails_and_an_empty_shard_does_not(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "a"}\n[1, 2]\n')
    with OpenAIStub() as stub:
        bad = run(tmp_path, stub.url)
        assert bad.returncode == 1 and "none of the 2 input lines is a sample (the first: input line 1" in bad.stderr
        assert stub.requests == 0

        (tmp_path / "in.jsonl").write_text("")
        empty = run(tmp_path, stub.url)
        assert empty.returncode == 1 and "holds no prompt" in empty.stderr

        # One sample, hashed to shard 0 of 2: shard 1's share is empty, which is all it had to do.
        ids = [f"p{i}" for i in range(20) if shard_of(f"p{i}", 2) == 0][:1]
        (tmp_path / "in.jsonl").write_text(json.dumps({"id": ids[0], "prompt": ids[0]}) + "\n")
        share = run(tmp_path, stub.url, "--shard", "1/2")
        assert share.returncode == 0, share.stderr
        assert summary(tmp_path)["total"] == 0
