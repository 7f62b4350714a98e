"""The recorded chat in runs/examples/chat-session: a short operator session, made with the scripted stand-in LLM.

Stand-in: no LLM capable of driving the operator runs here (the embedded SmolLM2 answers nonsense), so the
agent's turns come from a script (tests/support/scripted_llm.py through tests/support/openai_stub.py, over real HTTP
and the
openai SDK). Everything else is real: the chat program, its tools on this machine (verify, jobs), the pipeline
controls (agents/faces/chat_control.py), the checkpoint and the transcript. The operator's lines are typed from LINES.

    python tests/support/chat_example.py RUNS_DIR     # writes RUNS_DIR/chat-session (what `make examples` runs)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import scripted_llm as s
from eyas.agents.faces.chat_control import ChatPipeline
from eyas.agents.faces.cli.chat import converse, open_chat
from eyas.graph.life.session import create_run
from eyas.graph.runs import RunDir
from eyas.tools.config_source import ConfigSource
from eyas.tools.target.embedded import EmbeddedTarget
from openai_stub import MODEL, OpenAIStub

RUN_ID = "chat-session"
# What the operator types, in order: questions, a verification, the run's status, a launch declined, and exit.
LINES = [
    "verify the disk and the binaries",
    "list the jobs",
    "where is the run?",
    "start the pipeline",
    "no",
    "exit",
]


# The agent's turns: a tool call for each request of the operator's, then an answer from its result.
script = s.operator_script(
    {
        "verify the disk and the binaries": ("verify", {"checks": ["disk", "binaries"]}),
        "list the jobs": ("list_jobs", {}),
        "where is the run?": ("run_status", {}),
        "start the pipeline": ("start_run", {"samples": 5000, "max_tokens": 1024}),
    },
    "Here is what I found: ",
    2,
    "I can verify the host, read files, list jobs and drive the pipeline run.",
)


def config_text(
    workdir: Path, agent_url: str, model: str = MODEL, python: str | None = None, target: EmbeddedTarget | None = None,
    prompts: str | None = None,
) -> str:  # fmt: skip
    """A chat's config: the embedded target on this machine (through `python`, default its venv's) and the agent.
    With `target`, that target as production: its service's unit file and its model directory too; with
    `prompts`, the runs' prompt source."""
    served = target or EmbeddedTarget.from_env()
    service = f'unit_file = "{served.unit_file}"\nmodel_dir = "{served.model_dir}"\n' if target else ""
    pipeline = f'\n[pipeline]\nprompts = "{prompts}"\n' if prompts else ""
    return f"""
[hosts.local]
address = "local"
python = "{python or served.python}"
workdir = "{workdir}"

[target]
host = "local"
base_url = "{served.base_url}"
model = "SmolLM2-135M-Instruct"
{service}{pipeline}
[agent]
base_url = "{agent_url}"
model = "{model}"
api_key_env = "EYAS_TEST_NO_AGENT_KEY"
"""


def record(run_id: str = RUN_ID, typed: list[str] = LINES, model: str = MODEL) -> RunDir:
    """Record the session into <runs folder>/<run_id>/transcript.jsonl (EYAS_RUNS_DIR); the chat's checkpoints
    and the config (a temporary file) are not kept: the transcript holds all a replay needs. A README.md
    already there is kept. When `typed` runs out before an "exit", the operator leaves with Ctrl-D. `model` is
    the name the [agent] section gives the stand-in (it answers the same whatever the name)."""
    lines = iter(typed)

    def read(prompt: str) -> str:
        line = next(lines, None)
        if line is None:
            raise EOFError
        return line

    with tempfile.TemporaryDirectory(prefix="eyas-chat-example-") as scratch, OpenAIStub(script) as stub:
        config = Path(scratch) / "eyas.toml"
        config.write_text(config_text(Path(scratch) / "work", stub.url, model))
        run = create_run(ConfigSource(config, "the example's"), None, None, run_id=run_id, kind="chat")
        with open_chat(run_id, False, None, control_for=ChatPipeline) as chat:
            converse(chat, read, print)
    for name in ("chat.sqlite", "chat.sqlite-wal", "chat.sqlite-shm", "chat.json"):
        (run.root / name).unlink(missing_ok=True)
    return run


if __name__ == "__main__":
    os.environ["EYAS_RUNS_DIR"] = str(Path(sys.argv[1]).resolve())
    record()
