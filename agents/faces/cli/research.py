"""`eyas research "BRIEF"`: the research phase on its own, as a recorded run with its report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from eyas.agents.faces.cli.console import console, json_result
from eyas.agents.faces.cli.flags import ConfigOption, JsonOption
from eyas.agents.faces.cli.options import use_config
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.local import LocalHost
from eyas.tools.web.search import WebSearch


def research_command(
    brief: Annotated[
        str, typer.Argument(help='what to find out, e.g. "how to train an EAGLE-3 drafter for this model"')
    ],
    host: Annotated[
        str | None,
        typer.Option("--host", help="the host whose installed tools ground the research (default: target's)"),
    ] = None,
    config: ConfigOption = None,
    questions: Annotated[int, typer.Option("--questions", min=1, max=8, help="researchers at most")] = 4,
    steps: Annotated[int, typer.Option("--steps", min=0, max=10, help="tool rounds per researcher")] = 3,
    docs: Annotated[
        list[Path] | None, typer.Option("--docs", help="a local text/markdown file searched too (repeatable)")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Research a brief with parallel researchers: a supervisor splits it into questions, each researcher
    searches the web (or, offline, the documentation installed on the host), reads pages and the host's own
    vllm/speculators --help, and a synthesizer writes one report with numbered citations to
    runs/<run_id>/research.md, noting where sources disagree and which flags exist in the installed versions.
    The agent LLM is [agent] from the config, else the target's own server when it serves a capable model (about
    7B parameters or more; [target] agent_llm = false opts out), else the embedded SmolLM2 server (weak, offline)."""
    with json_result(json_output) as result:
        result.update(_research(brief, host, config, questions, steps, docs))


def _research(
    brief: str, host: str | None, config: Path | None, questions: int, steps: int, docs: list[Path] | None
) -> dict[str, Any]:
    """The research run, said as it goes; what a script reads of it."""
    # The agents and the graph's modules (langgraph, ~0.5 s) load here, not at start-up of every eyas process.
    from eyas.agents.llm import open_llm
    from eyas.agents.llm_choice import choose_llm
    from eyas.agents.research import ResearchDeps, run_research
    from eyas.agents.researcher import ResearchSettings
    from eyas.graph.life.session import create_run, open_recorder

    cfg, source = use_config(config)
    name = host or cfg.target.host
    run = create_run(source, None, None, kind="research", brief=brief)
    recorder = open_recorder(run, cfg)
    # How the run started, so a replay can start it again (meta "kind" says it is a research run).
    recorder.note("run", {"meta": run.meta(), "config": cfg.model_dump(mode="json"), "input": {"brief": brief}})
    machine = recorder.host(open_host(name, cfg.host(name)))
    settings = ResearchSettings(
        max_questions=questions, max_steps=steps, local_docs=[str(path.resolve()) for path in docs or []]
    )
    console.print(f"research run {run.run_id}: {brief}", markup=False, highlight=False)
    try:
        http = recorder.http()
        choice = choose_llm(cfg, http, lambda: machine)
        console.print(f"the agent's LLM: {choice.shown()}", markup=False, highlight=False, soft_wrap=True)
        deps = ResearchDeps(
            llm=open_llm(choice, boundary=recorder),
            search=WebSearch(boundary=recorder),
            http=http,
            host=machine,
            host_config=cfg.host(name),
            target=cfg.target,
            out_dir=run.root,
            boundary=recorder,
            local_host=recorder.host(LocalHost()),
            settings=settings,
            on_event=lambda message: console.print(f"  {message}", markup=False, highlight=False, soft_wrap=True),
        )
        report = run_research(brief, deps)
    finally:
        machine.close()
        recorder.close()
    usage = report.usage
    console.print(
        f"[green]✓[/] {escape(report.path)}: {len(report.questions)} question(s), {len(report.sources)} source(s), "
        f"web {report.web}; {usage['calls']} LLM calls, {usage['total_tokens']} tokens",
        highlight=False,
    )
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    return {"run_id": run.run_id, "report": report.path, "questions": report.questions, "sources": report.sources,
            "web": report.web, "usage": usage, "notes": report.notes}  # fmt: skip
