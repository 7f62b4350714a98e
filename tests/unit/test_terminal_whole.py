"""What the terminal shows at 80 columns: a long command whole (folded, never cut with "…"), a training's steps,
loss and tokens/s on its bar to the end (its last progress line is only `done`), and an unreachable host's
paragraph once in `eyas verify`, with one line naming the checks it stopped."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rich.console import Console

from eyas.agents.faces.cli.console import decision_text
from eyas.agents.faces.cli.run_ui import RunUI
from eyas.agents.faces.job_table import progress_cells
from eyas.agents.faces.progress_text import count_text, detail_text
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import JobState, JobStatus
from eyas.tools.jobs.job_progress import merged, progress_in
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.task_scope import task_scope
from eyas.tools.workloads.progress import TAG
from in_process import eyas
from jobs_config import UNREACHABLE

SPECULATIVE = (
    '{"method":"eagle3","model":"/root/.cache/eyas/work/runs/full-pipeline/drafter","num_speculative_tokens":3}'
)
SERVE = ["/root/.cache/eyas/target-venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
         "/root/.cache/eyas/models/SmolLM2-135M-Instruct", "--max-model-len", "2048", "--speculative-config",
         SPECULATIVE]  # fmt: skip


def squeezed(text: str) -> str:
    """Text without the breaks a terminal folded it at, to find a command in."""
    return "".join(text.split())


def cells(table: str, column: int) -> str:
    """One column of a printed table, its rows' lines one after the other."""
    return "".join(line.split("│")[column + 1] for line in table.splitlines() if line.count("│") > column + 1)


def test_eyas_show_prints_a_long_command_whole_at_80_columns(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path)
    command = f"echo {shlex.join(SERVE)}"  # run for real: the transcript holds what the host ran
    with task_scope("evaluate"):
        ran = recorder.host(LocalHost()).run(command, timeout=10)
    recorder.close()
    assert SPECULATIVE in ran.stdout

    shown = eyas("show", str(path), env={"COLUMNS": "80"})
    assert shown.code == 0, shown.output
    assert "…" not in shown.output
    assert squeezed(command) in squeezed(cells(shown.output, 4)), shown.output


def job(job_id: str, status: JobStatus) -> JobState:
    return JobState(job_id=job_id, host="local", status=status, directory=f"/work/jobs/{job_id}")


Polls = list[tuple[list[JobState], dict[str, dict[str, Any]]]]


def bars(polls: Polls, width: int) -> str:
    """The run UI's bars after these polls of one phase, as a terminal this wide shows them once they stop."""
    terminal = Console(record=True, width=width)
    ui = RunUI(terminal, bars=True)
    for states, progress in polls:
        ui.progress("train", states, progress)
    ui.note("the phase ended")
    return terminal.export_text()


def test_a_finished_training_keeps_its_steps_loss_and_tokens_per_s_on_its_bar() -> None:
    train, vocab = "r1.train", "r1.vocab"
    step = {"phase": "train", "done": 154, "total": 154, "epoch": 2, "loss": 2.3456, "tokens_per_s": 1234.4}
    polls: Polls = [
        ([job(train, JobStatus.RUNNING), job(vocab, JobStatus.RUNNING)], {train: step, vocab: {}}),
        ([job(train, JobStatus.SUCCEEDED), job(vocab, JobStatus.SUCCEEDED)],
         {train: {"phase": "done", "out": "/work/drafter"}, vocab: {}}),
    ]  # fmt: skip
    wide = bars(polls, 120)
    train_line = next(line for line in wide.splitlines() if train in line)
    assert "step 154/154" in train_line and "succeeded, loss 2.35, 1,234 tokens/s" in train_line, wide
    vocab_line = next(line for line in wide.splitlines() if vocab in line)
    assert "succeeded" in vocab_line and "0/1" not in wide, wide
    narrow = bars(polls, 80)  # wrapped, never cut
    assert "…" not in narrow and all(part in narrow for part in ("step 154/154", "loss 2.35", "tokens/s")), narrow


