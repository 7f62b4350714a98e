"""Progress where the output is no terminal (`make demo > log`, CI): plain lines, each a fact once, at each tenth of
the way and at most once a minute between, with the time left; a bar there would show only its final state. The
clock is a list of poll times, so no test waits."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

from rich.console import Console

from eyas.agents.faces.cli.run_ui import RunUI
from eyas.agents.faces.progress_lines import ProgressLines
from eyas.tools.jobs.detached import JobState, JobStatus


class Polls:
    """The poll times, one per clock read (ProgressLines reads the clock once per update)."""

    def __init__(self, times: list[float]) -> None:
        self._times: Iterator[float] = iter(times)

    def __call__(self) -> float:
        return next(self._times)


def said_over(polls: list[tuple[float, dict[str, Any], str, bool]]) -> list[str]:
    lines: list[str] = []
    progress = ProgressLines(lines.append, Polls([at for at, *_ in polls]))
    for _, seen, figures, finished in polls:
        progress.update("r1.generate", seen, figures, finished=finished)
    return lines


def test_a_job_is_said_at_each_tenth_with_its_pace_and_time_left_each_line_once() -> None:
    # 100 samples, 5 more every 10 s poll at 12.3 tokens/s: 21 polls, then the poll that sees it succeed.
    polls = [(10.0 * i, {"done": 5 * i, "total": 100, "tokens_per_s": 12.3}, "12.3 tokens/s", False) for i in range(21)]
    polls.append((210.0, {"done": 100, "total": 100}, "succeeded, 12.3 tokens/s", True))
    lines = said_over(polls)
    assert lines[0] == "r1.generate: 0/100, 12.3 tokens/s"  # no pace yet: no time left
    assert "r1.generate: 40/100, 12.3 tokens/s, 2 min left" in lines  # 60 samples at 0.5 a second
    assert lines[-1] == "r1.generate: 100/100, succeeded, 12.3 tokens/s"
    assert len(lines) == len(set(lines)) == 12, lines  # the first, nine tenths, 100/100, and its end


def test_between_tenths_a_line_comes_at_most_once_a_minute_and_only_when_it_changed() -> None:
    loss = [(10.0 * i, {"done": 1, "total": 1000, "loss": 9.0 - i / 10}, f"loss {9.0 - i / 10:.3g}", False)
            for i in range(13)]  # fmt: skip
    lines = said_over(loss)
    assert lines == ["r1.generate: 1/1,000, loss 9", "r1.generate: 1/1,000, loss 8.4", "r1.generate: 1/1,000, loss 7.8"]
    same = [(600.0 * i, {"done": 1, "total": 1000}, "", False) for i in range(5)]
    assert said_over(same) == ["r1.generate: 1/1,000"]  # nothing new in an hour: nothing said again


def test_a_finished_job_is_said_once_and_a_job_without_a_count_by_its_state() -> None:
    polls = [(0.0, {}, "", False), (5.0, {}, "succeeded", True), (100.0, {}, "succeeded", True)]
    assert said_over(polls) == ["r1.generate", "r1.generate: succeeded"]


def test_the_run_prints_lines_where_its_output_is_no_terminal_and_bars_where_it_is() -> None:
    def printed(console: Console) -> str:
        ui = RunUI(console)
        for status, done in ((JobStatus.RUNNING, 40), (JobStatus.SUCCEEDED, 100)):
            state = JobState(job_id="r1.generate", host="local", status=status, directory="/w/jobs/r1.generate")
            ui.progress("data", [state], {"r1.generate": {"done": done, "total": 100, "tokens_per_s": 12.3}})
        ui.note("the phase ended")
        return console.file.getvalue()  # type: ignore[attr-defined]

    log = printed(Console(file=StringIO(), width=100))
    assert log.splitlines()[:2] == [
        "r1.generate: 40/100, 12.3 tokens/s",
        "r1.generate: 100/100, succeeded, 12.3 tokens/s",
    ]
    assert "━" not in log and "\x1b" not in log
    terminal = printed(Console(file=StringIO(), width=100, force_terminal=True))
    assert "━" in terminal  # a bar
