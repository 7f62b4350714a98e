"""Shared by the extraction and vocabulary tests: run workloads with the target's Python, make inputs, read files."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.hidden_states_file import read_header

TESTS = Path(__file__).resolve().parent
CONVERSATIONS = TESTS / "fixtures" / "extract_conversations.jsonl"
PROBE = TESTS / "hidden_states_probe.py"
# What the fixture's usable conversations contain, in file order (a failed line and a non-JSON line are skipped).
FIXTURE_IDS = ["single", "two-turns", "sharegpt", "longer"]
FIXTURE_ANSWERS = [
    ["Red is a primary colour."],
    ["4", "That makes 12."],
    ["Bonjour !"],
    ["Hawks are birds of prey with sharp eyesight and hooked beaks. Falconers have trained young hawks, called "
     "eyasses, for centuries."],
]  # fmt: skip


def prepared_target() -> EmbeddedTarget:
    target = EmbeddedTarget.from_env()
    if not (target.python.is_file() and (target.model_dir / "config.json").is_file()):
        pytest.fail(f"the embedded target is not prepared under {target.cache_dir}; run `make target` first")
    return target


def run_python(
    target: EmbeddedTarget, script: Path, *args: str | Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    argv = [str(target.python), str(script), *(str(arg) for arg in args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def extract(target: EmbeddedTarget, conversations: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_python(
        target, WORKLOADS_DIR / "extract.py", "--model", target.model_dir, "--input", conversations, "--out", out, *args
    )


def probe(target: EmbeddedTarget, *args: str | Path) -> Any:
    done = run_python(target, PROBE, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # vLLM logs to stdout too; the result is last


def summary(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_conversations(path: Path, count: int) -> None:
    """`count` short, varied single- and two-turn conversations (the answers are written, not generated)."""
    subjects = ["hawks", "rivers", "bread", "comets", "violins", "glaciers", "bees", "lighthouses"]
    with path.open("w") as handle:
        for index in range(count):
            subject = subjects[index % len(subjects)]
            turns = [
                {"role": "user", "content": f"Tell me something about {subject} (question {index})."},
                {
                    "role": "assistant",
                    "content": f"Here is a fact about {subject}: " + "it is notable. " * (index % 5 + 1),
                },
            ]
            if index % 3 == 0:
                turns += [{"role": "user", "content": "Shorter please."}, {"role": "assistant", "content": subject}]
            handle.write(json.dumps({"id": f"c{index}", "conversations": turns}) + "\n")


def tensor_bytes(path: Path, name: str) -> bytes:
    header, data_start = read_header(path)
    begin, end = header[name]["data_offsets"]
    with path.open("rb") as handle:
        handle.seek(data_start + begin)
        return handle.read(end - begin)


def differing_tensors(first: Path, second: Path) -> dict[str, int]:
    """{tensor name: how many of its bytes differ} between two safetensors files, for short failure messages."""
    present = [read_header(path)[0].keys() - {"__metadata__"} for path in (first, second)]
    counts = {}
    for name in sorted(present[0] | present[1]):
        a, b = (
            tensor_bytes(path, name) if name in names else b""
            for path, names in zip((first, second), present, strict=True)
        )
        counts[name] = abs(len(a) - len(b)) + sum(x != y for x, y in zip(a, b, strict=False))
    return {name: count for name, count in counts.items() if count}


def write_sample_file(
    path: Path, token_ids: list[int], loss_mask: list[bool] | None, layers: str = "2,15,27,30"
) -> None:
    """A sample file written byte by byte from the safetensors spec, independently of the writer under test.

    Hidden size 3, every value 0.5; `loss_mask=None` leaves the tensor out (as vLLM's own files do).
    """
    seq, n_layers, hidden = len(token_ids), len(layers.split(",")), 3
    blobs = {"hidden_states": ("BF16", [seq, n_layers, hidden], b"\x00\x3f" * (seq * n_layers * hidden))}
    if loss_mask is not None:
        blobs["loss_mask"] = ("BOOL", [seq], bytes(int(flag) for flag in loss_mask))
    blobs["token_ids"] = ("I64", [seq], struct.pack(f"<{seq}q", *token_ids))
    header: dict[str, Any] = {"__metadata__": {"layer_ids": layers, "sample_id": path.stem}}
    data = b""
    for name, (dtype, shape, blob) in blobs.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def noise_training_data(target: EmbeddedTarget, root: Path, samples: int) -> dict[str, Path]:
    """Seeded noise in extract.py's format (train_probe.py synthetic) under `root`, and vocab.py's 256-token
    mapping for it: {"hs", "d2t", "t2d"}."""
    made = run_python(
        target, TESTS / "train_probe.py", "synthetic", "--out", root / "hs", "--samples", str(samples),
        "--pattern", "random",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    done = run_python(
        target, WORKLOADS_DIR / "vocab.py", "--hidden-states", root / "hs", "--model", target.model_dir,
        "--draft-vocab-size", "256", "--out", root / "vocab",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {"hs": root / "hs", "d2t": root / "vocab" / "d2t-256.npy", "t2d": root / "vocab" / "t2d-256.npy"}
