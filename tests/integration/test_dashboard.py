"""`eyas ui`, the live dashboard: a real uvicorn process over a runs folder, a real browser (Debian's chromium
through Playwright) that logs in and answers a gate, and every refusal that keeps an answer from being recorded
without the token or the CSRF token. The slow test answers a real `eyas run` on the embedded target, and kills
its resume at each named point of the launch (it is also the pipeline's "kill between approval and launch" test)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from dashboard_server import TOKEN, Dashboard, dashboard, form_value
from deploy_results import rolled_back
from eyas.agents.faces.dashboard.views import gate_panel
from eyas.graph.crash_points import CRASH_AT
from eyas.graph.gates.view import read_view
from eyas.graph.life.run_view import read_run
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.progress import TAG
from gated_runs import run_at_data_gate
from pipeline_runs import (
    EYAS,
    TINY,
    conversation_ids,
    environment,
    events,
    eyas,
    job_dir,
    launches,
    only_run,
    start,
)

REASON = 'fits the disk <b>really</b> & "quoted"'
EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline"
RECORDED = "run-20261207-0000-recorded"
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[RunDir, Dashboard]]:
    """A run waiting at its data gate (research text that tries to run script), and the dashboard over it."""
    run = run_at_data_gate(tmp_path / "runs", "run-gated", {"research": HOSTILE})
    with dashboard(tmp_path / "runs", tmp_path / "ui.log") as served:
        yield run, served


def log_in(page: Page, served: Dashboard, problems: list[str]) -> None:
    """Refused with a wrong token, then logged in; from then on every console error or page error is a problem."""
    page.goto(served.url + "/")
    expect(page).to_have_url(served.url + "/login")
    page.fill("input[name=token]", "not-the-token-at-all")
    page.click("button[type=submit]")
    expect(page.locator("#login-error")).to_be_visible()
    page.fill("input[name=token]", served.token)
    page.click("button[type=submit]")
    expect(page).to_have_url(served.url + "/")
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))


def lead_under_the_title(page: Page) -> str:
    """The text of the first thing under the run page's title bar, after checking it is the outcome line and that
    nothing is drawn between them."""
    found = page.evaluate(
        """() => {
            const bar = document.querySelector("header.bar"), first = bar.nextElementSibling.firstElementChild;
            const gap = first.getBoundingClientRect().top - bar.getBoundingClientRect().bottom;
            return {id: first.id, text: first.textContent, gap: gap};
        }"""
    )
    assert found["id"] == "outcome" and 0 <= found["gap"] < 40, found
    return str(found["text"])


def test_log_in_and_approve_in_the_browser(gated: tuple[RunDir, Dashboard], browser: Browser) -> None:
    run, served = gated
    rolled_back(run.root)  # a deploy.json from an earlier deploy (`eyas deploy`), for the page's width below
    recorded = run.root.parent / RECORDED  # ended, without a checkpoint; listed before run-gated by its id
    shutil.copytree(EXAMPLE, recorded)
    rolled_back(recorded)
    page = browser.new_page()
    problems: list[str] = []
    log_in(page, served, problems)
    # The list: the run waiting for an answer first and badged; each run's outcome, production's speedup and age.
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td").nth(0)).to_have_text("run-gated waiting at the data gate for an answer")
    expect(rows.nth(0).locator(".badge")).to_be_visible()
    cells = rows.nth(1).locator("td")
    expect(cells.nth(0)).to_have_text(RECORDED)
    expect(cells.nth(1)).to_have_text("rolled back")
    expect(cells.nth(2)).to_have_text("0.73x")  # production's own counters (deploy.json)
    expect(cells.nth(3)).to_have_text(re.compile(r"^(just now|\d+ (min|h|d) ago)$"))
    page.set_viewport_size({"width": 390, "height": 900})  # the list on a phone: nothing scrolls the page sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 900})
    page.click("text=run-gated")

    # Under the title, where the run waits, never "not finished"; the answers right after it, on a phone too.
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert lead_under_the_title(page) == "waiting at the data gate for an answer"
        approve = page.locator("#approve").bounding_box()
        assert approve is not None and approve["y"] + approve["height"] <= 900, (width, approve)
    for wrong in ("not finished", "ended before its evaluation"):
        expect(page.locator("body")).not_to_contain_text(wrong)
    gate = page.locator("#gate")
    expect(gate.locator("h2")).to_have_text("Gate: data")
    expect(gate.locator("code.command")).to_contain_text("generate.py --input")  # the exact command
    expect(gate).to_contain_text("up and generating")  # the verification
    expect(page.locator("#research")).to_contain_text(HOSTILE)  # shown as text, never run
    gate_id = page.locator("#live").get_attribute("data-gate")
    # The run page shares report.html's style: it wraps on a phone too, a deploy's 330-character drop-in line with it.
    expect(page.locator("#production pre")).to_contain_text("--speculative-config")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= width

    # The live part follows the run's files: a job's log, as the driver's next poll reads it, appears by itself.
    progress = TAG + json.dumps({"done": 120, "total": 400, "tokens_per_s": 41.5})
    poll = {"v": 1, "seq": 1, "kind": "command", "task": "monitor_data", "t": time.time(), "host": "local",
            "command": "tail -n 20 /w/jobs/run-gated.generate/log 2>/dev/null", "timeout": 30.0, "rc": 0,
            "stdout": f"eyas: started\nwrote 3 of 120 <conversations>\n{progress}\n"}  # fmt: skip
    run.transcript.write_text(json.dumps(poll) + "\n")
    log = page.locator("#live pre.log")
    expect(log).to_contain_text("wrote 3 of 120 <conversations>", timeout=30_000)
    expect(log).to_contain_text("progress: 120/400 (30%), 41.5 tokens/s")  # in words, not the protocol's line
    assert TAG.strip() not in page.content()
    assert lead_under_the_title(page) == "waiting at the data gate for an answer"  # refreshed with the live part

    page.fill("#answer input[name=reason]", REASON)
    page.click("#approve")
    expect(page.locator("#answered")).to_contain_text(f"approve by dashboard: {REASON}")
    assert gate_id is not None
    # Recorded as `eyas approve` records it, for the gate the run waits at; the driver reads it with answer_for.
    assert run.answer_for(gate_id) == GateAnswer(action="approve", reason=REASON, who="dashboard")
    assert page.evaluate("window.pwned") is None

    # An ended run leads with its outcome and next step, as `eyas status` says them, at both widths.
    page.goto(f"{served.url}/runs/{RECORDED}")
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert lead_under_the_title(page).startswith("outcome: rolled back: speedup 0.73x")
    expect(page.locator("#lead .step").first).to_contain_text("next step: ")
    assert problems == []
    page.close()


def test_edited_sizes_are_checked_and_recorded_whole(gated: tuple[RunDir, Dashboard]) -> None:
    run, served = gated
    client = served.logged_in()
    html = client.get("/runs/run-gated").text
    fields = {"csrf": form_value(html, "csrf"), "gate_id": form_value(html, "gate_id"), "action": "edit"}
    refused = client.post("/runs/run-gated/answer", data={**fields, "size.samples": "-4"})
    assert refused.status_code == 400 and "samples: Input should be greater than 0" in refused.text
    assert not run.answers.exists()
    huge = client.post("/runs/run-gated/answer", data={**fields, "size.samples": str(10**24)})
    assert huge.status_code == 400 and "samples: Input should be less than or equal to" in huge.text
    assert not run.answers.exists()  # refused before it became the gate's one answer (it would fail every resume)
    wrong_kind = client.post("/runs/run-gated/answer", data={**fields, "action": "retry"})
    assert wrong_kind.status_code == 409 and not run.answers.exists()
    moved_on = client.post("/runs/run-gated/answer", data={**fields, "gate_id": "another-gate", "size.samples": "40"})
    assert moved_on.status_code == 409 and not run.answers.exists()

    recorded = client.post("/runs/run-gated/answer", data={**fields, "size.samples": "40", "reason": "smaller"})
    assert recorded.status_code == 303
    answer = run.answer_for(fields["gate_id"])
    assert answer is not None and answer.action == "edit" and answer.who == "dashboard"
    # The edited size changes; the others stay as the run had them (the demo's, see tests/support/gated_runs.py).
    assert answer.sizes is not None and answer.sizes["samples"] == 40 and answer.sizes["epochs"] == DEMO.epochs


def one_off(secret: str) -> str:
    """`secret` with its last character changed (a token that ends in "x" stays itself with an "x" put there)."""
    return secret[:-1] + ("y" if secret.endswith("x") else "x")


def test_no_token_wrong_token_or_no_csrf_token_is_refused_and_records_nothing(
    gated: tuple[RunDir, Dashboard],
) -> None:
    run, served = gated
    anonymous = served.client()
    assert anonymous.get("/").headers["location"] == "/login"
    assert anonymous.get("/runs/run-gated").headers["location"] == "/login"
    assert anonymous.get("/runs/run-gated/live").status_code == 401
    assert anonymous.get("/static/live.js").status_code == 401
    wrong = anonymous.post("/login", data={"token": one_off(TOKEN)})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    assert anonymous.post("/login", data={}).status_code == 401
    anonymous.cookies.set("eyas_session", "made-up")
    assert anonymous.get("/runs/run-gated").status_code == 303

    client = served.logged_in()
    html = client.get("/runs/run-gated").text
    csrf, gate_id = form_value(html, "csrf"), form_value(html, "gate_id")
    answer = {"gate_id": gate_id, "action": "approve", "reason": "forged"}
    assert anonymous.post("/runs/run-gated/answer", data={**answer, "csrf": csrf}).status_code == 401
    assert client.post("/runs/run-gated/answer", data=answer).status_code == 403
    assert client.post("/runs/run-gated/answer", data={**answer, "csrf": one_off(csrf)}).status_code == 403
    assert client.get("/runs/run-gated/answer").status_code == 405  # answers are POSTs only
    assert not run.answers.exists()

    for response in (anonymous.get("/login"), client.get("/"), client.get("/runs/run-gated/live"), wrong):
        assert response.headers["cache-control"] == "no-store"
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert TOKEN not in response.text
    # Not in `ps` (the token came through the environment), nor in the server's log.
    assert TOKEN not in Path(f"/proc/{served.pid}/cmdline").read_text()
    assert TOKEN not in served.output.read_text()


def test_a_token_made_at_start_is_printed_once_and_logs_in(tmp_path: Path) -> None:
    with dashboard(tmp_path / "runs", tmp_path / "ui.log", token=None) as served:
        assert len(served.token) >= 32
        client = served.logged_in()
        assert "No run yet." in client.get("/").text
        assert served.token not in Path(f"/proc/{served.pid}/cmdline").read_text()
    assert served.output.read_text().count(served.token) == 1


def test_the_gate_views_escape_what_they_show() -> None:
    failure = read_view({"kind": "failure", "phase": "data", "job_id": "run.generate", "status": "lost",
                         "diagnosis": "<i>vanished</i>", "log_tail": "Traceback <module>\n"})  # fmt: skip
    html = gate_panel("run-x", "gate-1", failure, "csrf-1", None)
    assert 'value="retry"' in html and 'value="abort"' in html and 'value="approve"' not in html
    assert "&lt;i&gt;vanished&lt;/i&gt;" in html and "Traceback &lt;module&gt;" in html and "<i>" not in html
    approval = read_view({"kind": "gate", "phase": "data", "host": "gpu", "estimate": {},
                          "commands": ["python x.py --out '<a>'"],
                          "sizes": {"prompt_source": '"/><script>'}})  # fmt: skip
    html = gate_panel("run-x", "gate-1", approval, "csrf-1", None)
    assert "<script>" not in html and "&lt;a&gt;" in html and 'value="edit"' in html


@pytest.mark.slow
def test_a_real_run_approved_in_the_browser_and_killed_at_launch_launches_its_job_once(
    embedded_target: EmbeddedTarget, tmp_path: Path, browser: Browser
) -> None:
    """A real `eyas run` answered in the browser at its data gate; `eyas resume` killed (SIGKILL, by the crash hook
    of graph/crash_points.py) after the approval is checkpointed and before the job starts, then again after the job
    starts and before the launch is checkpointed; the next resume launches the generation job exactly once, and the
    page follows the run to the extract gate."""
    runs = tmp_path / "runs"
    stopped = eyas(embedded_target, runs, "run", *TINY)  # no policy, no terminal: it stops at the data gate
    assert stopped.returncode == 3 and "stopped at the data gate" in stopped.stdout, stopped.stdout + stopped.stderr
    run = only_run(runs)
    generate = job_dir(embedded_target, run.name, "generate")
    assert not generate.exists()
    with dashboard(runs, tmp_path / "ui.log") as served:
        page = browser.new_page()
        problems: list[str] = []
        log_in(page, served, problems)
        page.goto(f"{served.url}/runs/{run.name}")
        expect(page.locator("#gate h2")).to_have_text("Gate: data")
        page.fill("#answer input[name=reason]", REASON)
        page.click("#approve")
        expect(page.locator("#answered")).to_contain_text("approve by dashboard")

        for point, launched in (("before_launch", False), ("after_launch", True)):
            crashed = subprocess.run(
                [EYAS, "resume", run.name], env={**environment(embedded_target, runs), CRASH_AT: point},
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert crashed.returncode == -signal.SIGKILL, (point, crashed.stdout + crashed.stderr)
            last = [(e["node"], e["phase"]) for e in events(run) if e["kind"] == "node"][-1]
            assert last == ("launch_data", "start"), (point, last)  # killed inside the launch node, before its end
            assert generate.exists() is launched, point

        resumed = start(embedded_target, runs, "resume", run.name)  # the driver picks the answer up
        # The page follows the run: its generation job appears, then the page shows the next gate.
        expect(page.locator("#live")).to_contain_text(f"{run.name}.generate", timeout=300_000)
        output, _ = resumed.communicate(timeout=600)
        assert resumed.returncode == 3 and "stopped at the extract gate" in output, output
        expect(page.locator("#gate h2")).to_have_text("Gate: extract", timeout=60_000)
        assert problems == []
        page.close()
    assert launches(embedded_target, run.name, "generate") == 1
    ids = conversation_ids(embedded_target, run.name)
    assert len(ids) == len(set(ids)) == 24
    decisions = read_run(RunDir(run)).state["decisions"]
    assert {"gate": "data", "action": "approve", "reason": REASON, "who": "dashboard"} in decisions
