"""What the dashboard leads with (issue 41), as its pure view functions say it: each run's outcome, production's
speedup and how long it has been quiet on the run list, runs waiting for an answer first; the run page's first lines
(the outcome and next step as `eyas status` says them, or the gate it waits at, never "not finished"); job logs with
their progress lines in words. The browser's view of the same pages is tests/integration/test_dashboard.py."""

from __future__ import annotations

from typing import Any

import pytest

from eyas.agents.faces.dashboard.standing import (
    age_text,
    gate_place,
    in_order,
    lead_lines,
    listed_run,
    outcome_word,
    production_speedup,
)
from eyas.agents.faces.dashboard.views import lead
from eyas.agents.faces.progress_text import line_text, log_text
from eyas.agents.faces.report_html.record import RunRecord
from eyas.agents.faces.report_html.sections import summary
from eyas.graph.phases.report.deploy_facts import NOT_DEPLOYED, DeployEnding, DeployFacts, ProductionFigures
from eyas.graph.phases.report.outcome import RunOutcome
from eyas.tools.workloads.progress import TAG

NOW = 1_800_000_000.0
STEPS = ["deploy n-gram speculation at k=3 rather than the drafter", "generate more data"]


def outcome(status: DeployEnding = NOT_DEPLOYED, speedup: float | None = None) -> RunOutcome:
    production = None
    if speedup is not None:
        production = ProductionFigures(tokens_per_s_before=10.0, tokens_per_s_after=10.0 * speedup, speedup=speedup,
                                       mean_acceptance_length=1.5, acceptance_rate=None)  # fmt: skip
    deploy = DeployFacts(status=status, reason=None, method=None, k=None, drafter=None, production=production)
    return RunOutcome(headline=f"the headline of a {status} run", next_steps=STEPS, deploy=deploy, evaluated=[])


def row(run: str, *, state: str = "ended", phase: str = "report", changed: float | None = NOW - 60,
        waiting: dict[str, Any] | None = None, said: RunOutcome | None = None) -> dict[str, Any]:  # fmt: skip
    """A row as graph/life/watch.py's runs_listing makes it."""
    return {"run": run, "phase": phase, "state": state, "damage": None, "driver": None, "report": None,
            "outcome": (said or outcome()).model_dump(mode="json"), "waiting_at": waiting,
            "changed": changed}  # fmt: skip


def test_the_gate_a_run_waits_at_is_named_by_its_kind_and_phase() -> None:
    assert gate_place({"kind": "gate", "phase": "data"}) == "the data gate"
    assert gate_place({"kind": "failure", "phase": "train"}) == "the failure gate of train"


@pytest.mark.parametrize(
    ("status", "finished", "word"),
    [("kept", True, "kept"), ("rolled_back", True, "rolled back"), ("skipped", True, "nothing deployed"),
     (NOT_DEPLOYED, True, "nothing deployed"), (NOT_DEPLOYED, False, "not finished")],
)  # fmt: skip
def test_the_outcome_in_one_word_follows_production_then_the_end(
    status: DeployEnding, finished: bool, word: str
) -> None:
    assert outcome_word(outcome(status), finished) == word
    assert outcome_word(None, finished) == ""  # a chat


def test_the_speedup_listed_is_productions_own() -> None:
    assert production_speedup(outcome("rolled_back", 0.7288)) == "0.73x"
    assert production_speedup(outcome()) == ""  # never restarted with a drafter: no production figure
    assert production_speedup(None) == ""


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(None, ""), (5, "just now"), (59.9, "just now"), (60, "1 min ago"), (3599, "59 min ago"), (3600, "1 h ago"),
     (3 * 3600 + 59, "3 h ago"), (47 * 3600, "47 h ago"), (2 * 86400, "2 d ago")],
)  # fmt: skip
def test_age_in_words(seconds: float | None, said: str) -> None:
    assert age_text(seconds) == said


