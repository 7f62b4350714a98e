"""Host text reaches the operator's terminal shown, never obeyed: a transcript's or a job log's ESC sequences, C1
codes and bidi overrides come out as their escapes (`\\x1b`), while eyas's own colours still work and ordinary
text (accents, tabs, newlines) is untouched."""

from __future__ import annotations

import io
from pathlib import Path

from eyas.agents.faces.cli.console import HostTextConsole
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.redacted_stream import RedactedStream
from eyas.tools.recording.task_scope import task_scope
from eyas.tools.recording.visible import visible
from in_process import eyas
from jobs_config import jobs_config
from waiting import wait_for

# What a hostile log line can hold: a window title and a clipboard write (OSC), a screen clear and a colour (CSI),
# a C1 CSI, and a right-to-left override that would show "txt.exe" as "exe.txt".
HOSTILE = "boom \x1b]0;pwned\x07\x1b]52;c;aGk=\x07\x1b[2J\x1b[31mred\x9b1m \u202etxt.exe"
SHOWN = "boom \\x1b]0;pwned\\x07\\x1b]52;c;aGk=\\x07\\x1b[2J\\x1b[31mred\\x9b1m \\u202etxt.exe"
# The same as printf(1) writes it (octal escapes, UTF-8 bytes), so a real command puts it on its stderr.
PRINTF = r"boom \033]0;pwned\007\033]52;c;aGk=\007\033[2J\033[31mred\302\2331m \342\200\256txt.exe"


def test_visible_shows_every_control_and_keeps_ordinary_text() -> None:
    assert visible(HOSTILE) == SHOWN
    ordinary = "naïve café\tcolumn\nnext line — 10 µs, 日本語, עברית"
    assert visible(ordinary) == ordinary
    assert visible("windows\r\nline\rover\x00\x7f") == "windows\nline\\x0dover\\x00\\x7f"


def test_eyas_show_prints_a_transcripts_escape_sequences_as_text(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path)
    with task_scope("probe"):
        result = recorder.host(LocalHost()).run(f"printf '{PRINTF}\\n' >&2; exit 3", timeout=10)
    recorder.cross("approval", {"gate": "train"}, lambda: {"decision": "reject", "reason": HOSTILE, "who": "bob"})
    recorder.close()
    assert HOSTILE in result.stderr and "\\u001b]52" in path.read_text()  # the transcript holds the real thing

    shown = eyas("show", str(path))
    assert shown.code == 0, shown.output
    assert "\x1b" not in shown.output and "\x9b" not in shown.output and "\u202e" not in shown.output
    assert "\\x1b]52;c;aGk=\\x07" in shown.output and "\\u202etxt.exe" in shown.output  # the rc 3 line's stderr
    assert f"reject by bob: {SHOWN}" in shown.output


def test_eyas_jobs_tail_prints_a_logs_escape_sequences_as_text(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    jobs = Jobs(LocalHost(), str(workdir))
    jobs.launch(JobSpec(job_id="noisy", argv=["/bin/sh", "-c", f"printf '{PRINTF}\\n'"]))
    wait_for(lambda: jobs.status("noisy").finished, 30, what="the job to end")
    assert "\x1b]52" in (workdir / "jobs" / "noisy" / "log").read_text()

    tail = eyas("jobs", "--config", str(jobs_config(tmp_path / "eyas.toml", workdir)), "tail", "noisy")
    assert tail.code == 0, tail.output
    assert "\x1b" not in tail.stdout and "\u202e" not in tail.stdout
    assert f"{SHOWN}\n" in tail.stdout


def test_eyas_own_colours_still_reach_a_terminal_but_a_hosts_do_not() -> None:
    """On a terminal the console styles with escape codes of its own; the text it was given has none left."""
    screen = io.StringIO()
    console = HostTextConsole(file=RedactedStream(screen), force_terminal=True, color_system="standard")
    console.print(f"[red]failed:[/] {HOSTILE}", highlight=False, soft_wrap=True)
    written = screen.getvalue()
    assert "\x1b[31mfailed:" in written  # eyas's red
    assert SHOWN in written and "\x1b]" not in written and "\x1b[2J" not in written and "\u202e" not in written
