"""Decision rules a one-line slip would turn into a bad night, each pinned by its behaviour (tests/bench/mutations.py
applies those slips and checks that these tests fail): replay's stop at a divergence, the policy's run and disk
budgets and its verification warnings, the compatibility probe's answer, a job's relaunch, the redactor's order.
Real transcripts, jobs and commands on this host; no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eyas.graph.policy import PhaseEstimate, Policy, judge
from eyas.tools.checks import compat
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.replay import Divergence, ReplaySession
from eyas.tools.recording.task_scope import task_scope
from waiting import wait_for

VERIFIED = {"health": {"status": "ok", "message": "generating"}}


def test_replay_stops_every_task_at_the_first_divergence(tmp_path: Path) -> None:
    """Once one task asks something the recording does not hold, whatever any task does next is not comparable:
    a later answer from the recording would replay a run that no longer happened."""
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path)
    host = recorder.host(LocalHost())
    with task_scope("extract"):
        host.run("echo extract", timeout=10)
    with task_scope("train"):
        host.run("echo train", timeout=10)
    recorder.close()

    session = ReplaySession.load(path)
    replayed = session.host("local")
    with task_scope("extract"), pytest.raises(Divergence):
        replayed.run("echo something else", timeout=10)
    with task_scope("train"), pytest.raises(Divergence):
        replayed.run("echo train", timeout=10)  # exactly as recorded, but after the divergence
    report = session.report()
    assert report.divergence is not None and report.divergence.task == "extract" and not report.ok
    assert report.events_replayed == 0


def test_the_run_budget_weighs_the_whole_run_not_the_phase() -> None:
    """A 2-hour phase of a 20-hour run is within a 3-hour phase budget and over a 12-hour run budget."""
    policy = Policy(max_phase_hours=3, max_total_hours=12)
    verdict = judge(policy, "train", PhaseEstimate(phase_hours=2.0, total_hours=20.0), VERIFIED)
    assert not verdict.approve and verdict.reasons == ["run estimate 20.00 h over the budget of 12 h"]
    within = judge(policy, "train", PhaseEstimate(phase_hours=2.0, total_hours=11.5), VERIFIED)
    assert within.approve and "run estimate 11.50 h within the budget of 12 h" in within.reasons


def test_the_disk_budget_is_in_bytes() -> None:
    """max_disk_bytes = 50 GB: a phase that writes 80 GB is held for a person, one that writes 20 GB is not."""
    policy = Policy(max_disk_bytes=50_000_000_000)
    over = judge(policy, "extract", PhaseEstimate(disk_bytes=80_000_000_000), VERIFIED)
    assert not over.approve and over.reasons == ["80.00 GB to write, over the budget of 50.00 GB"]
    assert judge(policy, "extract", PhaseEstimate(disk_bytes=20_000_000_000), VERIFIED).approve


def test_verification_warnings_hold_the_gate_only_where_the_policy_allows_none() -> None:
    warned = {**VERIFIED, "disk": {"status": "warn", "message": "82% full"}}
    assert judge(Policy(), "data", PhaseEstimate(), warned).approve  # allow_warnings is the default
    strict = judge(Policy(allow_warnings=False), "data", PhaseEstimate(), warned)
    assert not strict.approve and strict.reasons == ["verification warned (disk) and the policy allows no warnings"]
    failed = {**VERIFIED, "disk": {"status": "fail", "message": "full"}}
    assert not judge(Policy(), "data", PhaseEstimate(), failed).approve


def test_a_probe_that_answers_an_error_string_does_not_count_as_working() -> None:
    """compat_probe.py answers True for a feature it found, and the error's text where importing it failed: only
    True is working, and a default path that is not working blocks the phase, showing what the probe said."""
    error = "ImportError: cannot import name 'Eagle3DraftModel'"
    rows = {(row.phase, row.path): row for row in compat.judge({"features": {"speculators_eagle3": error}})}
    row = rows[("train", "cpu loop / speculators")]
    assert row.works is False and row.blocks and row.detail == error
    found = {(row.phase, row.path): row for row in compat.judge({"features": {"speculators_eagle3": True}})}
    assert found[("train", "cpu loop / speculators")].works is True
    assert not found[("train", "cpu loop / speculators")].blocks


def test_a_relaunch_of_a_job_that_exists_attaches_to_it_and_starts_nothing(tmp_path: Path) -> None:
    """A resumed run launches its jobs again by id: the second launch must report the first job and leave it as it
    is, not run again (a training job started twice writes one checkpoint folder from two processes). Its record
    (job.json, written before a launch returns) is the deterministic witness; the second command's line is too
    once it would have run."""
    starts = tmp_path / "starts"
    jobs = Jobs(LocalHost(), str(tmp_path))
    spec = JobSpec(job_id="train", argv=["/bin/sh", "-c", f"echo started >> {starts}"])
    jobs.launch(spec)
    first = wait_for(lambda: (state := jobs.status("train")).finished and state, 30, what="the first launch to end")
    again = jobs.launch(JobSpec(job_id="train", argv=["/bin/sh", "-c", f"echo again >> {starts}"]))
    assert (again.status, again.pid, again.started_at) == (first.status, first.pid, first.started_at)
    assert json.loads((Path(again.directory) / "job.json").read_text())["argv"] == spec.argv
    assert starts.read_text() == "started\n"


def test_a_configured_secret_that_contains_another_is_redacted_whole() -> None:
    """Two configured secrets, one a prefix of the other (a key and the same key with a suffix): replacing the short
    one first would leave the long one's tail in the transcript."""
    redactor = Redactor(["sk-team", "sk-team-7f3a9c-nightly"])
    assert redactor.text("key sk-team-7f3a9c-nightly used") == "key [REDACTED:secret] used"
    assert redactor.text("key sk-team used") == "key [REDACTED:secret] used"