def test_runs_waiting_for_an_answer_come_first_then_the_most_recently_active() -> None:
    rows = [row("run-a-old", changed=NOW - 7200), row("run-b-new", changed=NOW - 30),
            row("run-c-gated", state="waiting at a gate", phase="plan", changed=NOW - 86400,
                waiting={"kind": "gate", "phase": "data"}),
            row("run-d-kept", said=outcome("kept", 1.31), changed=None)]  # fmt: skip
    listed = in_order([listed_run(each, "ended", NOW) for each in rows])
    assert [run.run_id for run in listed] == ["run-c-gated", "run-b-new", "run-a-old", "run-d-kept"]
    gated, new, old, kept = listed
    assert (gated.waiting, gated.outcome, gated.age) == ("the data gate", "not finished", "24 h ago")
    assert (new.outcome, new.speedup, new.age) == ("nothing deployed", "", "just now")
    assert old.age == "2 h ago"
    assert (kept.outcome, kept.speedup, kept.age) == ("kept", "1.31x", "")


def test_the_lead_is_the_outcome_and_next_steps_as_eyas_status_says_them() -> None:
    ended = outcome("rolled_back", 0.73)
    assert lead_lines(ended, None, "ended", "report") == [
        "outcome: the headline of a rolled_back run",
        f"next step: {STEPS[0]}",
        f"also: {STEPS[1]}",
    ]
    assert lead_lines(ended, None, "pipeline, no checkpoint", "report")[0].startswith("outcome: ")  # recorded


def test_a_run_waiting_at_a_gate_leads_with_the_gate_never_with_not_finished() -> None:
    assert lead_lines(outcome(), "the data gate", "waiting at a gate", "plan") == [
        "waiting at the data gate for an answer"
    ]
    assert lead_lines(outcome(), None, "running", "train") == ["running in phase train: the outcome comes when it ends"]
    assert lead_lines(outcome(), None, "stopped", None)[0].startswith("stopped before its first phase, not finished")
    assert lead_lines(None, None, "chat, no checkpoint", None) == ["a chat session: it has no pipeline outcome"]


def test_the_lead_is_escaped_and_its_first_line_is_the_outcome() -> None:
    html = lead(["outcome: <b>rolled back</b>", "next step: more & better data"])
    assert html.startswith('<p id="outcome"><strong>outcome: &lt;b&gt;rolled back&lt;/b&gt;</strong></p>')
    assert '<p class="step">next step: more &amp; better data</p>' in html


def test_a_waiting_runs_summary_says_where_it_waits_not_that_it_ended() -> None:
    waiting = summary(RunRecord(run_id="run-x", state={"phase": "plan"}, waiting="the data gate"))
    assert "waiting at the data gate for an answer" in waiting
    assert "not finished" not in waiting and "ended before its evaluation" not in waiting
    assert "has not reached its evaluation" in waiting
    ended = summary(RunRecord(run_id="run-x", state={"phase": "report"}))
    assert "the run ended before its evaluation" in ended


def test_progress_lines_in_a_log_are_said_in_words() -> None:
    assert line_text({"done": 120, "total": 400, "tokens_per_s": 41.5, "eta_s": 30}) == (
        "progress: 120/400 (30%), 41.5 tokens/s, under a minute left"
    )
    assert line_text({"phase": "train", "done": 10, "total": 40, "loss": 3.456}) == (
        "progress: step 10/40 (25%), loss 3.46"
    )
    assert line_text({"phase": "server", "waiting_s": 30}) == "progress: server"
    log = f'eyas: started\n{TAG}{{"done": 7, "total": 24}}\n{TAG}{{"done": 8, "tot\nwrote 3 of 120'
    assert log_text(log).splitlines() == [
        "eyas: started",
        "progress: 7/24 (29%)",
        f'{TAG}{{"done": 8, "tot',  # torn: left as it was written
        "wrote 3 of 120",
    ]
