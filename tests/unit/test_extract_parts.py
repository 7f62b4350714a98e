"""The parts of extraction that need no model: layer ids, the reserve, the byte formula, the resume check."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from extraction import write_sample_file
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.workloads.hidden_states_file import formula_bytes, is_complete, remove_partial, sample_files

sys.path.insert(0, str(WORKLOADS_DIR))
from extract_plan import LayerCountMismatch, UsageError, check_layer_count, parse_reserve, resolve_layers


def test_default_layers_are_speculators_and_the_last_layer_is_always_captured() -> None:
    assert resolve_layers(None, 30) == [2, 15, 27, 30]
    assert resolve_layers(None, 61) == [2, 30, 58, 61]
    assert resolve_layers("27,2,2", 30) == [2, 27, 30]  # ascending as vLLM writes them, duplicates dropped
    assert resolve_layers("0,30", 30) == [0, 30]


@pytest.mark.parametrize("requested", ["31", "-1,4", "two"])
def test_impossible_layers_name_the_flag(requested: str) -> None:
    with pytest.raises(UsageError, match="--layers"):
        resolve_layers(requested, 30)


def test_reserve_takes_sizes_and_shares_of_the_filesystem() -> None:
    assert parse_reserve("1GiB", 10**12) == 2**30
    assert parse_reserve("500MB", 10**12) == 500 * 10**6
    assert parse_reserve("1.5 TB", 0) == 15 * 10**11
    assert parse_reserve("123", 10**12) == 123
    assert parse_reserve("5%", 2 * 10**12) == 10**11
    with pytest.raises(UsageError, match="--reserve"):
        parse_reserve("lots", 10**12)


def test_formula_gets_the_motivating_case_right() -> None:
    """Kimi-K2: 25,000 samples x 4,096 tokens, hidden 7168, 4 captured layers in bf16 is about 5.9 TB."""
    total = 25_000 * formula_bytes(4096, 7168, 4)
    assert 5.87e12 < total < 5.88e12
    assert formula_bytes(10, 576, 4, "float32") == 10 * (576 * 4 * 4 + 8 + 1)


def test_resume_check_accepts_only_the_same_sample_complete(tmp_path: Path) -> None:
    path = tmp_path / "hs_0.safetensors"
    write_sample_file(path, [1, 5, 9], [False, True, True])
    assert is_complete(path, [1, 5, 9], [2, 15, 27, 30], 3, "bfloat16")
    assert not is_complete(path, [1, 5, 8], [2, 15, 27, 30], 3, "bfloat16")  # other tokens
    assert not is_complete(path, [1, 5, 9], [2, 15, 27, 30], 4, "bfloat16")  # other hidden size
    assert not is_complete(path, [1, 5, 9], [2, 15, 27, 30], 3, "float16")  # other dtype
    assert not is_complete(path, [1, 5, 9], [1, 15, 27, 30], 3, "bfloat16")  # other layers
    path.write_bytes(path.read_bytes()[:-1])
    assert not is_complete(path, [1, 5, 9], [2, 15, 27, 30], 3, "bfloat16")  # truncated
    path.write_bytes(b"not a safetensors file")
    assert not is_complete(path, [1, 5, 9], [2, 15, 27, 30], 3, "bfloat16")
    assert not is_complete(tmp_path / "hs_9.safetensors", [1], [30], 3, "bfloat16")  # absent


def test_sample_files_are_in_index_order_and_leftovers_are_removed(tmp_path: Path) -> None:
    for index in (10, 2, 0):
        write_sample_file(tmp_path / f"hs_{index}.safetensors", [index], [True])
    (tmp_path / ".hs_3.safetensors.4242.tmp").write_bytes(b"partial")
    (tmp_path / "hs_notes.safetensors").write_bytes(b"")
    assert [path.name for path in sample_files(tmp_path)] == [
        "hs_0.safetensors",
        "hs_2.safetensors",
        "hs_10.safetensors",
    ]
    assert remove_partial(tmp_path) == 1 and not list(tmp_path.glob(".hs_*"))


def test_the_vllm_backend_stops_when_vllm_returns_another_number_of_layers() -> None:
    """What a vLLM that cannot hand out the last layer returns (three states for four ids): a readable stop,
    raised where each received file is read (extract_vllm.VllmBackend), which extract.py turns into exit 1."""
    check_layer_count(4, [2, 30, 58, 61], "s0")
    with pytest.raises(LayerCountMismatch) as stopped:
        check_layer_count(3, [2, 30, 58, 61], "sharegpt-17")
    assert isinstance(stopped.value, UsageError)
    assert str(stopped.value).startswith(
        "vLLM returned hidden states of 3 layer(s) for sample sharegpt-17, but 4 were asked for (layer ids "
        "[2, 30, 58, 61])"
    )
    assert "rerun with --backend hf, or upgrade vLLM" in str(stopped.value)
