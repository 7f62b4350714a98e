"""Every HTTP client of eyas ends a request at its deadline, even against a server that keeps trickling bytes
(each arriving well within any per-read timeout): the control plane's HttpClient, the agent LLM's client,
and the workloads' fetch."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from eyas.agents.llm import LLM, LlmUnavailable, RetryPolicy
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.settings.config import AgentConfig
from trickle_http import Phase, trickle_server

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import http_fetch

DEADLINE_S = 0.5  # ten trickled bytes' time: a per-read timeout of this length never trips
INTERVAL_S = 0.05


def _control_plane(url: str) -> None:
    HttpClient().get(f"{url}/v1/models", timeout=DEADLINE_S)


def _agent_llm(url: str) -> None:
    config = AgentConfig(base_url=f"{url}/v1", model="trickled", api_key_env=None)  # type: ignore[arg-type]
    LLM(config, retry=RetryPolicy(attempts=1), timeout_s=DEADLINE_S).complete({"model": "trickled", "messages": []})


def _workload(url: str) -> None:
    http_fetch.fetch(f"{url}/v1/models", deadline_s=DEADLINE_S)


# client -> (call, the error it must raise, what the error must say)
CLIENTS: dict[str, tuple[Callable[[str], None], type[Exception], str]] = {
    "control plane": (_control_plane, HttpError, f"no complete answer within {DEADLINE_S:g} s"),
    "agent llm": (_agent_llm, LlmUnavailable, f"no complete answer within {DEADLINE_S:g} s"),
    "workload": (_workload, http_fetch.DeadlineExceeded, f"no complete answer within {DEADLINE_S:g} s"),
}


@pytest.mark.parametrize("phase", ["headers", "body"])
@pytest.mark.parametrize("client", CLIENTS.values(), ids=CLIENTS.keys())
def test_a_trickling_server_fails_the_request_at_its_deadline(
    client: tuple[Callable[[str], None], type[Exception], str], phase: Phase
) -> None:
    call, error, message = client
    with trickle_server(phase, interval_s=INTERVAL_S) as url, pytest.raises(error, match=message):
        call(url)
