"""A sample fetched online is checked against its token ids, by each trainer's own code, with the extraction server
train.py starts (its flags, its staging directory):

- eyas's (CPU): extract_vllm.VllmBackend.fetch_file refuses a file for other tokens with the sample and the first
  difference named, and deletes it; a matching file is handed over once the connector's lock is free.
- speculators' (CUDA): its ArrowDataset finds the server under the name it checks (the verifier path eyas serves
  it as), loads a matching file and deletes it; a file for other tokens is asked for three times and then skipped,
  not raised:
  the sample is never trained on, but training goes on (what hidden_states_mode.py's plan text says).

The trainers' code is real and runs in the target venv (online_fetch_probe.py). Stand-in: the extraction server
(extraction_server_standin.py, given the flags eyas built for vLLM), because a real vLLM cannot be made to write the
hidden states of other tokens; it answers in vLLM's format and writes a file this test made byte by byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction import TESTS, prepared_target, run_python, write_sample_file

pytestmark = pytest.mark.slow  # the workloads run in the target venv (`make target`); seconds, no vLLM

SAMPLE_TOKENS = [101, 7, 42, 9, 13]
OTHER_TOKENS = [([101, 7, 43, 9, 13], "token 2 is 43 in the file, 42 in the sample"),
                ([101, 7, 42, 9], "4 tokens in the file, 5 in the sample")]  # fmt: skip


def fetch(tmp_path: Path, trainer: str, file_tokens: list[int]) -> dict[str, object]:
    """The probe's result for a sample of SAMPLE_TOKENS when the server writes a file holding `file_tokens`."""
    states = tmp_path / "written-by-the-test.safetensors"
    write_sample_file(states, file_tokens, None)  # no loss mask, as vLLM's own files
    done = run_python(
        prepared_target(), TESTS / "online_fetch_probe.py", trainer, "--states", states,
        "--tokens", ",".join(map(str, SAMPLE_TOKENS)), "--work", tmp_path / "work", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(("file_tokens", "difference"), OTHER_TOKENS)
def test_eyas_refuses_a_file_for_other_tokens_by_name_and_deletes_it(
    tmp_path: Path, file_tokens: list[int], difference: str
) -> None:
    result = fetch(tmp_path, "eyas", file_tokens)
    assert "path" not in result
    message = str(result["refused"])
    assert "sample row 0 are for other tokens" in message and difference in message
    assert result["staging"] == []  # the file and its lock are gone: nothing of it can be trained on


def test_eyas_hands_over_a_file_for_the_sample_s_tokens(tmp_path: Path) -> None:
    result = fetch(tmp_path, "eyas", SAMPLE_TOKENS)
    assert "refused" not in result
    path = Path(str(result["path"]))
    assert result["staging"] == [path.name]  # the lock waited on and removed, the file kept for the caller
    assert path.read_bytes() == (tmp_path / "written-by-the-test.safetensors").read_bytes()


def test_speculators_dataset_reaches_the_server_eyas_starts_and_deletes_what_it_loaded(tmp_path: Path) -> None:
    result = fetch(tmp_path, "speculators", SAMPLE_TOKENS)
    assert "unavailable" not in result, result
    assert result["input_ids"] == SAMPLE_TOKENS
    assert result["hidden_shape"] == [5, 3 * 3]  # the three auxiliary layers of hidden size 3, side by side
    assert result["staging"] == []  # its file deleted once loaded, its lock once waited on


def test_speculators_dataset_skips_a_file_for_other_tokens_after_retrying(tmp_path: Path) -> None:
    result = fetch(tmp_path, "speculators", OTHER_TOKENS[0][0])
    assert "input_ids" not in result and result["counts_as_failure"] is True  # skipped, not raised
    assert "Token ids don't match" in str(result["unavailable"]) and "attempt 3/3" in str(result["unavailable"])
    assert result["staging"] == []  # each of the three files deleted once the check failed
