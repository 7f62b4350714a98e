"""More rows of the bad-input table (test_bad_input.py, whose Case, scratch folder and one-paragraph rule these reuse):
where `eyas config init` writes, an EYAS_RUNS_DIR no folder can be at, and `eyas chat` against an agent LLM that
answers no API JSON or an operator line that is not UTF-8. Each runs the real `eyas` command line and must end
without a traceback, in one paragraph that names the problem and the fix (exit 2, or the chat waits on)."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_bad_input import VALID_CONFIG, Case, check_case, paragraph, scratch

from in_process import eyas
from openai_stub import MODELS, completion

__all__ = ["scratch"]  # the table's autouse fixture: each case in its own folder, runs folder and cache

RUNS_FIX = "Point EYAS_RUNS_DIR at a folder eyas may create and write"
TOO_LONG = "x" * 300  # longer than any Linux filesystem's 255-byte names


def runs_dir(path: str) -> dict[str, str]:
    return {"EYAS_RUNS_DIR": path}


CASES = [
    Case("config-init", "under-proc", ["config", "init", "/proc/eyas.toml"], 2,
         ("could not write the example config to /proc/eyas.toml", "pass a path in a folder you may write")),
    Case("config-init", "directory-force", ["config", "init", "d", "--force"], 2,
         ("d is a directory, not a config file", "pass a file name, such as d/eyas.toml"), files={"d/x": ""}),
    Case("runs-dir", "a-file", ["run", "--run-id", "r1"], 2, ("is a file, not a folder", RUNS_FIX),
         files={"f": ""}, env=runs_dir("f")),
    Case("runs-dir", "a-file-status", ["status", "r1"], 2, ("is a file, not a folder", RUNS_FIX),
         files={"f": ""}, env=runs_dir("f")),
    Case("runs-dir", "under-a-file", ["run", "--run-id", "r1"], 2, ("which is a file", RUNS_FIX),
         files={"f": ""}, env=runs_dir("f/runs")),
    Case("runs-dir", "name-too-long", ["run", "--run-id", "r1"], 2, ("has a name longer than the", RUNS_FIX),
         env=runs_dir(TOO_LONG)),
    Case("runs-dir", "name-too-long-status", ["status", "r1"], 2, ("has a name longer than the", RUNS_FIX),
         env=runs_dir(TOO_LONG)),
    Case("runs-dir", "under-proc", ["run", "--run-id", "r1"], 2, ("could not create the run folder /proc/", RUNS_FIX),
         env=runs_dir("/proc/eyas-runs")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_readable_paragraph(case: Case, scratch: Path) -> None:
    assert case.code  # every row here is refused: check_case then holds its words to one paragraph
    check_case(case, scratch)


# -- `eyas chat` against an agent LLM endpoint that answers something other than the API's JSON, and an operator's
# line that is not UTF-8 ---------------------------------------------------------------------------------------------

NOT_API = "answered something that is not the chat completions API's JSON"
ENDPOINT_FIX = "set base_url in the config's [agent] section"
HUGE_CHUNK = b"a" * 65536
JSON = "application/json"


class BrokenEndpoint:
    """STAND-IN for a broken agent LLM endpoint (no real server answers a proxy's login page, a cut JSON body or a
    reply far too long on demand): the first `good` chat requests get a well-formed completion, every later one `reply`
    (status, content type, body; a body of None streams 64 MiB, eight times the most the client reads)."""

    def __init__(
        self, reply: tuple[int, str, bytes | None], good: int = 0, models: tuple[int, str, bytes] = (200, JSON, MODELS)
    ) -> None:
        self.posts = 0
        self.gets = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                endpoint.gets += 1
                self._send(*models)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                endpoint.posts += 1
                good_one = (200, "application/json", completion("Hello, operator."))
                self._send(*(good_one if endpoint.posts <= good else reply))

            def _send(self, status: int, content_type: str, body: bytes | None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if body is not None:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(ConnectionError):
                    for chunk in [body] if body is not None else itertools.repeat(HUGE_CHUNK, 1024):
                        self.wfile.write(chunk)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def chat_config(scratch: Path, endpoint: BrokenEndpoint) -> Path:
    config = scratch / "c.toml"
    config.write_text(f'{VALID_CONFIG}\n[agent]\nbase_url = "{endpoint.url}"\nmodel = "m"\n')
    return config


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ((200, "text/html", b"<html><body>Sign in to the proxy</body></html>"),
         ("HTTP 200, text/html, 46 bytes beginning '<html><body>Sign in to the proxy")),
        ((200, "application/json", b'{"choices": [ {"message": '), ("HTTP 200, application/json, 26 bytes beginning")),
        ((200, "application/json", None), ("an answer of more than 8,388,608 bytes")),
    ],
    ids=["html", "invalid-json", "far-too-long"],
)  # fmt: skip
def test_a_chat_whose_llm_answers_no_api_json_says_what_came_back(
    reply: tuple[int, str, bytes | None], says: str, scratch: Path
) -> None:
    endpoint = BrokenEndpoint(reply)
    try:
        ran = eyas("chat", "--config", str(chat_config(scratch, endpoint)))
    finally:
        endpoint.close()
    assert "Traceback" not in ran.output and ran.code == 2, ran.output
    said = paragraph(ran.output, NOT_API)
    assert all(part in said for part in (says, endpoint.url, ENDPOINT_FIX)), ran.output


def test_a_chat_starts_when_only_the_model_listing_is_a_web_page(scratch: Path) -> None:
    """The listing (GET /v1/models) only says the context length: a page instead of it leaves the default."""
    endpoint = BrokenEndpoint((200, JSON, completion("ok")), models=(200, "text/html", b"<html>Sign in</html>"))
    try:
        ran = eyas("chat", "--config", str(chat_config(scratch, endpoint)))
    finally:
        endpoint.close()
    assert "Traceback" not in ran.output and ran.code == 0, ran.output
    assert endpoint.gets == 1 and f"talking to m at {endpoint.url}" in ran.output


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_a_chat_goes_on_after_a_line_that_is_not_utf8_and_an_answer_that_is_no_api_json(
    locale: str, scratch: Path
) -> None:
    """The real program in its own process, reading its standard input as a terminal's: under the C locale Python
    keeps undecodable bytes as surrogates, under a UTF-8 one it refuses them; both are said, and the chat waits."""
    endpoint = BrokenEndpoint((200, "text/html", b"<html>Sign in</html>"), good=1)  # the start-up's ping passes
    try:
        ran = subprocess.run(
            [sys.executable, "-m", "eyas", "chat", "--config", str(chat_config(scratch, endpoint))],
            input=b"caf\xe9 \xff\n" + (b"hello\n" if locale == "C" else b""), capture_output=True, timeout=120,
            env={**os.environ, "LC_ALL": locale, "COLUMNS": "400"},
        )  # fmt: skip
    finally:
        endpoint.close()
    output = (ran.stdout + ran.stderr).decode(errors="replace")
    assert "Traceback" not in output and ran.returncode == 0, output
    assert "That line is not UTF-8 text, so nothing was sent" in output
    assert "`eyas chat --resume` continues" in output  # it went on to the end of its input
    if locale == "C":
        assert NOT_API in output and "HTTP 200, text/html" in output and "Sign in" in output, output


# -- `eyas plan --prompts FILE` with a file that holds no prompt: refused before the served model is measured (its
# probes take minutes on a CPU target) ---------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", 'garbage\n\x01 nope\n{{{\n{"id": 5}\n'], ids=["empty", "garbage"])
def test_a_plan_refuses_a_prompt_file_without_one_prompt_before_measuring_anything(content: str, scratch: Path) -> None:
    served = BrokenEndpoint((200, "application/json", completion("ok")))  # a served model that would be measured
    prompts = scratch / "prompts.jsonl"
    prompts.write_text(content)
    config = scratch / "c.toml"
    base_url = served.url.removesuffix("/v1")
    config.write_text(VALID_CONFIG.replace("http://127.0.0.1:8000", base_url).replace("/tmp/eyas-work", str(scratch)))
    try:
        ran = eyas("plan", "--config", str(config), "--prompts", str(prompts))
    finally:
        served.close()
    assert "Traceback" not in ran.output and ran.code == 2, ran.output
    said = paragraph(ran.output, "holds 0 usable prompts")
    assert all(part in said for part in (str(prompts), "Ways out", "--prompts sharegpt", "Nothing was measured"))
    assert (served.gets, served.posts) == (0, 0)  # the model was never asked
