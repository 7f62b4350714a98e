"""`eyas show RUN` as the operator reads it: a run named by its id, its folder or its transcript; the clock's hundreds
of reads left out unless asked; probes refused while a service restarts marked expected, not errors
(agents/faces/expected_refusals.py); and --json. The transcripts are written by the real recorder, the refusals are
real TCP connects to a closed port; the host's and the server's answers around them are stated (the unit tier starts
no server and no systemd), through the same recorder."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from eyas.agents.faces.expected_refusals import expected_refusals, service_action
from eyas.tools.hosts.http import HttpError
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.transcript import CommandEvent, Event, build_event
from in_process import eyas

BASE = "http://127.0.0.1:{port}"


def closed_port() -> int:
    """A port nothing listens on: bound, then let go, so a connect to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def command(recorder: Recorder, text: str) -> None:
    recorder.cross("command", {"host": "box", "command": text, "timeout": 120.0},
                   lambda: {"rc": 0, "stdout": "", "stderr": ""})  # fmt: skip


def health(recorder: Recorder, url: str, status: int) -> None:
    recorder.cross("http", {"method": "GET", "url": f"{url}/health", "json_body": None, "headers": None,
                            "timeout": 10.0}, lambda: {"status": status, "body": "", "duration_s": 0.01})  # fmt: skip


def refused(recorder: Recorder, url: str) -> None:
    with pytest.raises(HttpError):
        recorder.http().tcp_connect(url, timeout=1.0)


def record_restart(path: Path) -> None:
    """A deploy's restart: refused while vLLM loads, healthy, then refused again with no restart (an error)."""
    url = BASE.format(port=closed_port())
    recorder = Recorder.open(path)
    clock = recorder.clock()
    with_clock = [clock.now() for _ in range(3)]
    assert len(with_clock) == 3
    recorder.node("deploy", command, recorder, "systemctl restart vllm.service")
    refused(recorder, url)
    refused(recorder, url)
    health(recorder, url, 503)  # loading: an answer, not a refusal, and not yet healthy
    refused(recorder, url)
    health(recorder, url, 200)
    refused(recorder, url)  # after the server was healthy, with nothing restarting it: a real error
    recorder.close()


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    (root / "r1").mkdir(parents=True)
    (root / "r1" / "run.json").write_text("{}")
    record_restart(root / "r1" / "transcript.jsonl")
    return root


def show(runs: Path, *argv: str) -> tuple[int, str, str]:
    ran = eyas("show", *argv, env={"EYAS_RUNS_DIR": str(runs), "COLUMNS": "200"})
    assert "Traceback" not in ran.output, ran.output
    return ran.code, " ".join(ran.output.split()), ran.stdout


def test_a_run_is_named_by_its_id_its_folder_or_its_transcript(runs: Path) -> None:
    named = ("r1", str(runs / "r1"), str(runs / "r1" / "transcript.jsonl"))
    said = {show(runs, given)[1] for given in named}
    assert len(said) == 1, said  # one timeline, whichever way it was named
    code, output, _ = show(runs, "r2")
    assert code == 6 and "There is no run 'r2'" in output and "`eyas runs` lists the runs" in output


def test_refusals_during_a_restart_are_expected_and_the_clock_is_hidden_unless_asked(runs: Path) -> None:
    code, output, _ = show(runs, "r1")
    assert code == 0, output
    assert "1 error;" in output
    assert "3 refused probes while a service restarted (expected: not counted as errors)" in output
    assert output.count("(expected: a service was restarting)") == 3
    assert "now →" not in output and "3 clock reads hidden (--all shows them)" in output
    _, everything, _ = show(runs, "r1", "--all")
    assert everything.count("now →") == 3 and "hidden" not in everything
    _, clock_only, _ = show(runs, "r1", "--kind", "clock")
    assert "3 of 12 events" in clock_only and "hidden" not in clock_only


def test_json_says_the_same_as_the_timeline(runs: Path) -> None:
    code, _, stdout = show(runs, "r1", "--json")
    said = json.loads(stdout)
    assert code == 0 and said["intact"] is True and said["transcript"].endswith("r1/transcript.jsonl")
    summary = said["summary"]
    assert (summary["events"], summary["shown"], summary["hidden_clock"]) == (12, 9, 3)
    assert (summary["errors"], summary["expected_refusals"]) == (1, 3)
    assert [event["expected_refusal"] for event in said["events"] if event["kind"] == "tcp"] == [True] * 3 + [False]
    code, _, stdout = show(runs, "r1", "--verify", "--json")
    assert code == 0 and json.loads(stdout)["intact"] is True


def test_a_refusal_is_expected_only_inside_a_restart_window() -> None:
    """From `systemctl stop|start|restart` or the stand-in's job started or signalled, to a server's HTTP 200."""
    events = events_of([
        ("tcp", {"url": "http://h:8000", "timeout": 5.0, "error": {"type": "HttpError", "message": "refused"}}),
        ("command", {"host": "b", "command": "sudo /usr/bin/systemctl --no-block start vllm", "timeout": 9.0}),
        ("http", {"method": "GET", "url": "http://h:8000/v1/models", "timeout": 5.0,
                  "error": {"type": "HttpError", "message": "reset"}}),
        ("http", {"method": "POST", "url": "http://h:8000/v1/chat/completions", "timeout": 5.0,
                  "error": {"type": "HttpError", "message": "refused"}}),  # no probe: a request that failed
        ("http", {"method": "GET", "url": "http://h:8000/health", "timeout": 5.0, "status": 200}),
        ("tcp", {"url": "http://h:8000", "timeout": 5.0, "error": {"type": "HttpError", "message": "refused"}}),
    ])  # fmt: skip
    assert expected_refusals(events) == {2}


@pytest.mark.parametrize(
    ("text", "restarts"),
    [
        ("systemctl restart vllm.service", True),
        ("systemctl stop vllm", True),
        ("systemctl show --property=ActiveState vllm", False),
        ("systemctl daemon-reload", False),
        ("cd /w/jobs/target-server-8765 && umask 077 && setsid /bin/sh ./run.sh < /dev/null >> log 2>&1 & ", True),
        ("kill -TERM -4242 2>/dev/null; [ -e /w/jobs/target-server-8765/rc ] || echo 137", True),
        ("sh -c 'kill -0 \"$pid\"' status /w/jobs/target-server-8765", False),  # the status poll signals nothing
        ("kill -TERM -4242; echo /w/jobs/r1.train-0", False),  # another job
        ("echo 'unbalanced", False),
    ],
)
def test_which_commands_restart_a_service(text: str, restarts: bool) -> None:
    event = CommandEvent(seq=0, task="main", t=0.0, host="b", command=text, timeout=9.0)
    assert service_action(event) is restarts


def events_of(kinds: list[tuple[str, dict[str, Any]]]) -> list[Event]:
    return [build_event(kind, fields, seq=seq, task="deploy", t=float(seq)) for seq, (kind, fields) in enumerate(kinds)]
