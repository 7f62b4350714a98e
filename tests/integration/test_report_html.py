"""report.html: built from a recorded run folder, opened in a real headless Chromium (Debian's `chromium`, driven by
Playwright), and built without a crash for runs that stopped at a gate, failed, or were replayed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage

from compared_runs import make_compared_runs
from deploy_results import rolled_back
from eyas.agents.faces.cli.replay import replay
from eyas.agents.faces.report_html.compare_page import write_comparison
from eyas.agents.faces.report_html.comparison import run_figures
from eyas.agents.faces.report_html.page import render_html, write_html_report
from eyas.agents.faces.report_html.record import load_record
from planted_secrets import JWT

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline"
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def example_run(tmp_path: Path) -> Path:
    run = tmp_path / "full-pipeline"
    shutil.copytree(EXAMPLE, run)
    return run


def recorded_evaluation(run: Path) -> dict[str, Any]:
    """The evaluation.json the run's report node read from the host, as the transcript holds it."""
    for line in (run / "transcript.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "file_read" and event["path"].endswith("/evaluation.json"):
            return json.loads(event["content"])
    raise AssertionError("the example run read no evaluation.json")


def test_example_report_renders_in_chromium(example_run: Path, browser: Browser, tmp_path: Path) -> None:
    path = write_html_report(example_run)
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            problems.append(f"{message.type}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(path.as_uri())

    charts = page.locator("figure.chart")
    names = charts.evaluate_all("figures => figures.map(f => f.querySelector('svg').getAttribute('aria-label'))")
    # Generation and extraction: a chart where the run read two or more progress lines of the phase, else the value in
    # words (no one-point chart). How many the run read depends on its polls, so the record says which to expect.
    record = load_record(example_run)
    progressed = {"data": ["gen-done", "gen-tps"], "extract": ["ext-done"]}
    charted = {name for phase, shown in progressed.items() if len(record.job_progress(phase)) >= 2 for name in shown}
    read = [name for phase, shown in progressed.items() if len(record.job_progress(phase)) < 2 for name in shown]
    always = {"timeline", "train-loss", "train-tps", "train-acc", "train-lr", "eval-pos", "eval-tps"}
    assert always | charted == set(names)
    readings = page.locator("p.reading").evaluate_all("ps => ps.map(p => p.dataset.name)")
    assert readings == read
    requests = record.job_progress("data")[-1]["total"]
    assert f"{requests} of {requests} requests done" in page.locator("#generation").inner_text()
    # Each legend lies outside its plot: no swatch sits on a bar or a line of its colour.
    legends = page.evaluate("""() => Array.from(document.querySelectorAll('figure.chart svg')).flatMap(svg => {
        const legend = svg.querySelector('g[id^="legend"]');
        if (!legend) return [];
        const plot = svg.querySelector('g[id^="axes"] > g[id^="patch"]').getBoundingClientRect();
        const box = legend.getBoundingClientRect();
        return [[svg.getAttribute('aria-label'), box.left >= plot.right || box.right <= plot.left ||
                 box.top >= plot.bottom || box.bottom <= plot.top]];
    })""")
    assert {"timeline", "train-loss", "train-tps", "eval-tps"} <= {name for name, _ in legends}
    assert [name for name, apart in legends if not apart] == []
    for index in range(charts.count()):
        chart = charts.nth(index)
        assert int(chart.get_attribute("data-points") or 0) > 1
        assert chart.locator("svg path").count() > 5  # axes, ticks and the data drawn
        box = chart.locator("svg").bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100

    # The first line says what happened: the example's deploy gate was rejected, after the drafter was measured.
    outcome = page.locator("#outcome").inner_text()
    assert outcome.startswith("stopped at the deploy gate: rejected: an example leaves the server as it is. ")
    measured = recorded_evaluation(example_run)
    said_length = f"{measured['mean_acceptance_length']:.2f} at k={measured['k']}"
    assert f"The drafter measured mean acceptance length {said_length}" in outcome
    meta = json.loads((example_run / "run.json").read_text())
    said = {key: page.locator(f'#what-ran [data-key="{key}"]').inner_text() for key in ("eyas", "host packages",
            "prompts", "drafter", "training")}  # fmt: skip
    assert said["eyas"] == f"{meta['eyas']['version']}, commit {meta['eyas']['commit']}"
    assert said["host packages"].startswith("vllm 0.32.0, speculators 0.9.0, torch 2.13.0")
    assert said["prompts"].startswith("sharegpt: 24 trained on, 16 held out")
    assert said["drafter"].startswith("/root/.cache/eyas/work/runs/full-pipeline/drafter")
    assert "optimizer adamw on cpu" in said["training"]  # the staged line of the job's log
    sizes = page.locator("#what-ran table").nth(1).inner_text()
    for name, value in meta["sizes"].items():
        text = (
            ("on" if value else "off") if isinstance(value, bool) else f"{value:,}" if isinstance(value, int) else value
        )
        assert f"{name}\t{text}\t" in sizes

    evaluation = recorded_evaluation(example_run)
    cells = page.locator("#drafter-result [data-key]")
    shown = {cell.get_attribute("data-key"): cell for cell in cells.all()}
    for key in ("mean_acceptance_length", "acceptance_rate", "speedup", "tokens_per_s_baseline",
                "tokens_per_s_speculative"):  # fmt: skip
        assert float(shown[key].get_attribute("data-value") or "nan") == evaluation[key]
        assert shown[key].inner_text().split()[0] == f"{evaluation[key]:.3f}"
    assert shown["outputs_identical"].get_attribute("data-value") == str(evaluation["outputs_identical"])

    page.screenshot(path=str(tmp_path / "report-desktop.png"), full_page=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # tables scroll in their box
    page.screenshot(path=str(tmp_path / "report-phone.png"), full_page=True)
    page.emulate_media(media="print")
    page.pdf(path=str(tmp_path / "report.pdf"))
    page.close()

    assert problems == []
    assert requested == [path.as_uri()]  # nothing fetched: no CDN, no font, no script
    for shot in ("report-desktop.png", "report-phone.png", "report.pdf"):
        assert (tmp_path / shot).stat().st_size > 10_000


@pytest.mark.parametrize("width", [1280, PHONE["width"]])
def test_the_page_never_scrolls_sideways(example_run: Path, browser: Browser, width: int) -> None:
    result = rolled_back(example_run)
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(write_html_report(example_run).as_uri())
    assert page.locator("#outcome").inner_text() == f"rolled back: {result.reason}"
    drop_in = page.locator("#production pre")
    assert drop_in.inner_text() == result.drop_in_text  # wrapped on screen, never cut
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), page.evaluate(
        "document.documentElement.scrollWidth"
    )
    box = drop_in.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width
    page.close()


def test_example_report_says_what_it_lacks(example_run: Path) -> None:
    html = render_html(example_run)
    assert "Not in this run: a research summary" in html  # recorded without an [agent]
    assert "Not in this run: confidence intervals" not in html
    assert "Not in this run: the drafter&#x27;s metrics.jsonl curves" not in html
    # Planned against actual, once: times and bytes in one table.
    assert html.count("<th>planned / took</th>") == 1 and html.count("<th>planned bytes</th>") == 1


def end_of(run: Path, node: str) -> int:
    """The seq of the recorded run's event that ends `node`."""
    events = [json.loads(line) for line in (run / "transcript.jsonl").read_text().splitlines()]
    return next(e["seq"] for e in events if e["kind"] == "node" and e["node"] == node and e["phase"] == "end")


def cut_transcript(run: Path, last_seq: int, extra: list[dict[str, Any]]) -> None:
    """Keep the run's events up to `last_seq`, then append `extra` (numbered on)."""
    lines = (run / "transcript.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["seq"] <= last_seq]
    t = json.loads(kept[-1])["t"]
    added = [
        json.dumps({"v": 1, "seq": last_seq + 1 + index, "task": "main", "t": t + index + 1, **event})
        for index, event in enumerate(extra)
    ]
    (run / "transcript.jsonl").write_text("\n".join(kept + added) + "\n")


def test_run_stopped_at_a_gate(example_run: Path) -> None:
    # Stopped at the extract gate: the policy said no and nobody answered.
    cut_transcript(
        example_run, end_of(example_run, "gate_extract"), [{"kind": "approval", "gate": "extract", "duration_s": 0.5}]
    )
    html = render_html(example_run)
    assert "extract: no answer: the run stopped here" in html
    assert "Not in this run: a drafter result: the run has not reached its evaluation yet" in html
    assert "Not in this run: extraction progress" in html
    assert "Not in this run: training curves" in html
    assert "Requests done" in html and "Not in this run: generation progress" not in html  # what ran is still shown


def test_failed_run(example_run: Path) -> None:
    failure = {"phase": "train", "job_id": "full-pipeline.train", "status": "exited 1", "log_tail": "",
               "diagnosis": "CUDA out of memory <b>at step 3</b>"}  # fmt: skip
    cut_transcript(
        example_run,
        end_of(example_run, "launch_train"),
        [
            {"kind": "node", "node": "monitor_train", "phase": "start"},
            {"kind": "node", "node": "monitor_train", "phase": "end", "output": {"failure": failure}},
            {"kind": "node", "node": "report", "phase": "start"},
            {"kind": "node", "node": "report", "phase": "end", "error": {"type": "OSError", "message": "disk full"}},
        ],
    )
    html = render_html(example_run)
    assert "failed in train: job full-pipeline.train exited 1: CUDA out of memory &lt;b&gt;at step 3&lt;/b&gt;" in html
    assert "<b>at step 3</b>" not in html
    assert "report: OSError: disk full" in html
    assert "Not in this run: an evaluation" in html


def test_replayed_transcript(example_run: Path) -> None:
    _, state = replay(example_run / "transcript.jsonl")
    html = render_html(example_run, state)
    assert "eyas run full-pipeline" in html and 'aria-label="timeline"' in html
    # A run recorded before its input carried eyas's build: run.json's is shown.
    state.pop("eyas", None)
    version = json.loads((example_run / "run.json").read_text())["eyas"]["version"]
    assert f'<span data-key="eyas">{version}, commit ' in render_html(example_run, state)


def test_missing_transcript_and_hostile_text(tmp_path: Path) -> None:
    run = tmp_path / "empty-run"
    run.mkdir()
    state = {"run_id": "empty-run", "research": f"<script>alert(1)</script> token {JWT}", "stopped": "rejected"}
    html = render_html(run, state)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert JWT not in html
    assert "Not in this run: the transcript" in html and "Not in this run: run.json" in html


def test_the_comparison_never_scrolls_sideways_on_a_phone(tmp_path: Path, browser: Browser) -> None:
    first, second = make_compared_runs(tmp_path)
    page_path, _ = write_comparison(
        tmp_path / first, [run_figures(run, load_record(tmp_path / run)) for run in (first, second)]
    )
    page = browser.new_page(viewport=PHONE)
    page.goto(page_path.as_uri())
    assert page.locator("#training figure.chart").count() == 2  # loss and tokens/s, both runs in each
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), page.evaluate(
        "document.documentElement.scrollWidth"
    )
    page.screenshot(path=str(tmp_path / "compare-phone.png"), full_page=True)
    page.close()
