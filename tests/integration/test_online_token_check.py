"""extract_vllm.VllmBackend.fetch_file checks the token ids in the file vLLM wrote against the sample's: a file
for other tokens is refused with the sample and the first difference named, and deleted; a matching one is handed
over. Both the online training fetcher (online_fetch.py) and the vllm extraction backend rely on this check.

The backend is the real one, run by the target venv's Python (online_fetch_probe.py): it starts the server
process, waits for it, asks for the sample, waits on the connector's lock and reads the file with safetensors.
Stand-in: the extraction server (extraction_server_standin.py), because a real vLLM cannot be made to write the
hidden states of other tokens; it answers in vLLM's format and writes a file this test made byte by byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction import TESTS, prepared_target, run_python, write_sample_file

pytestmark = pytest.mark.slow  # the workload runs in the target venv (`make target`); a few seconds

SAMPLE_TOKENS = [101, 7, 42, 9, 13]


def fetch(tmp_path: Path, file_tokens: list[int]) -> dict[str, object]:
    """fetch_file for a sample of SAMPLE_TOKENS when the server writes a file holding `file_tokens`."""
    states = tmp_path / "written-by-the-test.safetensors"
    write_sample_file(states, file_tokens, None)  # no loss mask, as vLLM's own files
    done = run_python(
        prepared_target(), TESTS / "online_fetch_probe.py", "--states", states,
        "--tokens", ",".join(map(str, SAMPLE_TOKENS)), "--work", tmp_path / "work", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    ("file_tokens", "difference"),
    [
        ([101, 7, 43, 9, 13], "token 2 is 43 in the file, 42 in the sample"),
        ([101, 7, 42, 9], "4 tokens in the file, 5 in the sample"),
    ],
)
def test_a_file_for_other_tokens_is_refused_by_name_and_deleted(
    tmp_path: Path, file_tokens: list[int], difference: str
) -> None:
    result = fetch(tmp_path, file_tokens)
    assert "path" not in result
    message = str(result["refused"])
    assert "sample conversation-7 are for other tokens" in message and difference in message
    assert result["staging"] == []  # the file and its lock are gone: nothing of it can be trained on


def test_a_file_for_the_sample_tokens_is_handed_over(tmp_path: Path) -> None:
    result = fetch(tmp_path, SAMPLE_TOKENS)
    assert "refused" not in result
    path = Path(str(result["path"]))
    assert result["staging"] == [path.name]  # the lock waited on and removed, the file kept for the caller
    assert path.read_bytes() == (tmp_path / "written-by-the-test.safetensors").read_bytes()
