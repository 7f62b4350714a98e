"""Research end to end through real openai-SDK calls: supervisor, parallel researchers, synthesizer, report.

Stand-ins: the agent LLM (tests/support/openai_stub.py with scripted answers, see scripted_llm.py) and web search
(tests/support/search_standin.py: no internet here). The host is real: its versions, --help and installed
documentation are read by the real probes on LocalHost; the offline test uses the real ddgs.
"""

from __future__ import annotations

import json
import operator
import re
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

import scripted_llm as s
from eyas.agents.faces.cli.research import research_command
from eyas.agents.llm import LLM, LlmUnavailable, RetryPolicy
from eyas.agents.research import ResearchDeps, run_research
from eyas.agents.research_report import renumbered
from eyas.agents.researcher import ResearchSettings
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.recording.boundary import Boundary
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.settings.config import AgentConfig, HostConfig, TargetConfig
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.web.search import DdgsBackend, RateLimiter, SearchBackend, SearchCache, WebSearch
from offline import world_watch
from openai_stub import MODEL, OpenAIStub, Reply, Request
from scripted_llm import ResearchTeam
from search_standin import StandInSearch

BRIEF = "How do I train an EAGLE-3 drafter for the model this host serves?"
QUESTIONS = [
    "Which vLLM flags serve an EAGLE-3 drafter?",
    "How does speculators train an EAGLE-3 drafter?",
    "What data does EAGLE-3 training need?",
]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def make_deps(
    url: str,
    tmp_path: Path,
    backend: SearchBackend,
    *,
    boundary: Boundary | None = None,
    host: Host | None = None,
    http: HttpClient | None = None,
    python: str = sys.executable,
    settings: ResearchSettings | None = None,
) -> ResearchDeps:
    boundary = boundary or Boundary()
    agent = AgentConfig(base_url=url, model=MODEL, api_key_env=None)
    return ResearchDeps(
        llm=LLM(agent, boundary=boundary, retry=RetryPolicy(attempts=3, base_s=0.001)),
        search=WebSearch(boundary, backend, limiter=RateLimiter(0), cache=SearchCache(), attempts=1),
        http=http or HttpClient(),
        host=host or LocalHost(),
        host_config=HostConfig(address="local", python=python, workdir=str(tmp_path / "work")),
        target=TargetConfig(base_url="http://127.0.0.1:9", model="target"),
        out_dir=tmp_path / "run",
        boundary=boundary,
        settings=settings or ResearchSettings(max_questions=3, max_steps=2),
    )


@pytest.mark.parametrize("native", [True, False], ids=["native-tools", "guided-json"])
def test_a_cited_report_is_written_recorded_and_replayed(tmp_path: Path, native: bool) -> None:
    team = ResearchTeam(QUESTIONS, native=native)
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path)
    with OpenAIStub(team) as stub:
        live = make_deps(
            stub.url,
            tmp_path,
            StandInSearch(),
            boundary=recorder,
            host=recorder.host(LocalHost()),
            http=recorder.http(),
        )
        report = run_research(BRIEF, live)
    recorder.close()

    assert report.questions == QUESTIONS  # numbering stripped
    assert [r.question for r in report.results] == QUESTIONS
    urls = [source.url for source in report.sources]
    assert urls.count("https://docs.example/eagle3") == 1  # found by every researcher, listed once
    for result, numbers in zip(report.results, report.numbers, strict=True):
        facts = renumbered(result.findings, numbers).facts  # type: ignore[arg-type]
        cited = [report.sources[n - 1] for n in facts[0].sources]
        assert [(c.url, c.origin) for c in cited] == [
            (f"https://docs.example/{slug(result.question)}", "web"),
            ("host://local/versions", "host"),
        ]
        assert facts[1].sources == []  # [99] named no source of this researcher
    assert report.synthesis is not None
    assert report.synthesis.summary == "Train with speculators train [1]; serve with --speculative-config [2]."
    assert "1 citation(s) in the summary named no source and were removed." in report.notes

    markdown = (tmp_path / "run" / "research.md").read_text()
    assert markdown.startswith(f"# Research: {BRIEF}")
    assert f"### 2. {QUESTIONS[1]}" in markdown
    assert "(checked on the host)" in markdown
    assert "\n## Sources\n\n1. [versions installed on 'local'](host://local/versions) (host)" in markdown
    assert "1. [EAGLE-3 overview](https://docs.example/eagle3) (web)" not in markdown  # numbered once, later

    tasks = {event.task for event in read_transcript(path).events}
    assert {"cli_help", "plan", "researcher-1", "researcher-2", "researcher-3", "synthesize"} <= tasks

    session = ReplaySession.load(path)
    with world_watch() as reached:
        replayed = run_research(
            BRIEF,
            make_deps(
                stub.url, tmp_path, StandInSearch(), boundary=session, host=session.host("local"), http=session.http()
            ),
        )
    assert reached == []
    assert replayed == report
    assert session.report().ok, session.report()


