"""Web search (rate limit, cache, backoff, the "web is down" breaker), pages as text, and the local sources
research falls back on: installed packages' READMEs and the host's --help.

Stand-ins: a search backend (tests/support/search_standin.py: this machine has no internet) and a virtual clock
for the limiter and backoff (tests/support/virtual_clock.py, so no test sleeps). The offline path uses the real
ddgs, which really fails here.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from eyas.tools.checks.host_facts import search_docs
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.upload import workload_path
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.web.search import (
    PROCESS_LIMITER,
    DdgsBackend,
    RateLimiter,
    SearchCache,
    SearchHit,
    SearchUnavailable,
    WebSearch,
)
from eyas.tools.web.webpage import fetch_page, html_to_text
from search_standin import StandInSearch
from stub_http import stub_server
from virtual_clock import VirtualClock

HIT = SearchHit(title="EAGLE-3 in vLLM", url="https://docs.example/eagle3", snippet="--speculative-config")


def web(backend: StandInSearch, clock: VirtualClock, **options: object) -> WebSearch:
    return WebSearch(backend=backend, limiter=RateLimiter(0, clock), cache=SearchCache(), clock=clock, **options)  # type: ignore[arg-type]


def test_a_query_is_fetched_once_and_every_search_is_recorded(tmp_path: Path) -> None:
    backend = StandInSearch(lambda query: [HIT])
    recorder = Recorder.open(tmp_path / "t.jsonl")
    search = WebSearch(recorder, backend, limiter=RateLimiter(0), cache=SearchCache())
    assert search.search("eagle3 vllm") == [HIT]
    assert search.search("  EAGLE3   vllm ") == [HIT]  # the same query, spelt differently
    assert search.search("eagle3 vllm", max_results=1) == [HIT]  # another request: fetched again
    recorder.close()
    assert backend.calls == ["eagle3 vllm", "eagle3 vllm"]
    events = read_transcript(tmp_path / "t.jsonl").events
    assert [(e.kind, e.query) for e in events] == [
        ("search", "eagle3 vllm"),
        ("search", "EAGLE3 vllm"),
        ("search", "eagle3 vllm"),
    ]  # type: ignore[attr-defined]


def test_the_rate_limit_spaces_calls_across_searchers() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(2.0, clock)
    backend = StandInSearch(lambda query: [])
    first = WebSearch(backend=backend, limiter=limiter, cache=SearchCache(), clock=clock)  # type: ignore[arg-type]
    second = WebSearch(backend=backend, limiter=limiter, cache=SearchCache(), clock=clock)  # type: ignore[arg-type]
    for search, query in ((first, "a query"), (second, "b query"), (first, "c query")):
        search.search(query)
    assert clock.sleeps == [2.0, 2.0]
    assert WebSearch().limiter is PROCESS_LIMITER  # every researcher of a process shares one


def test_failures_are_retried_with_exponential_backoff() -> None:
    clock = VirtualClock()
    backend = StandInSearch(lambda query: [HIT], failures=2)
    assert web(backend, clock, attempts=3, backoff_s=1.5).search("q one") == [HIT]
    assert clock.sleeps == [1.5, 3.0]


def test_a_backend_that_breaks_is_not_retried_and_every_try_waits_its_turn_at_the_limiter() -> None:
    """Only SearchFailed is worth another try: a bug in a backend surfaces at once, with no wait and no breaker."""
    clock = VirtualClock()
    crashing = StandInSearch(crash_on="boom")
    search = web(crashing, clock, attempts=3, backoff_s=1.0)
    with pytest.raises(RuntimeError, match="stand-in crash"):
        search.search("boom query")
    assert crashing.calls == ["boom query"] and clock.sleeps == []
    assert search.search("calm query")  # no breaker was set
    limited = StandInSearch(lambda query: [HIT], failures=2)
    both = WebSearch(backend=limited, limiter=RateLimiter(5.0, clock), cache=SearchCache(), clock=clock, attempts=3,
                     backoff_s=1.0)  # type: ignore[arg-type]  # fmt: skip
    assert both.search("q") == [HIT]
    # backoff 1, then the limiter's 4 more (its slots are 5 s apart); backoff 2, then its 3 more: tries at 0, 5, 10 s
    assert clock.sleeps == [1.0, 4.0, 2.0, 3.0]


def test_the_web_down_breaker_stops_retrying_then_tries_again_later() -> None:
    clock = VirtualClock()
    backend = StandInSearch(lambda query: [HIT], failures=3)
    search = web(backend, clock, attempts=3, backoff_s=0.5, down_for_s=600)
    with pytest.raises(SearchUnavailable, match=r"failed 3 times .* stand-in failure 3"):
        search.search("q one")
    with pytest.raises(SearchUnavailable, match="not retried for 600 s"):
        search.search("q two")
    assert len(backend.calls) == 3  # the second search did not wait through retries
    clock.t += 601
    assert search.search("q two") == [HIT]


def test_offline_the_real_ddgs_fails_into_search_unavailable(tmp_path: Path) -> None:
    """No internet here: ddgs raises its real DDGSException, which becomes SearchUnavailable; the
    transcript records it and a replay raises the same error type without touching the network."""
    recorder = Recorder.open(tmp_path / "t.jsonl")
    search = WebSearch(
        recorder, DdgsBackend(timeout_s=3), limiter=RateLimiter(0), cache=SearchCache(), attempts=2, backoff_s=0.01
    )
    try:
        hits = search.search("eagle3 speculative decoding vllm")
    except SearchUnavailable as exc:
        assert "DDGSException" in str(exc) and "installed packages" in str(exc)
    else:
        pytest.skip(f"this machine reaches the web ({len(hits)} hits); the offline path needs it not to")
    recorder.close()
    replay = ReplaySession.load(tmp_path / "t.jsonl")
    with pytest.raises(SearchUnavailable):
        WebSearch(replay, DdgsBackend()).search("eagle3 speculative decoding vllm")
    assert replay.report().ok


def test_html_becomes_readable_text() -> None:
    html = """<!doctype html><html><head><title>EAGLE-3 &amp; vLLM</title><style>p{color:red}</style></head>
    <body><nav>Home | Docs</nav><h2>Serving</h2><p>Pass <code>--speculative-config</code>
    with   "method": "eagle3".</p><script>track()</script><ul><li>one</li><li>two</li></ul></body></html>"""
    title, text = html_to_text(html)
    assert title == "EAGLE-3 & vLLM"
    assert text == '## Serving\n\nPass --speculative-config with "method": "eagle3".\n\n- one\n\n- two'


def test_pages_are_fetched_through_the_http_client() -> None:
    routes = {
        "GET /page": (200, "<html><title>T</title><body><p>speculative decoding</p></body></html>"),
        "GET /notes.txt": (200, "plain notes\n"),
    }
    with stub_server(routes) as url:
        page = fetch_page(HttpClient(), f"{url}/page")
        plain = fetch_page(HttpClient(), f"{url}/notes.txt")
        missing = fetch_page(HttpClient(), f"{url}/absent")
    assert (page.title, page.text, page.error) == ("T", "speculative decoding", None)
    assert plain.text == "plain notes"
    assert missing.error == "HTTP 404" and missing.text == ""
    assert fetch_page(HttpClient(), "http://127.0.0.1:9/").error  # nothing listens: an error, not a crash


def test_installed_package_docs_and_local_files_are_searchable(tmp_path: Path) -> None:
    notes = tmp_path / "DESIGN.md"
    notes.write_text("# Notes\n\nUnrelated.\n\nHidden states are tokens x hidden_size x layers x 2 bytes.\n")
    python, script = sys.executable, str(workload_path("package_docs.py"))
    local = search_docs(
        LocalHost(), python, "hidden states bytes", script=script, paths=[str(notes)], packages=False, origin="local"
    )
    assert [(hit.title, hit.origin) for hit in local] == [("DESIGN.md", "local")]
    assert "Hidden states are tokens" in local[0].snippet and local[0].url == f"file://{notes}"
    installed = search_docs(LocalHost(), python, "langgraph stateful graphs agents", script=script)
    assert installed[0].title.startswith("langgraph ") and installed[0].url.startswith("host://local/")


def test_cli_help_reads_installed_commands_and_caches_them_by_version(tmp_path: Path) -> None:
    """cli_help.py on eyas's own console script (a typer app, like speculators') and a module."""
    argv = [sys.executable, str(workload_path("cli_help.py")), "--dist", "eyas", "--module", "pytest --version"]
    command = shlex.join([*argv, "--cache-dir", str(tmp_path)])
    first = json.loads(LocalHost().run(command, timeout=120).stdout.splitlines()[-1])
    assert "--check" in first["commands"]["eyas verify --help"]
    assert "pytest" in first["commands"]["python -m pytest --version"]
    assert first["problems"] == [] and "eyas" in first["versions"]
    cached = next(tmp_path.glob("dist-eyas-*.json"))
    cached.write_text(json.dumps({"eyas --help": "from the cache"}))
    second = json.loads(LocalHost().run(command, timeout=120).stdout.splitlines()[-1])
    assert second["commands"]["eyas --help"] == "from the cache"
