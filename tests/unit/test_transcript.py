"""The transcript file: schema, concurrent appends, task scoping across threads, crash-torn lines."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import typer
from click.testing import Result
from typer.testing import CliRunner

from eyas.agents.faces.cli.show import show_command
from eyas.tools.hosts.local import LocalHost
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.task_scope import current_task, submit_in_context, submit_in_task, task_scope
from eyas.tools.recording.transcript import MAX_CONTENT, CommandEvent, FileReadEvent, FileWriteEvent, TranscriptError
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.recording.transcript_writer import TranscriptWriter


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- task scoping -----------------------------------------------------------------------------------------


def test_tasks_nest_and_follow_work_into_pool_threads() -> None:
    def where() -> str:
        return current_task()

    with task_scope("verify"), ThreadPoolExecutor(4) as pool:
        scoped = [submit_in_task(pool, name, where) for name in ("health", "disk")]
        inherited = submit_in_context(pool, where)
        plain = pool.submit(where)  # what the helpers exist for: a bare submit loses the caller's task
        assert [future.result() for future in scoped] == ["verify/health", "verify/disk"]
        assert inherited.result() == "verify"
        assert plain.result() == "main"
    assert current_task() == "main"


def test_a_task_name_is_one_path_segment() -> None:
    with pytest.raises(ValueError, match="one non-empty path segment"), task_scope("a/b"):
        pass


# -- writing and reading ----------------------------------------------------------------------------------


def test_every_event_has_the_common_fields_and_its_own(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    recorder = Recorder.open(path)
    with task_scope("probe"):
        result = recorder.host(LocalHost()).run("echo hello; echo oops >&2; exit 3", timeout=10)
    recorder.clock().now()
    recorder.close()

    command, clock = lines(path)
    assert {key: command[key] for key in ("v", "seq", "kind", "task")} == {
        "v": 1,
        "seq": 0,
        "kind": "command",
        "task": "probe",
    }
    assert command["t"] > 0 and command["duration_s"] == pytest.approx(result.duration_s)
    assert (command["host"], command["rc"], command["stdout"], command["stderr"]) == ("local", 3, "hello\n", "oops\n")
    assert (clock["seq"], clock["task"], clock["op"]) == (1, "main", "now") and clock["value"] > 0


def test_concurrent_appends_stay_whole_lines_in_per_task_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path)

    def branch(name: str) -> None:
        with task_scope(name):
            for index in range(50):
                writer.write("clock", {"op": "monotonic", "value": float(index)})

    threads = [threading.Thread(target=branch, args=(f"b{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()

    events = read_transcript(path).events
    assert sorted(event.seq for event in events) == list(range(300))
    for n in range(6):
        assert [event.value for event in events if event.task == f"b{n}"] == [float(i) for i in range(50)]


def test_file_content_is_kept_when_small_as_text_or_base64(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    host = Recorder.open(path).host(LocalHost())
    host.write_text(str(tmp_path / "a.txt"), "héllo\n")
    host.write_bytes(str(tmp_path / "b.bin"), b"\x00\xff\x10")
    host.write_bytes(str(tmp_path / "big"), b"x" * (MAX_CONTENT + 1))
    assert host.read_bytes(str(tmp_path / "b.bin")) == b"\x00\xff\x10"

    text, binary, big, read = read_transcript(path).events
    assert isinstance(text, FileWriteEvent) and (text.content, text.encoding, text.size) == ("héllo\n", "utf-8", 7)
    assert (binary.content, binary.encoding) == ("AP8Q", "base64")
    assert big.content is None and big.size == MAX_CONTENT + 1 and len(big.sha256) == 64
    assert isinstance(read, FileReadEvent) and read.sha256 == binary.sha256 and read.content == "AP8Q"


def test_errors_are_recorded_with_their_type(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    host = Recorder.open(path).host(LocalHost())
    with pytest.raises(Exception, match="ran longer than"):
        host.run("sleep 5", timeout=0.3)
    (event,) = read_transcript(path).events
    assert isinstance(event, CommandEvent) and event.error is not None
    assert event.error.type == "CommandTimeout" and "sleep 5" in event.error.message and event.rc is None


# -- crashes ----------------------------------------------------------------------------------------------


def record_three(path: Path) -> None:
    recorder = Recorder.open(path)
    host = recorder.host(LocalHost())
    for word in ("one", "two", "three"):
        host.run(f"echo {word}", timeout=10)
    recorder.close()


def test_a_line_cut_by_a_crash_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record_three(path)
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b'"stdout"')])  # the crash hit in the middle of the third event

    loaded = read_transcript(path)
    assert [event.stdout for event in loaded.events] == ["one\n", "two\n"]  # type: ignore[attr-defined]
    assert loaded.torn and loaded.torn_lines == [3]
    assert "line 3 is incomplete" in loaded.warnings[0] and "end of the file" in loaded.warnings[0]


def test_a_resumed_run_appends_after_a_torn_line_without_corrupting(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record_three(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 25])

    recorder = Recorder.open(path)  # the resumed controller
    recorder.host(LocalHost()).run("echo four", timeout=10)
    recorder.close()

    loaded = read_transcript(path)
    assert [event.stdout for event in loaded.events] == ["one\n", "two\n", "four\n"]  # type: ignore[attr-defined]
    assert [event.seq for event in loaded.events] == [0, 1, 2]  # the torn event's seq is reused: it never completed
    assert loaded.torn_lines == [3] and "followed by a resumed run" in loaded.warnings[0]


def test_an_event_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record_three(path)
    first, *rest = path.read_text().splitlines()
    path.write_text("\n".join([first.replace('"v":1', '"v":2'), *rest]) + "\n")
    with pytest.raises(TranscriptError, match="schema version 2; this eyas reads version 1"):
        read_transcript(path)


def test_a_malformed_event_names_its_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"v": 1, "seq": 0, "kind": "command", "task": "main", "t": 1.0, "host": "local"}\n')
    with pytest.raises(TranscriptError, match=r"line 1 is not a valid event \(command.command"):
        read_transcript(path)


# -- eyas show --------------------------------------------------------------------------------------------


def show(*args: str) -> Result:
    app = typer.Typer()
    app.command("show")(show_command)
    app.command("other")(lambda: None)  # two commands, so `show` is addressed by name as in eyas
    return CliRunner().invoke(app, ["show", *args], env={"COLUMNS": "200"})


def test_show_filters_the_timeline_and_names_the_gate_decisions(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    recorder = Recorder.open(path)
    host = recorder.host(LocalHost())
    recorder.node("probe", host.run, "echo probing", timeout=10)
    recorder.cross("approval", {"gate": "train"}, lambda: {"decision": "reject", "reason": "disk", "who": "alice"})
    with task_scope("serve"):
        host.run("exit 4", timeout=10)
    recorder.close()

    everything = show(str(path))
    assert everything.exit_code == 0, everything.output
    assert "echo probing" in everything.output and "gate train reject by alice: disk" in everything.output
    assert "5 of 5 events; 3 tasks" in everything.output and "gates: train → reject" in everything.output

    commands = show(str(path), "--kind", "command", "--phase", "serve")
    assert "exit 4 → rc 4" in commands.output and "echo probing" not in commands.output
    assert "1 of 5 events; 1 task;" in commands.output


def test_show_warns_of_a_line_cut_by_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record_three(path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    result = show(str(path))
    assert result.exit_code == 0
    assert "line 3 is incomplete" in result.output and "2 of 2 events" in result.output