def test_researchers_search_at_the_same_time(tmp_path: Path) -> None:
    """Each researcher's search waits at a barrier that opens only when all four are in flight at once:
    the run completes, so they ran concurrently (one LangGraph task each)."""
    questions = [f"{topic} for EAGLE-3 drafters" for topic in ("Flags", "Data", "Training", "Evaluation")]
    barrier = threading.Barrier(len(questions), timeout=60)
    backend = StandInSearch(barrier=barrier)
    settings = ResearchSettings(max_questions=4, max_steps=0)
    with OpenAIStub(ResearchTeam(questions)) as stub:
        report = run_research(BRIEF, make_deps(stub.url, tmp_path, backend, settings=settings))
    assert sorted(backend.calls) == sorted(questions)
    assert [result.findings is not None for result in report.results] == [True] * 4


class Pipeline(TypedDict, total=False):
    report: str
    log: Annotated[list[str], operator.add]


def test_a_crash_reruns_only_the_unfinished_researcher(tmp_path: Path) -> None:
    """Research as a node of a checkpointed pipeline: researcher 2 crashes, the others finish; on resume
    only researcher 2 runs again (the supervisor and the finished researchers are not asked twice)."""
    team = ResearchTeam(QUESTIONS)
    backend = StandInSearch(crash_on=QUESTIONS[1])
    with OpenAIStub(team) as stub:
        deps = make_deps(stub.url, tmp_path, backend)
        graph = StateGraph(Pipeline)
        graph.add_node("research", lambda state: {"report": run_research(BRIEF, deps).path})
        graph.add_edge(START, "research")
        graph.add_edge("research", END)
        connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
        pipeline = graph.compile(checkpointer=SqliteSaver(connection))
        config = {"configurable": {"thread_id": "run-1"}}
        with pytest.raises(RuntimeError, match="stand-in crash"):
            pipeline.invoke({}, config)
        assert [team.count("findings", q) for q in QUESTIONS] == [1, 0, 1]
        backend.crash_on = None
        final = pipeline.invoke(None, config)
        connection.close()
    assert final["report"] == str(tmp_path / "run" / "research.md")
    assert team.count("ping") == 1 and team.count("supervisor") == 1
    assert [team.count("findings", q) for q in QUESTIONS] == [1, 1, 1]
    assert team.count("synthesizer") == 1


def test_offline_research_uses_the_host_documentation_and_says_so(tmp_path: Path) -> None:
    """The real ddgs fails without internet; each researcher searches the packages installed for the host's
    interpreter instead (here eyas's own venv), and the report is marked offline."""
    question = "How does LangGraph checkpoint a graph with a SqliteSaver?"
    team = ResearchTeam([question])
    settings = ResearchSettings(max_questions=1, max_steps=1)
    with OpenAIStub(team) as stub:
        report = run_research(BRIEF, make_deps(stub.url, tmp_path, DdgsBackend(timeout_s=3), settings=settings))
    if report.web != "unavailable":
        pytest.skip("this machine reaches the web; the offline path needs it not to")
    docs = [source for source in report.sources if source.url.startswith("host://local/") and "dist-info" in source.url]
    assert any(source.title.startswith("langgraph") for source in docs)
    assert any("DDGSException" in note for note in report.notes)
    markdown = Path(report.path).read_text()
    assert "OFFLINE: web search was unavailable" in markdown