def test_a_training_that_ends_between_polls_shows_its_last_step_not_the_polls_before() -> None:
    """The run polls every few seconds and reads each job's log tail: a short training runs its last steps, its
    validation and its `done` between two polls. The bar must end at the last step, as the tail's lines merged
    (graph/supervise.py), not at the step the poll before saw (the example run's bar ended at "step 8/18")."""
    train = "r1.train"

    def line(phase: str, done: int, **figures: float) -> str:
        return TAG + json.dumps({"phase": phase, "done": done, "total": 18, **figures})

    before = "\n".join(line("train", step, loss=10.9) for step in range(1, 9))
    steps = [line("train", step, loss=9.0 + step / 10) for step in range(9, 19)]
    done = TAG + json.dumps({"phase": "done", "out": "/work/drafter"})
    after = "\n".join([*steps, line("val", 18, val_loss=9.5), done])
    polls: Polls = [([job(train, JobStatus.RUNNING)], {train: progress_in(before)}),
                    ([job(train, JobStatus.SUCCEEDED)], {train: progress_in(after)})]  # fmt: skip
    shown = bars(polls, 120)
    assert "step 18/18 succeeded, loss 10.8" in shown and "step 8/18" not in shown, shown


def test_an_evaluation_bar_counts_its_prompts_and_ends_with_its_measures() -> None:
    evaluate = "r1.evaluate"
    shown = bars([
        ([job(evaluate, JobStatus.RUNNING)], {evaluate: {"phase": "speculative-k3", "done": 20, "total": 20}}),
        ([job(evaluate, JobStatus.SUCCEEDED)],
         {evaluate: {"phase": "done", "k": 3, "mean_acceptance_length": 2.314, "speedup": 1.4}}),
    ], 120)  # fmt: skip
    assert "speculative-k3 20/20 succeeded, acceptance length 2.31, speedup 1.40x" in shown, shown


def test_progress_reads_in_units_and_keeps_what_a_later_line_lacks() -> None:
    download = merged({}, {"done": 1_200_000, "total": 3_000_000, "unit": "bytes"})
    assert count_text(download) == "1.20 MB of 3.00 MB"
    generate = merged(merged({}, {"done": 120, "total": 300, "failed": 2, "tokens_per_s": 88.0}), {"eta_s": None})
    assert (count_text(generate), detail_text(generate)) == ("120/300", "2 failed, 88.0 tokens/s")
    assert count_text(merged({}, {"phase": "server", "waiting_s": 3})) == ""
    # The evaluation measures its servers interleaved and reports a rate per server; a figure of any other shape
    # from the host is left out, never fatal to the run's screen.
    interleaved = {"done": 4, "total": 8, "tokens_per_s": {"baseline": 15.7, "speculative-k3": 12.25}}
    assert detail_text(interleaved) == "baseline 15.7, speculative-k3 12.2 tokens/s"
    assert detail_text({"done": 1, "loss": "nan?", "tokens_per_s": [1, 2], "speedup": 1.5}) == "speedup 1.50x"


def test_eyas_status_reads_a_finished_trainings_steps_from_its_log_tail() -> None:
    """A job's log ends with its `done` line and text between progress lines; the count and figures come through."""
    log = "\n".join([
        TAG + json.dumps({"phase": "train", "done": 153, "total": 154, "loss": 2.5, "tokens_per_s": 900.0}),
        TAG + json.dumps({"phase": "train", "done": 154, "total": 154, "loss": 2.4, "tokens_per_s": 910.0}),
        "saving the drafter", TAG + '{"phase": "do', TAG + json.dumps({"phase": "done", "out": "/work/drafter"}),
    ])  # fmt: skip
    cells = progress_cells(progress_in(log))
    assert cells["bar"] == "█" * 20 + " step 154/154" and cells["figures"] == "loss 2.4, 910 tokens/s", cells


def test_verify_says_an_unreachable_hosts_paragraph_once_and_names_the_checks_it_stopped(tmp_path: Path) -> None:
    config = tmp_path / "unreachable.toml"
    config.write_text(UNREACHABLE.format(known_hosts=tmp_path / "known_hosts"))
    (tmp_path / "known_hosts").write_text("")
    ran = eyas("verify", "--config", str(config), env={"COLUMNS": "80"})
    assert ran.code == ExitCode.UNREACHABLE, ran.output
    words = " ".join(ran.output.split())
    assert words.count("Cannot reach host 'box'") == 1, ran.output
    skipped = "not checked (they need the host): gpus, disk, binaries, packages, compat, server_flags"
    assert skipped in words, ran.output
    assert "Nothing accepts connections at http://127.0.0.1:1" in words  # the server's own finding keeps its row


def test_a_decision_reads_in_words_without_a_reason_or_a_name() -> None:
    typed = decision_text({"gate": "deploy", "action": "approve", "who": None, "reason": ""})
    assert " ".join(typed) == "gate deploy: approve by operator"
    said = decision_text({"gate": "train", "action": "reject", "who": "bob", "reason": "too long"})
    assert " ".join(said) == "gate train: reject by bob: too long"
