"""Targets shaped like real ones: a custom architecture behind remote code, and a wrapper config around a text model.

Tiny models built offline by tiny_targets.py (random weights, SmolLM2's tokenizer); extraction and vocab run on
them with the target's Python, as the pipeline runs them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction import CONVERSATIONS, prepared_target, run_python, summary
from eyas.graph.phases.extract.jobs import ExtractionRequest, extract_job, extraction_sizes
from eyas.graph.phases.train.jobs import VocabRequest, vocab_job
from eyas.tools.checks.remote_code import trust_remote_code
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.planning.model_config import read_model_dims
from eyas.tools.settings.config import LOCAL, HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.target.embedded import EmbeddedTarget

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[1] / "support"
TEXT_HIDDEN, TEXT_LAYERS, VOCAB = 64, 6, 49152  # tiny_targets.TEXT
LAYERS = [2, 3, 6]  # [2, L//2, L-3] plus L for L = 6


@pytest.fixture(scope="module")
def target() -> EmbeddedTarget:
    return prepared_target()


def build(target: EmbeddedTarget, kind: str, out: Path) -> Path:
    done = run_python(target, TESTS / "tiny_targets.py", kind, out, "--tokenizer-from", target.model_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def extract(target: EmbeddedTarget, model: Path, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return run_python(
        target, WORKLOADS_DIR / "extract.py", "--model", model, "--input", CONVERSATIONS, "--out", out, *extra
    )


def vocab(target: EmbeddedTarget, model: Path, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    args = ("--input", CONVERSATIONS, "--model", model, "--draft-vocab-size", "64", "--out", out, *extra)
    return run_python(target, WORKLOADS_DIR / "vocab.py", *args)


def test_remote_code_target_is_refused_untrusted_and_runs_trusted(target: EmbeddedTarget, tmp_path: Path) -> None:
    model = build(target, "remote", tmp_path / "remote")
    for refused in (extract(target, model, tmp_path / "hs_refused"), vocab(target, model, tmp_path / "v_refused")):
        assert refused.returncode != 0
        assert "auto_map in config.json" in refused.stderr and "--trust-remote-code" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert not list((tmp_path / "hs_refused").glob("hs_*"))

    extracted = summary(extract(target, model, tmp_path / "hs", "--trust-remote-code"))
    assert extracted["files"] == 4 and extracted["layer_ids"] == LAYERS and extracted["hidden_size"] == TEXT_HIDDEN
    counted = summary(vocab(target, model, tmp_path / "vocab", "--trust-remote-code"))
    assert counted["target_vocab_size"] == VOCAB and counted["loss_tokens"] == extracted["loss_tokens"]


def test_wrapper_target_captures_its_text_decoder_and_agrees_with_the_planner(
    target: EmbeddedTarget, tmp_path: Path
) -> None:
    model = build(target, "wrapper", tmp_path / "wrapper")
    raw = json.loads((model / "config.json").read_text())
    assert raw["model_type"] == "llava" and "hidden_size" not in raw  # the dims are only in text_config
    extracted = summary(extract(target, model, tmp_path / "hs"))
    assert extracted["layer_ids"] == LAYERS and extracted["hidden_size"] == TEXT_HIDDEN

    # The files hold the language model's residual stream, not the vision tower's or the projector's.
    done = run_python(target, TESTS / "tiny_targets.py", "reference", "--model", model, "--files", tmp_path / "hs")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 4 and all(row["layers"] == [2, 3] and row["max_abs"] < 0.02 for row in rows)

    dims = read_model_dims(LocalHost(), str(model / "config.json"))
    counted = summary(vocab(target, model, tmp_path / "vocab"))
    assert (dims.hidden_size, dims.num_layers, dims.vocab_size) == (
        extracted["hidden_size"], extracted["layer_ids"][-1], counted["target_vocab_size"],
    )  # fmt: skip


UNIT = """[Service]
ExecStart=/opt/venv/bin/vllm serve /models/kimi --tensor-parallel-size 8 {flag} --port 8000
"""


@pytest.mark.parametrize(
    ("flag", "configured", "expected"),
    [
        ("--trust-remote-code", None, True),
        ("", None, False),
        ("--trust-remote-code", False, False),  # the config overrides the unit
        ("", True, True),
    ],
)
def test_remote_code_follows_the_unit_unless_configured(flag: str, configured: bool | None, expected: bool) -> None:
    unit = parse_unit_file(UNIT.format(flag=flag))
    assert unit.vllm is not None
    facts = {"vllm": unit.vllm.model_dump()}
    assert trust_remote_code(configured, facts) is expected
    request = ExtractionRequest(
        model_dir="/m", conversations="/c.jsonl", out_dir="/o", trust_remote_code=expected,
        **extraction_sizes(DEFAULT_SIZES),
    )  # fmt: skip
    vocab_request = VocabRequest(model_dir="/m", hidden_states_dir="/h", out_dir="/v", draft_vocab_size=8,
                                 trust_remote_code=expected)  # fmt: skip
    host = HostConfig(address=LOCAL, python="/venv/bin/python", workdir="/w")
    for spec in (extract_job("e", host, "/w", request), vocab_job("v", host, "/w", vocab_request)):
        assert ("--trust-remote-code" in spec.argv) is expected