def test_unusable_model_output_is_reported_not_hidden(tmp_path: Path) -> None:
    """No questions, unusable findings, an empty synthesis: each is retried once, then named in the report,
    and the run still delivers what it has (the brief researched as one question, its sources)."""

    def script(request: Request, stub: OpenAIStub) -> Reply:
        role = s.role(request.body)
        if role == "ping":
            return s.ping(request.body, native=True)
        if role == "supervisor":
            return s.structured({"questions": []})
        if role == "researcher":
            return s.answer(request.body, "I am done.")
        if role == "findings":
            return s.structured({"summary": 5})
        return s.text("")

    with OpenAIStub(script) as stub:
        report = run_research(BRIEF, make_deps(stub.url, tmp_path, StandInSearch()))
    assert report.questions == [BRIEF]
    assert any(note.startswith("The supervisor gave no usable questions") for note in report.notes)
    assert report.results[0].findings is None and "summary" in (report.results[0].error or "")
    assert report.synthesis is None and any(note.startswith("No synthesis") for note in report.notes)
    markdown = Path(report.path).read_text()
    assert "No findings: The agent model" in markdown and "(no synthesis: see the notes)" in markdown
    assert "https://docs.example/eagle3" in markdown  # the sources found are still listed


def test_an_unreachable_model_fails_the_run_with_a_clear_error(tmp_path: Path) -> None:
    with OpenAIStub(lambda request, stub: s.error(503, "overloaded")) as stub, pytest.raises(LlmUnavailable) as raised:
        run_research(BRIEF, make_deps(stub.url, tmp_path, StandInSearch()))
    assert "HTTP 503: overloaded" in str(raised.value) and "eyas target up" in str(raised.value)


@pytest.mark.slow  # the target venv's vllm and speculators (`make target`)
def test_advice_is_checked_against_the_installed_vllm_and_speculators(tmp_path: Path) -> None:
    """With the real target environment: the installed versions and --help ground the research, and every
    flag the report mentions is looked up in them (a flag from another version's docs is flagged)."""
    target = EmbeddedTarget.from_env()
    if not target.python.exists():
        pytest.skip(f"the target environment is not built ({target.python}); `make target` builds it")
    summary = "Serve with --speculative-config [1], train with speculators train [2] and --no-such-flag [2]."
    question = "Which vLLM option sets the speculative decoding config of an EAGLE-3 drafter?"
    with OpenAIStub(ResearchTeam([question], summary=summary)) as stub:
        deps = make_deps(stub.url, tmp_path, StandInSearch(), python=str(target.python))
        report = run_research(BRIEF, deps)
    assert report.host.versions["vllm"] and report.host.versions["speculators"]
    assert "speculators train --help" in report.help_read
    found = {check.item: check.found_in for check in report.host_checks}
    assert found["--speculative-config"] == ["python -m vllm.entrypoints.openai.api_server --help=all"]
    assert found["speculators train"] == ["speculators train --help"]
    assert found["--no-such-flag"] == []
    help_sources = [src for src in report.results[0].sources if "/help/" in src.url]
    assert any("--speculative-config" in src.excerpt for src in help_sources)
    markdown = Path(report.path).read_text()
    assert "- `--no-such-flag` is NOT in the installed tools' --help" in markdown
    assert f"vllm {report.host.versions['vllm']}" in markdown


def test_the_research_command_writes_a_recorded_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eyas research` end to end (scripted model, real ddgs offline, eyas's venv as the host's Python)."""
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    question = "How does LangGraph checkpoint a graph with a SqliteSaver?"
    with OpenAIStub(ResearchTeam([question])) as stub:
        config = tmp_path / "eyas.toml"
        config.write_text(
            f"""
[hosts.local]
address = "local"
python = "{sys.executable}"
workdir = "{tmp_path / "work"}"

[target]
host = "local"
base_url = "http://127.0.0.1:9"
model = "target"

[agent]
base_url = "{stub.url}"
model = "{MODEL}"
api_key_env = "EYAS_TEST_NO_AGENT_KEY"
"""
        )
        notes = tmp_path / "NOTES.md"
        notes.write_text("Our runs keep a SqliteSaver: LangGraph checkpoints every step of the graph.\n")
        research_command(BRIEF, host=None, config=config, questions=1, steps=0, docs=[notes], json_output=True)
    (run,) = (tmp_path / "runs").iterdir()
    said = json.loads(capsys.readouterr().out)  # --json: the result alone on stdout, the progress on stderr
    assert (said["run_id"], said["report"], said["questions"]) == (run.name, str(run / "research.md"), [question])
    markdown = (run / "research.md").read_text()
    assert f"### 1. {question}" in markdown and f"(file://{notes}) (local)" in markdown  # --docs, searched offline
    events = read_transcript(run / "transcript.jsonl").events
    assert events[0].kind == "run" and events[0].input == {"brief": BRIEF}  # type: ignore[attr-defined]
    assert {"llm", "search", "command"} <= {event.kind for event in events}
